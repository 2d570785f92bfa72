//! `create`, `next`, `show`, `list`, `drop`.

use crate::Global;

/// Sequence commands.
#[derive(Debug, clap::Subcommand)]
pub enum SequenceCommand {
    /// Lists sequences.
    List,
}

/// Runs a sequence command.
pub async fn run(cmd: SequenceCommand, global: &Global) -> anyhow::Result<()> {
    let _store = global.open().await?;
    match cmd {
        SequenceCommand::List => Ok(()),
    }
}
