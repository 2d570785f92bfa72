//! The conformance suite on the in-memory store.

use std::sync::Arc;

use keysmith::store::{Store, memory::MemoryStore};

async fn fresh_store() -> Option<Arc<dyn Store>> {
    Some(Arc::new(MemoryStore::new()))
}

keysmith::conformance_tests!(fresh_store, one_step_reservation = false);
