//! `keysmith import leaf|tinyid --from mysql://...`: parses, calls
//! [`keysmith::sequence::import`], prints a line per row.

use keysmith::sequence::{self, ImportAction, ImportFormat, ImportItem, ImportReport};

use crate::Global;

/// What `import` takes.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// Whose table to read: leaf (Meituan Leaf's leaf_alloc) or tinyid
    /// (Didi Tinyid's tiny_id_info).
    #[arg(value_parser = ["leaf", "tinyid"])]
    format: String,
    /// Their MySQL database: mysql://USER[:PASSWORD]@HOST[:PORT]/DB, with the
    /// parameters of a mysql:// store URL (password_file=PATH, ssl-mode=...).
    #[arg(long, value_name = "URL")]
    from: String,
    /// The table, if not the default (leaf_alloc, tiny_id_info); database.table
    /// for another database.
    #[arg(long)]
    table: Option<String>,
    /// Say what would be created, change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `import`: one sequence per row, in the store of `--store`. Fails
/// (exit 1, after printing every row) when a row was refused.
pub async fn run(args: ImportArgs, global: &Global) -> anyhow::Result<()> {
    let format: ImportFormat = args.format.parse()?;
    let store = global.open().await?;
    let report = sequence::import(
        &*store,
        format,
        &args.from,
        args.table.as_deref(),
        args.dry_run,
    )
    .await
    .map_err(|e| match e {
        // The library names the parameter; this front end names its flag.
        keysmith::Error::InvalidArgument(m) if m.contains("name the table it is in") => {
            keysmith::Error::InvalidArgument(format!("{m}; give it with --table NAME"))
        }
        other => other,
    })?;
    if global.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for item in &report.items {
            println!("{}", describe(item, report.dry_run));
        }
        println!("{}", summary(&report));
    }
    let refused = report.count(ImportAction::Refused);
    if refused > 0 {
        anyhow::bail!(
            "{refused} of {} rows of {} were refused (see above); the others were {}",
            report.items.len(),
            report.table,
            if report.dry_run {
                "not written (--dry-run)"
            } else {
                "imported"
            }
        );
    }
    Ok(())
}

/// One line for one row.
fn describe(i: &ImportItem, dry_run: bool) -> String {
    let name = &i.source.name;
    let note = i
        .note
        .as_deref()
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    match i.action {
        ImportAction::Created => format!(
            "{name}: {} starting at {} with block {} (old max_id {}){note}",
            if dry_run { "would create" } else { "created" },
            i.start.unwrap_or_default(),
            i.block.unwrap_or_default(),
            i.source.max_id
        ),
        ImportAction::Exists => format!(
            "{name}: a keysmith sequence of that name exists, next {}{note}",
            i.start.unwrap_or_default()
        ),
        ImportAction::Refused => format!("{name}: refused{note}"),
    }
}

fn summary(r: &ImportReport) -> String {
    format!(
        "{} rows of {}: {} {}, {} existing, {} refused{}",
        r.items.len(),
        r.table,
        r.count(ImportAction::Created),
        if r.dry_run { "to create" } else { "created" },
        r.count(ImportAction::Exists),
        r.count(ImportAction::Refused),
        if r.dry_run {
            "; nothing was written (--dry-run)"
        } else {
            ""
        }
    )
}
