//! What `keysmith bench` measures. Lives in the CLI: the library has no
//! benchmark code in its public API.

pub mod chart;
pub mod compare;
mod http;
pub mod latency;
pub mod limit;
pub mod rate;
mod redis;
pub mod stall;
pub mod strict;
