//! `keysmith completions SHELL` and `keysmith man`: what a packager installs
//! beside the binary, generated from the one command definition (clap).

use std::io::Write;

use clap::CommandFactory;
use clap_complete::Shell;

/// Prints the completion script of `shell` for the whole command tree.
///
/// # Errors
/// Writing to stdout failed.
/// The date in the man pages' `.TH` line (`YYYY-MM-DD`, what man readers
/// and `mandoc -T lint` parse): the day this version's pages were last
/// changed. A fixed date, not the build's, so the pages build reproducibly.
const MAN_DATE: &str = "2026-12-02";

pub fn completions(shell: Shell) -> anyhow::Result<()> {
    let mut cmd = crate::Cli::command();
    // Into memory first: the generator panics on a failed write (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "keysmith", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(())
}

/// Prints the man page `keysmith(1)` (roff), or with a subcommand's name,
/// `keysmith-NAME(1)`, as `git` splits its pages.
///
/// # Errors
/// A [`super::UsageError`] naming the subcommands for a name that is none.
pub fn man(subcommand: Option<&str>) -> anyhow::Result<()> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    let page = match subcommand {
        None => cmd,
        Some(name) => {
            let Some(sub) = cmd
                .get_subcommands()
                .find(|s| s.get_name() == name && s.get_name() != "help" && !s.is_hide_set())
            else {
                let names: Vec<&str> = cmd
                    .get_subcommands()
                    .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                    .map(|s| s.get_name())
                    .collect();
                return Err(super::UsageError(format!(
                    "no subcommand {name:?}; man pages exist for: {}",
                    names.join(", ")
                ))
                .into());
            };
            let full = format!("keysmith-{name}");
            sub.clone().name(full.clone()).bin_name(full)
        }
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page)
        .date(MAN_DATE)
        .source(concat!("keysmith ", env!("CARGO_PKG_VERSION")))
        .render(&mut roff)?;
    let mut out = std::io::stdout().lock();
    out.write_all(tidy_roff(&String::from_utf8_lossy(&roff)).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// clap_mangen puts a blank line between two `.br` before an option's
/// possible values; `mandoc -T lint` warns of both breaks around that
/// paragraph space. One `.sp` renders the same.
fn tidy_roff(roff: &str) -> String {
    roff.replace("\n.br\n\n.br\n", "\n.sp\n")
}
