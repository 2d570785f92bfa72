//! How many worker ids a group has free: numbers for `workers list`,
//! metrics and status pages, with a warning threshold. (How long a layout's
//! time bits last is [`super::Layout::runway`].) Words are the front ends'
//! business.

use serde::Serialize;

use super::leases::{WorkerList, list_workers};
use crate::Result;
use crate::store::Store;

/// A worker group warns when this share of its worker ids or less is free:
/// a tenth (and always when none is).
pub const WORKERS_FREE_WARNING_SHARE: f64 = 0.1;

/// How many worker ids of a group are held and free: what
/// [`WorkerList::occupancy`] and [`worker_occupancy`] return.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerOccupancy {
    /// The group.
    pub group: String,
    /// Its size: worker ids `0..size`.
    pub size: i64,
    /// Worker ids of `0..size` held by a live lease.
    pub held: i64,
    /// Worker ids of `0..size` free to lease now (`size - held`).
    pub free: i64,
    /// Whether `free` is at or below [`WORKERS_FREE_WARNING_SHARE`] of
    /// `size` (always when none is free).
    pub warning: bool,
}

impl WorkerList {
    /// The occupancy of worker ids `0..size` (the size the holders lease
    /// with; the store does not keep it): held ones are those with a live
    /// lease; every other id of the range is free. A `size` below 0 counts
    /// as 0.
    pub fn occupancy(&self, size: i64) -> WorkerOccupancy {
        let size = size.max(0);
        let held = self
            .workers
            .iter()
            .filter(|w| w.held && (0..size).contains(&w.worker))
            .count() as i64;
        let free = size - held;
        WorkerOccupancy {
            group: self.group.clone(),
            size,
            held,
            free,
            warning: free == 0 || (free as f64) <= size as f64 * WORKERS_FREE_WARNING_SHARE,
        }
    }
}

/// The occupancy of worker ids `0..size` of `group`, read from the store
/// ([`list_workers`], then [`WorkerList::occupancy`]). Reads only.
///
/// # Errors
/// As [`list_workers`].
pub async fn worker_occupancy(
    store: &dyn Store,
    group: &str,
    size: i64,
) -> Result<WorkerOccupancy> {
    Ok(list_workers(store, group).await?.occupancy(size))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::ids::{Layout, WorkerLeases};
    use crate::sequence::lease::LeaseKey;
    use crate::store::memory::MemoryStore;

    const NOW: i64 = 1_795_000_000_000; // 2026-11

    #[test]
    fn a_layout_near_its_end_warns_and_a_past_one_has_no_time_left() {
        let r = Layout::snowflake().runway(NOW);
        assert!(!r.warning);
        assert_eq!(r.ends, Layout::snowflake().report(NOW).ends);
        let years = r.seconds_left / (365.2425 * 86_400.0);
        assert!((years - Layout::snowflake().report(NOW).years_left).abs() < 0.1);
        // 40 bits of 1 ms last 34.8 years: an epoch 33 years back leaves 1.8.
        let old = Layout {
            time_bits: 40,
            epoch_ms: NOW - (33.0 * 365.2425 * 86_400_000.0) as i64,
            ..Layout::snowflake()
        };
        old.validate().unwrap();
        let r = old.runway(NOW);
        assert!(r.warning && r.seconds_left > 0.0, "{r:?}");
        let ended = Layout {
            epoch_ms: 0,
            time_bits: 30,
            ..Layout::snowflake()
        };
        let r = ended.runway(NOW);
        assert_eq!((r.seconds_left, r.warning), (0.0, true));
    }

    #[tokio::test]
    async fn a_full_group_has_none_free_and_warns() {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let leases = WorkerLeases::new(store.clone(), LeaseKey::random());
        let o = worker_occupancy(&*store, "g", 4).await.unwrap();
        assert_eq!((o.size, o.held, o.free, o.warning), (4, 0, 4, false));
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(leases.lease("g", Duration::from_secs(60), 4).await.unwrap());
        }
        let o = worker_occupancy(&*store, "g", 4).await.unwrap();
        assert_eq!((o.held, o.free, o.warning), (4, 0, true));
        leases.release("g", &held[2].lease).await.unwrap();
        let o = worker_occupancy(&*store, "g", 4).await.unwrap();
        assert_eq!((o.held, o.free), (3, 1));
        // 1 of 4 free is over a tenth: no warning.
        assert!(!o.warning);
        assert!(worker_occupancy(&*store, "g", 30).await.unwrap().free == 27);
        assert!(worker_occupancy(&*store, "bad name!", 4).await.is_err());
    }
}
