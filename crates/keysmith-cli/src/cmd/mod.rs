//! One module per group of subcommands.

pub mod bench;
pub mod pool;
pub mod sequence;
