//! The conformance suite on the in-memory store.

use std::sync::Arc;

use keysmith::store::{Store, memory::MemoryStore};

async fn fresh_store() -> Option<Arc<dyn Store>> {
    Some(Arc::new(MemoryStore::new()))
}

keysmith::conformance_tests!(fresh_store);

/// The one-step reservation is offered exactly where the store has one
/// (the memory store has none: its atomic strategy is its locked path).
#[tokio::test]
async fn the_one_step_reservation_is_offered_exactly_where_it_exists() {
    if let Some(store) = fresh_store().await {
        keysmith::conformance::sequences::offers_the_one_step_reservation(store, false).await;
    }
}
