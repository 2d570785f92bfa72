//! The conformance suite on the in-memory store.

use std::sync::Arc;

use keysmith::store::{Store, memory::MemoryStore};

#[macro_use]
mod conformance;

async fn fresh_store() -> Option<Arc<dyn Store>> {
    Some(Arc::new(MemoryStore::new()))
}

conformance_tests!(fresh_store);
