//! How a block is reserved in the store: the three strategies.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::Serialize;

use crate::backoff::backoff;
use crate::store::{Put, Reservation, Row, Store};
use crate::{Error, Result};

/// How a handle reserves blocks in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// Read the row and its version, then a conditional put; on conflict the
    /// store returns the current row and the put is retried from it: at once
    /// the first time, then after a jittered backoff, a bounded number of
    /// times (then [`Error::Contention`]). The default: no lock is held
    /// between calls. Not fair: against a writer that never pauses, another
    /// optimistic writer can lose every race; use locked or atomic there.
    #[default]
    Optimistic,
    /// Lock the row (`BEGIN IMMEDIATE`, `SELECT ... FOR UPDATE`, an etcd
    /// lock), read, write, commit.
    Locked,
    /// One server-side statement reserves the block and returns it.
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

/// The default number of optimistic attempts before [`Error::Contention`].
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;

/// Counters of what reserving cost, shared with [`super::SequenceStats`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) reservations: AtomicU64,
    pub(crate) conflicts: AtomicU64,
}

/// Reserves ranges of one sequence with one strategy.
#[derive(Debug)]
pub(crate) struct Allocator {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) name: String,
    pub(crate) strategy: Strategy,
    pub(crate) max_attempts: u32,
    pub(crate) counters: Counters,
    /// The row as last seen by the optimistic strategy: the first attempt
    /// starts from it instead of reading. A stale row costs one conflict,
    /// which returns the current row: no more round trips than a read.
    last_row: std::sync::Mutex<Option<Row>>,
}

impl Allocator {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        row: Row,
        strategy: Strategy,
        max_attempts: u32,
    ) -> Self {
        Allocator {
            store,
            name: row.name.clone(),
            strategy,
            max_attempts,
            counters: Counters::default(),
            last_row: std::sync::Mutex::new(Some(row)),
        }
    }

    /// Reserves up to `n` values, durably.
    pub(crate) async fn reserve(&self, n: i64) -> Result<Reservation> {
        let r = match self.strategy {
            Strategy::Locked => self.store.reserve_locked(&self.name, n).await,
            Strategy::Atomic => self.store.reserve_atomic(&self.name, n).await,
            Strategy::Optimistic => self.reserve_optimistic(n).await,
        }?;
        self.counters.reservations.fetch_add(1, Relaxed);
        Ok(r)
    }

    async fn reserve_optimistic(&self, n: i64) -> Result<Reservation> {
        let (mut row, mut from_hint) = match self.remembered_row() {
            Some(row) => (row, true),
            None => (self.read().await?, false),
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
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
                    };
                    self.remember(now);
                    return Ok(r);
                }
                Put::Conflict(current) => {
                    self.counters.conflicts.fetch_add(1, Relaxed);
                    if attempt >= self.max_attempts {
                        self.remember(current);
                        return Err(Error::Contention {
                            name: self.name.clone(),
                            attempts: attempt,
                        });
                    }
                    row = current;
                    from_hint = false;
                    // The row just returned is fresh: the first retry goes at
                    // once (a sleep would only make it stale, and against a
                    // writer that never pauses the sleeper never wins).
                    // Repeated conflicts mean many writers: back off, jittered.
                    if attempt >= 2 {
                        tokio::time::sleep(backoff(attempt - 1)).await;
                    }
                }
            }
        }
    }

    async fn read(&self) -> Result<Row> {
        self.store
            .read(&self.name)
            .await?
            .ok_or_else(|| Error::not_found("sequence", &self.name))
    }

    fn remembered_row(&self) -> Option<Row> {
        self.last_row
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn remember(&self, row: Row) {
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
