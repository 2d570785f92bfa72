//! The Store contract and its backends.
//!
//! [`Store`] is the only thing a backend implements. It knows rows, versions and
//! pool members; it knows nothing about blocks, caches or handles. Everything a
//! backend would otherwise write twice (argument checks, the arithmetic of a
//! reservation) lives here, above the backends.
//!
//! Every backend runs the same conformance suite (`tests/conformance/`).

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;

use crate::{Error, Result};

#[cfg(feature = "etcd")]
pub mod etcd;
pub mod memory;
pub mod postgres;
pub mod sqlite;

/// The largest value a sequence may hand out: `i64::MAX - 1`, so that the next
/// free value (`max + 1`) always fits in an `i64`.
pub const MAX_VALUE: i64 = i64::MAX - 1;

/// The largest number of values one reservation may ask for.
pub const MAX_RESERVATION: i64 = 1 << 40;

/// What a new sequence looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SequenceSpec {
    /// Its name; see [`crate::validate_name`].
    pub name: String,
    /// The first value handed out.
    pub start: i64,
    /// The last value handed out (inclusive).
    pub max: i64,
    /// The default block size of handles opened on it.
    pub block: i64,
}

impl SequenceSpec {
    /// A spec with start 1, maximum [`MAX_VALUE`] and block 100.
    pub fn new(name: impl Into<String>) -> Self {
        SequenceSpec {
            name: name.into(),
            start: 1,
            max: MAX_VALUE,
            block: 100,
        }
    }

    /// Checks name and bounds: `0 <= start <= max <= MAX_VALUE`,
    /// `1 <= block <= MAX_RESERVATION`.
    ///
    /// # Errors
    /// [`Error::InvalidName`] or [`Error::InvalidArgument`] saying which.
    pub fn validate(&self) -> Result<()> {
        crate::validate_name(&self.name)?;
        if self.start < 0 {
            return Err(Error::invalid(format!(
                "start must be 0 or more, got {}",
                self.start
            )));
        }
        if self.max > MAX_VALUE {
            return Err(Error::invalid(format!(
                "max must be at most {MAX_VALUE}, got {}",
                self.max
            )));
        }
        if self.start > self.max {
            return Err(Error::invalid(format!(
                "start ({}) must not be above max ({})",
                self.start, self.max
            )));
        }
        check_count("block", self.block)?;
        Ok(())
    }
}

/// A sequence as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// The sequence's name.
    pub name: String,
    /// The next value nobody has reserved; `max + 1` once exhausted.
    pub next: i64,
    /// The first value the sequence was created with.
    pub start: i64,
    /// The last value it may hand out.
    pub max: i64,
    /// The default block size.
    pub block: i64,
    /// Bumped by every change of `next`; the basis of optimistic allocation.
    pub version: u64,
}

impl Row {
    /// How many values are left to reserve.
    pub fn remaining(&self) -> i64 {
        // next <= max + 1 and max + 1 <= i64::MAX, next >= 0: cannot overflow.
        self.max + 1 - self.next
    }

    /// Plans a reservation of up to `n` values from this row: the half-open
    /// range to hand out. Near the maximum the range is shorter than `n`.
    ///
    /// # Errors
    /// [`Error::Exhausted`] when nothing is left.
    pub fn plan(&self, n: i64) -> Result<Reservation> {
        let left = self.remaining();
        if left <= 0 {
            return Err(Error::Exhausted {
                name: self.name.clone(),
                max: self.max,
            });
        }
        let take = n.min(left);
        Ok(Reservation {
            start: self.next,
            end: self.next + take,
            version: self.version + 1,
        })
    }
}

/// A range of values reserved durably for one caller: `start..end`, and the
/// row version the reservation left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Reservation {
    /// First value (inclusive).
    pub start: i64,
    /// One past the last value.
    pub end: i64,
    /// The row's version right after this reservation was committed.
    pub version: u64,
}

impl Reservation {
    /// Number of values reserved.
    pub fn len(&self) -> i64 {
        self.end - self.start
    }

    /// Whether the range is empty (never true for a reservation a store returns).
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// The outcome of [`Store::put_if_version`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// The row was written; this is the row now stored.
    Done(Row),
    /// The version did not match; this is the row the store holds, so the
    /// caller can retry without reading again.
    Conflict(Row),
}

/// A value pool as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PoolRow {
    /// The pool's name.
    pub name: String,
    /// The first value of the pool.
    pub start: i64,
    /// How many members the pool holds at all times.
    pub size: i64,
}

/// The contract every backend implements. Object-safe: stores are chosen at
/// run time from a URL with [`open`].
///
/// Names given to these methods have been validated by the caller; counts are
/// in `1..=MAX_RESERVATION`. Every write is durable when the method returns.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Creates a sequence with `next = spec.start` and version 1.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`] if a sequence of that name exists.
    async fn create(&self, spec: &SequenceSpec) -> Result<Row>;

    /// The row of a sequence, or `None`.
    async fn read(&self, name: &str) -> Result<Option<Row>>;

    /// Sets `next` to `new_next` and bumps the version, only if the version is
    /// still `expected_version`. On a mismatch nothing changes and the current
    /// row comes back.
    ///
    /// # Errors
    /// [`Error::NotFound`] if the sequence is gone.
    async fn put_if_version(&self, name: &str, new_next: i64, expected_version: u64)
    -> Result<Put>;

    /// Reserves up to `n` values under a row lock (SELECT ... FOR UPDATE,
    /// BEGIN IMMEDIATE, a lease-held lock), committed before it returns.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`].
    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation>;

    /// Reserves up to `n` values with one server-side statement.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::Exhausted`].
    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation>;

    /// Every sequence, ordered by name.
    async fn list(&self) -> Result<Vec<Row>>;

    /// Removes a sequence.
    ///
    /// # Errors
    /// [`Error::NotFound`] if there is none.
    async fn drop_sequence(&self, name: &str) -> Result<()>;

    /// Creates a pool holding `start..start + size`: one member per slot,
    /// slot `s` holding `start + s`. A member never changes slot: the only
    /// changes are [`Store::pool_swap`] of `take` for `take + size`, and back
    /// (of `take + size` for `take`) to return a number never handed out.
    ///
    /// # Errors
    /// [`Error::AlreadyExists`].
    async fn pool_create(&self, name: &str, start: i64, size: i64) -> Result<PoolRow>;

    /// The pool's row, or `None`.
    async fn pool_read(&self, name: &str) -> Result<Option<PoolRow>>;

    /// `min(k, size)` distinct members of the pool, chosen uniformly at random:
    /// every member is equally likely, whatever the values (backends sample
    /// slots with [`sample_slots`], never value ranges, which would favour
    /// members that follow a gap).
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn pool_sample(&self, name: &str, k: usize) -> Result<Vec<i64>>;

    /// Atomically replaces member `take` by `put`, only if `take` is a member.
    /// Returns whether it did. Callers pass `put = take + size` (a take) or
    /// `put = take - size` (giving back a number that was never handed out),
    /// so the member keeps its slot; backends may rely on that.
    ///
    /// # Errors
    /// [`Error::NotFound`] if the pool is gone.
    async fn pool_swap(&self, name: &str, take: i64, put: i64) -> Result<bool>;

    /// Every member of the pool, ascending.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn pool_members(&self, name: &str) -> Result<Vec<i64>>;

    /// Every pool, ordered by name.
    async fn pool_list(&self) -> Result<Vec<PoolRow>>;

    /// Removes a pool and its members.
    ///
    /// # Errors
    /// [`Error::NotFound`].
    async fn pool_drop(&self, name: &str) -> Result<()>;

    /// Checks that the store answers.
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    async fn ping(&self) -> Result<()>;
}

/// `min(k, size)` distinct pool slots in `0..size`, uniformly at random.
pub fn sample_slots(size: i64, k: usize) -> Vec<i64> {
    let size = usize::try_from(size).unwrap_or(0);
    rand::seq::index::sample(&mut rand::rng(), size, k.min(size))
        .into_iter()
        .map(|s| s as i64)
        .collect()
}

/// Checks a count (block size, number of values) is in `1..=MAX_RESERVATION`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming `what`.
pub fn check_count(what: &str, n: i64) -> Result<()> {
    if (1..=MAX_RESERVATION).contains(&n) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} must be between 1 and {MAX_RESERVATION}, got {n}"
        )))
    }
}

/// The store URL used when none is given: `$KEYSMITH_STORE`, else
/// `sqlite://keysmith.db` in the current directory.
pub fn default_url() -> String {
    std::env::var("KEYSMITH_STORE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sqlite://keysmith.db".to_owned())
}

/// Opens the store a URL names:
///
/// - `sqlite://PATH[?busy_timeout_ms=N]` (relative or absolute:
///   `sqlite:///var/lib/k.db`),
/// - `memory://` (a fresh in-memory store, for tests and examples),
/// - `postgres://...` and `etcd://...` when those backends are built in.
///
/// # Errors
/// [`Error::InvalidArgument`] for a URL that names no known store, and what
/// opening the store fails with ([`Error::Unavailable`], [`Error::Corrupt`]).
pub async fn open(url: &str) -> Result<Arc<dyn Store>> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        Error::invalid(format!(
            "store URL {url:?} has no scheme; use sqlite://PATH, postgres://USER@HOST/DB or etcd://HOST:PORT"
        ))
    })?;
    match scheme {
        "sqlite" => Ok(Arc::new(sqlite::SqliteStore::open_url(rest).await?)),
        "postgres" | "postgresql" => Ok(Arc::new(postgres::PostgresStore::open(url).await?)),
        #[cfg(feature = "etcd")]
        "etcd" => Ok(Arc::new(etcd::EtcdStore::connect(url).await?)),
        #[cfg(not(feature = "etcd"))]
        "etcd" => Err(Error::invalid(format!(
            "store URL {url:?}: this build of keysmith has no etcd support; \
             rebuild with `--features etcd` (needs protoc), e.g. cargo install keysmith-cli --features etcd"
        ))),
        "memory" if rest.is_empty() => Ok(Arc::new(memory::MemoryStore::new())),
        "memory" => Err(Error::invalid(format!(
            "store URL {url:?}: memory:// takes nothing after the scheme"
        ))),
        other => Err(Error::invalid(format!(
            "store URL {url:?}: unknown scheme {other:?}; use sqlite://PATH, postgres://USER@HOST/DB or etcd://HOST:PORT"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(next: i64, max: i64) -> Row {
        Row {
            name: "s".into(),
            next,
            start: 0,
            max,
            block: 10,
            version: 7,
        }
    }

    #[test]
    fn plan_clamps_at_max_and_then_exhausts() {
        assert_eq!(
            row(5, 100).plan(10).unwrap(),
            Reservation {
                start: 5,
                end: 15,
                version: 8
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

    #[cfg(not(feature = "etcd"))]
    #[tokio::test]
    async fn etcd_urls_without_the_feature_say_how_to_build_it_in() {
        let e = open("etcd://127.0.0.1:2379").await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("--features etcd"), "{e}");
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
