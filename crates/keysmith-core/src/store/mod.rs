//! The Store contract and its backends.
//!
//! The contract is one trait per concern, each in its own file:
//! [`SequenceStore`] (`sequences.rs`: rows, versions, reservations) and
//! [`PoolStore`] (`pools.rs`: pool members and swaps), [`WorkerStore`]
//! (`workers.rs`: worker-id leases of time-ordered ids), [`NumberStore`]
//! (`numbers.rs`: numbered sequences: per-period counters, gap-free
//! numbers with tickets, the store's clock). [`Store`] is their sum
//! plus what every store has ([`Store::ping`]); it is object-safe, so an
//! `Arc<dyn Store>` is chosen at run time from a URL with [`open`].
//!
//! A backend knows rows, versions and pool members; it knows nothing about
//! blocks, caches or handles. Everything two backends would otherwise both
//! write (argument checks, the arithmetic of a reservation, slot sampling,
//! the pool-metadata cache) lives here, above the backends.
//!
//! Every backend runs the same conformance suite, `keysmith_core::conformance` (cargo
//! feature `conformance`), unchanged.

use std::sync::Arc;

use async_trait::async_trait;

use crate::{Error, Result};

pub mod memory;
mod numbers;
mod numbers_sql;
mod pools;
mod scope;
mod sequences;
mod tombstones;
mod workers;

pub use crate::numbering::{MAX_INCREMENT, Numbering, Order, Period, Residue};
/// The name [`NumberStore`] had before numbered sequences became one concern
/// with one name. Deprecated: use [`NumberStore`]; this alias will go in a
/// later release.
#[deprecated(note = "renamed NumberStore")]
pub use numbers::NumberStore as TicketStore;
pub use numbers::{
    DEFAULT_TICKET_TTL, HeldNumber, MAX_TICKET_TTL, NumberStore, NumberingSwap, NumbersRead,
    PeriodRange, Settle, TakenNumber, TicketTake,
};
#[doc(hidden)]
pub use numbers::{
    NumbersFence, check_ttl, not_numbered, numbering_json, numbers_fence, parse_numbering, refused,
    skip_counter, ttl_ms as ticket_ttl_ms,
};
#[doc(hidden)]
pub use numbers_sql::{
    NumbersTx, TicketRows, current_fenced, fence_numbers_in, reserve_numbers_in, run_ready,
    settle_ticket_on, take_ticket_in,
};
pub use pools::{
    DEFAULT_POOL_START, MAX_POOL_SIZE, PoolRow, PoolSpec, PoolStore, PoolTotals, pool_fence_rounds,
};
#[doc(hidden)]
pub use pools::{
    PoolGeneration, fence_exhausts, fenced_member, first_member, pool_generation, sample_slots,
    stored_residue,
};
pub use scope::NameScope;
#[doc(hidden)]
pub use sequences::check_count;
#[doc(hidden)]
pub use sequences::check_failover_skip;
pub use sequences::{
    Alteration, AtomicReserve, CountsDelta, DEFAULT_BLOCK, DEFAULT_START,
    FAILOVER_LAG_ALLOWANCE_SECS, FAILOVER_SKIP_FLOOR, FENCE_VERSION_STEP, JS_SAFE_MAX,
    MARK_INTERVAL_MS, MAX_RESERVATION, Put, RateMark, RateMarks, Reservation, SequenceCounts,
    SequenceRow, SequenceSpec, SequenceStore, auto_failover_skip, check_reservation_life,
    js_safe_max,
};
#[doc(hidden)]
pub use tombstones::{POOL_KIND, SEQUENCE_KIND};
pub use tombstones::{Tombstone, reversed_bound};
pub use workers::{
    LEADER_GROUP_PREFIX, MAX_WORKER_TTL, MAX_WORKERS, Release, Renewal, WORKER_FAILOVER_SKIP_MS,
    WorkerClaim, WorkerEntry, WorkerFloorMove, WorkerLease, WorkerStore,
};
#[doc(hidden)]
pub use workers::{
    acquisition_start, all_taken, check_release_floor, check_times, check_user_group, lowest_free,
    same_worker_generation, worker_entry, worker_live,
};

/// The largest value a sequence may hand out: `i64::MAX - 1`, so that the next
/// free value (`max + 1`) always fits in an `i64`.
pub const MAX_VALUE: i64 = i64::MAX - 1;

/// The contract every backend implements: every concern's trait, and
/// [`Store::ping`]. Object-safe: stores are chosen at run time from a URL
/// with [`open`]; an `Arc<dyn Store>` coerces to `Arc<dyn SequenceStore>` or
/// `Arc<dyn PoolStore>` where only one concern is needed.
#[async_trait]
pub trait Store: SequenceStore + PoolStore + WorkerStore + NumberStore {
    /// Checks that the store answers.
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    async fn ping(&self) -> Result<()>;

    /// The store's current generation: a string that changes when the store
    /// becomes another copy of its data, one that may lack writes that were
    /// acknowledged before.
    ///
    /// - PostgreSQL: `SYSTEM_ID/TIMELINE` (`pg_control_system()` and the
    ///   timeline of the WAL being written): promotion and point-in-time
    ///   recovery start a new timeline; a dump restored into another
    ///   cluster has another system identifier.
    /// - etcd: `CLUSTER_ID/EPOCH`, the epoch a key keysmith keeps, replaced
    ///   when a process sees the store's revision go back (a snapshot
    ///   restore under a running server) or its cluster id change.
    /// - SQLite: a random id kept in the file. A copied or restored file
    ///   keeps it: only `keysmith fence` (or a handle that remembers what it
    ///   reserved) protects against reusing its values.
    ///
    /// Rows record the generation they were written in; see
    /// [`SequenceRow::fence`].
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    async fn generation(&self) -> Result<String>;
}

/// A random 128-bit id in hex: the generation ids of the stores that make
/// their own (SQLite's store id, etcd's epoch).
pub fn random_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// `url` with the password of its user info, and a `password=` parameter,
/// replaced by `***`: what to show of a store URL in a message or a log.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some((scheme, rest)) = url.split_once("://") {
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..auth_end].rfind('@')
            && let Some((user, _)) = rest[..at].split_once(':')
        {
            out = format!("{scheme}://{user}:***@{}", &rest[at + 1..]);
        }
    }
    if let Some((base, query)) = out.split_once('?') {
        let query: Vec<String> = query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("password", _)) => "password=***".to_owned(),
                _ => p.to_owned(),
            })
            .collect();
        out = format!("{base}?{}", query.join("&"));
    }
    out
}

/// The store URL used when none is given: `$KEYSMITH_STORE`, else
/// `sqlite://keysmith.db` in the current directory.
pub fn default_url() -> String {
    std::env::var("KEYSMITH_STORE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sqlite://keysmith.db".to_owned())
}

/// Opens the store a URL names, of the stores this crate holds: only
/// `memory://` (a fresh in-memory store, for tests and examples). The
/// `keysmith` crate's `store::open` opens every store it is built with
/// (`sqlite://`, `postgres://`, `mysql://`, `etcd://`); a driver crate's own
/// type opens its store directly.
///
/// # Errors
/// [`Error::InvalidArgument`] for any other URL, saying where it is opened.
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    match url.split_once("://") {
        Some(("memory", "")) => Ok(Arc::new(memory::MemoryStore::new())),
        Some(("memory", _)) => Err(Error::invalid(format!(
            "store URL {url:?}: memory:// takes nothing after the scheme"
        ))),
        _ => Err(Error::invalid(format!(
            "store URL {}: keysmith-core opens memory:// only; open other stores with the keysmith crate's store::open (features sqlite, postgres, mysql, etcd)",
            redact_url(url)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(next: i64, max: i64) -> SequenceRow {
        let spec = SequenceSpec {
            start: 0,
            max,
            block: 10,
            failover_skip: Some(1000),
            ..SequenceSpec::new("s")
        };
        SequenceRow {
            next,
            version: 7,
            ..SequenceRow::created(&spec, "g1")
        }
    }

    #[test]
    fn fence_moves_next_forward_once_per_new_generation() {
        let r = row(5, 100_000);
        assert_eq!(r.fence("g1"), None, "same generation: nothing");
        let f = r.fence("g2").unwrap();
        assert_eq!((f.next, f.version), (1005, 7 + FENCE_VERSION_STEP));
        assert_eq!(f.generation.as_deref(), Some("g2"));
        assert_eq!(f.failover_skipped, 1000);
        assert_eq!(f.fence("g2"), None, "fenced rows are current");
        // Planned from the fenced row, never below it.
        assert_eq!(f.plan(3).unwrap().start, 1005);
        // Near the maximum the skip clamps at max + 1: exhausted, never wrapped.
        let f = row(99_500, 100_000).fence("g2").unwrap();
        assert_eq!((f.next, f.failover_skipped), (100_001, 501));
        assert!(f.plan(1).is_err());
        // A row from before generations were recorded records one, skipping nothing.
        let legacy = SequenceRow {
            generation: None,
            ..row(5, 100)
        };
        assert_eq!(legacy.fence("g2"), None);
    }

    #[test]
    fn automatic_failover_skip_covers_the_peak_rate_with_a_floor() {
        assert_eq!(auto_failover_skip(100, None), FAILOVER_SKIP_FLOOR);
        assert_eq!(auto_failover_skip(100_000, None), 10_000_000, "100 blocks");
        // 50 000 values/s for ten minutes.
        assert_eq!(auto_failover_skip(100, Some(50_000.0)), 30_000_000);
        assert_eq!(
            auto_failover_skip(100, Some(f64::INFINITY)),
            FAILOVER_SKIP_FLOOR
        );
        assert_eq!(auto_failover_skip(100, Some(1e300)), MAX_RESERVATION);
    }

    #[test]
    fn plan_clamps_at_max_and_then_exhausts() {
        assert_eq!(
            row(5, 100).plan(10).unwrap(),
            Reservation {
                start: 5,
                end: 15,
                version: 8,
                fenced: 0,
                incarnation: 1,
            }
        );
        assert_eq!(row(95, 100).plan(10).unwrap().end, 101);
        assert!(matches!(
            row(101, 100).plan(1),
            Err(Error::Exhausted { max: 100, .. })
        ));
        let top = row(MAX_VALUE - 1, MAX_VALUE);
        assert_eq!(top.plan(MAX_RESERVATION).unwrap().end, MAX_VALUE + 1);
    }

    #[test]
    fn spec_validation() {
        SequenceSpec::new("ok").validate().unwrap();
        for bad in [
            SequenceSpec {
                start: -1,
                ..SequenceSpec::new("a")
            },
            SequenceSpec {
                max: i64::MAX,
                ..SequenceSpec::new("a")
            },
            SequenceSpec {
                start: 10,
                max: 9,
                ..SequenceSpec::new("a")
            },
            SequenceSpec {
                block: 0,
                ..SequenceSpec::new("a")
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
