//! One module per group of subcommands.

pub mod sequence;
pub mod shard_key;
