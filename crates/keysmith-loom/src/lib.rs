//! loom's model check of keysmith-core's block cache: the tests are
//! `loom_tests` in `keysmith-core/src/sequence/cache.rs`, compiled here
//! over loom's atomics and mutex (every interleaving of two takers with
//! installs and restores, within each test's preemption bound).
//!
//! `cargo test -p keysmith-loom` (optimised in test builds: the workspace's
//! `[profile.dev.package.keysmith-loom]`). The three-taker test is ignored
//! (minutes): `cargo test -p keysmith-loom -- --ignored`.

// The cache's docs link to the core's items, which are not in this crate.
#![allow(rustdoc::broken_intra_doc_links)]

/// What the cache synchronises with: loom's, in this crate (the core's
/// `sequence/sync.rs` is `std`'s).
mod sync {
    pub(crate) use loom::sync::atomic::{AtomicU64, fence};
    pub(crate) use loom::sync::{Mutex, MutexGuard};
}

// The bulk and restore paths are the core Sequence's: the tests call them.
#[allow(dead_code)]
#[path = "../../keysmith-core/src/sequence/cache.rs"]
pub mod cache;
