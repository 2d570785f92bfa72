//! The synchronisation primitives of the block cache (`cache.rs`), swapped
//! for `loom`'s in the model build (`RUSTFLAGS="--cfg keysmith_loom"`), whose
//! tests explore every interleaving of its takers and installs within loom's
//! bounds (`cache.rs`, `mod loom_tests`). The ordinary build uses `std`'s.
//!
//! The cfg is keysmith's own, not `loom`: `--cfg loom` reaches every crate of
//! the build, and some dependencies switch to their own loom code under it.

#[cfg(not(keysmith_loom))]
pub(crate) use std::sync::atomic::{AtomicU64, fence};
#[cfg(not(keysmith_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(keysmith_loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, fence};
#[cfg(keysmith_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};
