//! One module per group of subcommands.

pub mod sequence;
