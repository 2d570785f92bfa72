//! How a block is reserved in the store: the three strategies.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use serde::Serialize;

use super::high_water::HighWater;
use crate::backoff::Retries;
use crate::store::{Put, Reservation, SequenceRow, SequenceStore};
use crate::{Error, Result};

/// How a handle reserves blocks in the store.
///
/// Every strategy is safe: none ever hands a value out twice. They differ in
/// round trips and in fairness under contention. A lost race is retried until
/// the handle's retry budget is spent ([`DEFAULT_RETRY_BUDGET`] unless
/// [`super::SequenceBuilder::retry_budget`] says otherwise), then the call
/// fails with [`Error::Contention`].
///
/// [`DEFAULT_RETRY_BUDGET`]: crate::DEFAULT_RETRY_BUDGET
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Read the row and its version, then a conditional put; on conflict the
    /// store returns the current row. The first retry goes at once from that
    /// row; after further losses the handle waits a jittered backoff and
    /// reads the row again, so it never retries from a row known to be stale.
    /// No lock is held between calls, but writers are not served in turn:
    /// against writers that never pause, one can lose many races in a row.
    Optimistic,
    /// Lock the row (`BEGIN IMMEDIATE`, `SELECT ... FOR UPDATE`, an etcd
    /// lock), read, write, commit.
    Locked,
    /// One server-side step reserves the block and returns it, on the
    /// stores that have one ([`crate::store::AtomicReserve`]): on PostgreSQL
    /// one `UPDATE ... RETURNING`, whose waiters queue on the row lock and
    /// are served in turn; on etcd one transaction that compares the
    /// version: its first try starts from the row its last atomic
    /// reservation wrote, or from a fresh read when it has none or lost
    /// races lately, and a conflict is retried at once from the row etcd
    /// returns, so a retry never starts from a stale row. On SQLite, MySQL
    /// and the memory store, which have no such step, atomic is the locked
    /// transaction ([`Strategy::Locked`]): on SQLite every write takes the
    /// file's one write lock anyway, so it is one transaction and never
    /// conflicts. The default on every store. With default settings no call
    /// fails from contention with 32 processes on one sequence on any store
    /// (BENCHMARKS.md).
    #[default]
    Atomic,
}

impl std::str::FromStr for Strategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s {
            "optimistic" => Ok(Strategy::Optimistic),
            "locked" => Ok(Strategy::Locked),
            "atomic" => Ok(Strategy::Atomic),
            other => Err(Error::invalid(format!(
                "unknown strategy {other:?}; use optimistic, locked or atomic"
            ))),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Strategy::Optimistic => "optimistic",
            Strategy::Locked => "locked",
            Strategy::Atomic => "atomic",
        })
    }
}

/// Counters of what reserving cost, shared with [`super::SequenceStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reservations: AtomicU64,
    /// Time spent in the reservations counted above (their retries too),
    /// in microseconds.
    pub(crate) reservation_micros: AtomicU64,
    pub(crate) conflicts: AtomicU64,
    /// Values reserved, less those handed back while the handle was open:
    /// at `close`, what is not left over was handed out.
    pub(crate) values: AtomicI64,
    /// Values handed back while the handle was open (a failed strict batch).
    pub(crate) handed_back: AtomicI64,
    /// Values the store skipped at generation changes in this handle's
    /// reservations (see [`crate::store::SequenceRow::fence`]).
    pub(crate) fenced: AtomicI64,
}

/// Reserves ranges of one sequence with one strategy.
#[derive(Debug)]
pub(crate) struct Allocator {
    pub(crate) store: Arc<dyn SequenceStore>,
    pub(crate) name: String,
    pub(crate) strategy: Strategy,
    /// How long one reservation keeps retrying lost races.
    pub(crate) retry_budget: Duration,
    /// At most this many attempts per reservation, if set.
    pub(crate) max_attempts: Option<u32>,
    pub(crate) counters: Counters,
    /// The ranges reserved so far: a range the store returns below them is
    /// refused ([`Error::StoreWentBack`]).
    pub(crate) high_water: Arc<HighWater>,
    /// The row as last seen by the optimistic strategy: the first attempt
    /// starts from it instead of reading. A stale row costs one conflict,
    /// which returns the current row: no more round trips than a read.
    last_row: std::sync::Mutex<Option<SequenceRow>>,
    /// The life of the name this allocator reserves in
    /// ([`SequenceRow::incarnation`]): a row or reservation of another one
    /// fails with [`Error::Dropped`].
    pub(crate) incarnation: u64,
}

impl Allocator {
    pub(crate) fn new(
        store: Arc<dyn SequenceStore>,
        row: SequenceRow,
        strategy: Strategy,
        retry_budget: Duration,
        max_attempts: Option<u32>,
        high_water: Arc<HighWater>,
    ) -> Self {
        Allocator {
            store,
            name: row.name.clone(),
            incarnation: row.incarnation,
            strategy,
            retry_budget,
            max_attempts,
            counters: Counters::default(),
            high_water,
            last_row: std::sync::Mutex::new(Some(row)),
        }
    }

    /// Reserves up to `n` values, durably, retrying lost races within the
    /// retry budget; refuses a range below what this handle reserved before
    /// ([`Error::StoreWentBack`]: none of it is handed out).
    pub(crate) async fn reserve(&self, n: i64) -> Result<Reservation> {
        let ticket = self.high_water.before();
        let r = self.reserve_unchecked(n).await?;
        if r.fenced > 0 {
            self.counters.fenced.fetch_add(r.fenced, Relaxed);
            tracing::warn!(
                sequence = %self.name,
                skipped = r.fenced,
                "the store is in a new generation (a failover or a restore): skipped {} values before reserving",
                r.fenced
            );
        }
        self.high_water
            .admit("sequence", &self.name, ticket, &(r.start..r.end))
            .await?;
        Ok(r)
    }

    async fn reserve_unchecked(&self, n: i64) -> Result<Reservation> {
        let began = std::time::Instant::now();
        let mut retries = Retries::new(self.retry_budget, self.max_attempts);
        let r = loop {
            let attempt = match self.strategy {
                Strategy::Locked => {
                    let life = self.incarnation;
                    self.store.reserve_locked_in(&self.name, n, life).await
                }
                Strategy::Atomic => {
                    let life = self.incarnation;
                    self.store.reserve_atomic_in(&self.name, n, life).await
                }
                Strategy::Optimistic => self.reserve_optimistic(n, &mut retries).await,
            };
            match attempt {
                // A store that gave up inside one call (lost races of its own,
                // a lock it could not keep): retry while the budget lasts.
                // The optimistic loop has spent the budget already.
                Err(Error::Contention { .. }) if self.strategy != Strategy::Optimistic => {
                    self.counters.conflicts.fetch_add(1, Relaxed);
                    if !retries.lost() {
                        return Err(self.contention(&retries));
                    }
                    retries.wait().await;
                }
                other => break other?,
            }
        };
        // The locked and atomic strategies reserve in this life only (the
        // store checks); the optimistic one never writes in another (its
        // versions are of this one) and finds out from the rows it reads.
        // Checked once more here for a store whose check came after its
        // write (the contract's default: a gap in the later life).
        crate::store::check_reservation_life(&self.name, &r, self.incarnation)?;
        self.counters.reservations.fetch_add(1, Relaxed);
        let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.counters.reservation_micros.fetch_add(micros, Relaxed);
        self.counters.values.fetch_add(r.len(), Relaxed);
        Ok(r)
    }

    async fn reserve_optimistic(&self, n: i64, retries: &mut Retries) -> Result<Reservation> {
        let (mut row, mut from_hint) = match self.remembered_row() {
            Some(row) => (row, true),
            None => (self.read().await?, false),
        };
        let mut fenced = 0;
        loop {
            let plan = match row.plan(n) {
                // A remembered row may predate a hand-back; only the store's
                // own row may declare the sequence exhausted.
                Err(Error::Exhausted { .. }) if from_hint => {
                    row = self.read().await?;
                    from_hint = false;
                    continue;
                }
                other => other?,
            };
            match self
                .store
                .put_if_version(&self.name, plan.end, row.version)
                .await?
            {
                Put::Done(now) => {
                    let r = Reservation {
                        start: plan.start,
                        end: plan.end,
                        version: now.version,
                        fenced,
                        incarnation: now.incarnation,
                    };
                    self.remember(now);
                    return Ok(r);
                }
                Put::Conflict(current) => {
                    // A row of another life: the name was dropped since.
                    current.check_life(self.incarnation, "handle")?;
                    // A conflict caused by the store's fence: count what it skipped.
                    fenced += (current.failover_skipped - row.failover_skipped).max(0);
                    self.counters.conflicts.fetch_add(1, Relaxed);
                    from_hint = false;
                    if !retries.lost() {
                        self.remember(current);
                        return Err(self.contention(retries));
                    }
                    if retries.lost_races() == 1 {
                        // The row just returned is fresh: retry from it at once.
                        row = current;
                    } else {
                        // Many writers: back off, jittered, then read again.
                        // The row from before the wait is stale by now, and a
                        // writer that retries from stale rows loses every race.
                        retries.wait().await;
                        row = self.read().await?;
                    }
                }
            }
        }
    }

    /// [`Error::Dropped`] of this allocator's sequence.
    pub(crate) fn dropped(&self) -> Error {
        Error::Dropped {
            kind: "sequence",
            name: self.name.clone(),
            held: "handle",
        }
    }

    fn contention(&self, retries: &Retries) -> Error {
        Error::Contention {
            name: self.name.clone(),
            attempts: retries.lost_races(),
        }
    }

    /// The row as the store holds it now, of this allocator's life.
    async fn read(&self) -> Result<SequenceRow> {
        let row = self
            .store
            .read_sequence(&self.name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", &self.name))?;
        row.check_life(self.incarnation, "handle")?;
        Ok(row)
    }

    fn remembered_row(&self) -> Option<SequenceRow> {
        self.last_row
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn remember(&self, row: SequenceRow) {
        *self.last_row.lock().unwrap_or_else(|p| p.into_inner()) = Some(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategy_parses_and_prints() {
        for s in [Strategy::Optimistic, Strategy::Locked, Strategy::Atomic] {
            assert_eq!(s.to_string().parse::<Strategy>().unwrap(), s);
        }
        assert!("fast".parse::<Strategy>().is_err());
    }
}
