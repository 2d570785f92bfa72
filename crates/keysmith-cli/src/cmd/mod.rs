//! One module per group of subcommands.

pub mod counter;
pub mod row_name;
pub mod sequence;
