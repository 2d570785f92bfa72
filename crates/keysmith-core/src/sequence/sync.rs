//! The synchronisation primitives of the block cache (`cache.rs`): `std`'s
//! here. The lab crate `keysmith-loom` compiles `cache.rs` over loom's
//! instead, whose tests (`cache.rs`, `mod loom_tests`) explore every
//! interleaving of its takers and installs within loom's bounds.

pub(crate) use std::sync::atomic::{AtomicU64, fence};
pub(crate) use std::sync::{Mutex, MutexGuard};
