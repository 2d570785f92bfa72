//! keysmith hands out unique keys for databases and services.
#![warn(missing_docs)]

pub mod bench;
mod error;
mod name;
pub mod names;
pub mod pool;
pub mod sequence;
pub mod shard_key;
pub mod store;

pub use error::{Error, Result, closest_names};
pub use name::{MAX_NAME_BYTES, validate_name};
