//! One module per group of subcommands.

pub mod bench;
pub mod counter;
pub mod ids;
pub mod import;
pub mod pool;
pub mod row_name;
pub mod sequence;
pub mod serve;
pub mod serve_config;
pub mod shard_key;
pub mod shard_set;
pub mod ticket;
pub mod verify;
pub mod verify_partitions;
pub mod workers;
