//! `row-name parse`, `row-name revision`: structured row names.

use keysmith::names::{Branch, ContentUrl, Locale, RowName, next_revision};

use crate::Global;

/// Row name commands.
#[derive(Debug, clap::Subcommand)]
pub enum RowNameCommand {
    /// Parses a row name and prints its parts as JSON, with the canonical
    /// name.
    Parse {
        /// A row name, e.g. https://example.com/a#en_GB/3.7 or user/alice.
        name: String,
    },
    /// Takes the next revision number of a branch and prints the revision's
    /// row name.
    ///
    /// The branch's revision sequence (named after
    /// the branch row, e.g. https://example.com/a#3) is created on first use.
    Revision {
        /// The content's URL (made canonical).
        #[arg(long, value_name = "U")]
        url: String,
        /// The branch number.
        #[arg(long, value_name = "B")]
        branch: u64,
        /// The revision's locale: xx_YY, or just xx.
        #[arg(long, value_name = "xx_YY")]
        locale: Option<String>,
    },
}

/// Runs a row name command.
pub async fn run(cmd: RowNameCommand, global: &Global) -> anyhow::Result<()> {
    match cmd {
        RowNameCommand::Parse { name } => {
            let name: RowName = name.parse()?;
            println!("{}", serde_json::to_string(&name.parts())?);
        }
        RowNameCommand::Revision {
            url,
            branch,
            locale,
        } => {
            // Check everything before touching the store.
            let branch = Branch::new(url.parse::<ContentUrl>()?, branch);
            let locale = locale.as_deref().map(str::parse::<Locale>).transpose()?;
            let store = global.open().await?;
            let n = next_revision(&store, &branch).await?;
            let revision = RowName::from(branch.revision(locale, n));
            if global.json {
                println!("{}", serde_json::to_string(&revision.parts())?);
            } else {
                println!("{revision}");
            }
        }
    }
    Ok(())
}
