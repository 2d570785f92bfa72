//! One module per group of subcommands.

pub mod pool;
pub mod sequence;
