//! Names under prefixes, counted in the store (what a quota on a
//! principal's names counts).

use super::{PoolStore, PoolTotals, SequenceStore};
use crate::Result;

/// A set of names: every name that starts with one of `prefixes`, and the
/// names in `exact`. The counts below count a name once only if no name is
/// covered twice (no prefix starts with another, no exact name starts with
/// a prefix): the server's `Principal::scope` builds it so.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NameScope {
    /// Every name that starts with one of these (`""`: every name).
    pub prefixes: Vec<String>,
    /// And these names.
    pub exact: Vec<String>,
}

impl NameScope {
    /// How many sequences the scope covers: one
    /// [`SequenceStore::count_sequences_with_prefix`] per prefix and one
    /// read per exact name. Never lists every sequence on a backend that
    /// overrides the count (every backend of this workspace does).
    ///
    /// # Errors
    /// What the store fails with.
    pub async fn count_sequences(&self, store: &dyn SequenceStore) -> Result<u64> {
        let mut n = 0;
        for p in &self.prefixes {
            n += store.count_sequences_with_prefix(p).await?;
        }
        for name in &self.exact {
            n += u64::from(store.read_sequence(name).await?.is_some());
        }
        Ok(n)
    }

    /// The pools the scope covers and their members together, counted as
    /// [`Self::count_sequences`] counts (with
    /// [`PoolStore::pool_totals_with_prefix`]).
    ///
    /// # Errors
    /// What the store fails with.
    pub async fn pool_totals(&self, store: &dyn PoolStore) -> Result<PoolTotals> {
        let mut t = PoolTotals::default();
        let mut add = |pools: u64, members: u64| {
            t.pools += pools;
            t.members += members;
        };
        for p in &self.prefixes {
            let r = store.pool_totals_with_prefix(p).await?;
            add(r.pools, r.members);
        }
        for name in &self.exact {
            if let Some(row) = store.read_pool(name).await? {
                add(1, u64::try_from(row.size).unwrap_or(0));
            }
        }
        Ok(t)
    }
}
