//! What a store backend builds on: the contract ([`crate::store`], re-exported
//! here whole) and the pieces every backend shares, written once.
//!
//! This module is the API boundary between `keysmith-core` and the driver
//! crates (`keysmith-sqlite`, `keysmith-postgres`, `keysmith-mysql`,
//! `keysmith-etcd`) and any backend written outside this workspace.
//! Applications have no use for it: they open stores through the `keysmith`
//! crate and use handles ([`crate::sequence::Sequence`], [`crate::pool::ValuePool`]).
//!
//! - the arithmetic and checks of the store contract: fences of rows and
//!   pools ([`fenced_member`], [`numbers_fence`]), argument checks
//!   ([`check_count`], [`parse_numbering`]), slot sampling ([`sample_slots`]),
//!   worker-lease rules ([`check_times`], [`all_taken`]);
//! - [`conn::with_conn`] over a [`conn::ConnPool`]: the connection ceremony
//!   of the pooled SQL stores (timeouts, closing a connection a failure may
//!   have broken) and its two timeout messages;
//! - the pool and worker algorithms of the SQL stores, over the statements
//!   each dialect runs: [`sample_members_on`], [`create_pool_in`],
//!   [`fence_pool_in`], [`drop_pool_in`], [`swap_member_with`],
//!   [`acquire_worker_on`], [`plan_take`]; and [`ConnParams`], the
//!   `timeout` and `pool_size` of their URLs;
//! - [`PrefixRange`]: the names under a prefix as one range of a name
//!   index, for the SQL stores' counts by prefix;
//! - [`remembered::Remembered`]: a bounded map of what a backend read last;
//! - [`credentials`] and [`tls`]: certificate, key and password files, and
//!   the rustls verifier of the SQL stores' `sslmode` checks;
//! - [`error_chain`] and [`now_ms`]: an error's causes in one line, and the
//!   clock rows store times by.

pub mod conn;
mod conn_params;
#[cfg(feature = "tls")]
pub mod credentials;
mod pool_sql;
mod prefix;
pub mod remembered;
#[cfg(feature = "tls")]
pub mod tls;
mod worker_sql;

pub use crate::clock::now_ms;
pub use crate::error::error_chain;
pub use crate::store::*;
#[doc(hidden)]
pub use conn_params::{ConnParams, DEFAULT_CONN_TIMEOUT, DEFAULT_POOL_SIZE};
#[doc(hidden)]
pub use pool_sql::{
    FenceClaim, POOL_SAMPLE_RERUNS, PoolReads, PoolSwaps, PoolTx, SwapSeen, create_pool_in,
    drop_pool_in, fence_pool_in, sample_members_on, swap_member_with,
};
pub use prefix::PrefixRange;
#[doc(hidden)]
pub use worker_sql::{
    Attempt, GroupRow, WORKER_ACQUIRE_ATTEMPTS, WorkerAcquire, WorkerTake, acquire_worker_on,
    plan_take,
};
