//! The operator's fence: moves sequences forward after the store went back in
//! a way keysmith cannot see for itself (a file copy put back, a backup
//! restored into the same generation, a restore while no keysmith process
//! ran), moves every member of pools forward by whole rounds, and lets a
//! gap-free sequence take numbers again after a new generation
//! ([`Error::FenceNeeded`]) once the operator has checked it.
//!
//! Every move is the same conditional write as a reservation, so it is safe
//! while handles allocate, and only ever forward: no value below the new
//! `next` is handed out again (the values skipped count as skipped in
//! `show`). Values handles reserved before the fence stay theirs.
//!
//! ```
//! # #[tokio::main] async fn main() -> keysmith_core::Result<()> {
//! use keysmith_core::fence::{fence, FenceTarget};
//! let store = keysmith_core::store::open("memory://").await?;
//! keysmith_core::sequence::create(&*store, &keysmith_core::store::SequenceSpec::new("orders")).await?;
//! let plan = fence(&*store, &FenceTarget::All, 1_000, true).await?;
//! assert_eq!((plan.changes[0].before, plan.changes[0].after), (1, 1_001));
//! let done = fence(&*store, &FenceTarget::One("orders".into()), 1_000, false).await?;
//! assert_eq!(done.changes[0].after, 1_001);
//! # Ok(()) }
//! ```

use serde::Serialize;

use crate::backoff::Retries;
use crate::store::{
    Alteration, CountsDelta, MAX_RESERVATION, Put, SequenceRow, Store, WORKER_FAILOVER_SKIP_MS,
};
use crate::{Error, Result};

/// What to fence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FenceTarget {
    /// One sequence, or a pool of that name when there is no such sequence.
    One(String),
    /// Every sequence and pool of the store (gap-free sequences are left
    /// to be fenced by name), and the time floor of every worker id, moved
    /// by [`WORKER_FAILOVER_SKIP_MS`] (a holder starts that much later).
    All,
}

/// One object moved forward (or that would be, in a dry run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceChange {
    /// What it is: "sequence", "numbered sequence" (its current period's
    /// counter moved), "pool", or "worker" (named `GROUP/ID`: its time floor,
    /// in ms since the Unix epoch).
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// Its next free value before (a numbered sequence: its current
    /// period's counter; 0 in a dry run, which reads no counter; a pool: 0).
    pub before: i64,
    /// Its next free value after (at most `max + 1`: past the maximum the
    /// sequence is exhausted, never wrapped); a pool: how far every member
    /// moved (whole rounds of its size, at least the skip), in values: for a
    /// pool in a residue class, that many places of its class times its
    /// increment.
    pub after: i64,
}

/// What a fence did, or would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FenceReport {
    /// Nothing was written.
    pub dry_run: bool,
    /// The objects, in name order.
    pub changes: Vec<FenceChange>,
    /// Objects left alone, with why (`--all` leaves gap-free sequences to be
    /// fenced by name: a skip there is a gap the books will show).
    pub left_alone: Vec<String>,
}

/// Moves `target` forward by `skip` values (1 to [`MAX_RESERVATION`]; 0 only
/// for a numbered sequence named alone: a gap-free sequence confirmed to have
/// lost nothing), or, with `dry_run`, says what it would do and writes
/// nothing. A numbered sequence's current period counter moves, and the
/// store's generation is recorded, which lets a gap-free sequence take
/// numbers again.
///
/// # Errors
/// [`Error::InvalidArgument`] for a bad `skip`; [`Error::InvalidName`],
/// [`Error::NotFound`] (with similar names) for a missing sequence;
/// [`Error::Contention`] when reservations keep winning for
/// [`crate::DEFAULT_RETRY_BUDGET`]; what the store fails with. Sequences
/// fenced before an error stay fenced (each move is its own write).
pub async fn fence(
    store: &dyn Store,
    target: &FenceTarget,
    skip: i64,
    dry_run: bool,
) -> Result<FenceReport> {
    if !(0..=MAX_RESERVATION).contains(&skip) {
        return Err(Error::invalid(format!(
            "skip must be between 1 and {MAX_RESERVATION}, got {skip}"
        )));
    }
    let (rows, pools) = match target {
        FenceTarget::One(name) => {
            crate::validate_name(name)?;
            match store.read_sequence(name).await? {
                Some(row) => (vec![row], Vec::new()),
                None => match store.read_pool(name).await? {
                    Some(pool) => (Vec::new(), vec![pool]),
                    // The sequence's "did you mean" error.
                    None => (
                        vec![crate::sequence::describe(store, name).await?],
                        Vec::new(),
                    ),
                },
            }
        }
        FenceTarget::All => (store.list_sequences().await?, store.list_pools().await?),
    };
    let mut report = FenceReport {
        dry_run,
        changes: Vec::new(),
        left_alone: Vec::new(),
    };
    let alone = matches!(target, FenceTarget::One(_));
    for row in rows {
        let numbering = store.read_numbering(&row.name).await?;
        // A residue class is allocated in blocks like an ordinary sequence:
        // its row moves, and the report says it in values.
        let residue = numbering.as_ref().and_then(|n| n.residue);
        // So is a leader-ordered one: its row moves like any sequence's.
        if let Some(numbering) = numbering.filter(|n| n.residue.is_none() && !n.is_leader()) {
            if numbering.gapless && !alone {
                report.left_alone.push(format!(
                    "gap-free sequence {:?}: fence it by name once its committed numbers are checked",
                    row.name
                ));
                continue;
            }
            // A dry run reads no counter: it reports the move from 0.
            let (before, after) = if dry_run {
                (0, skip)
            } else {
                let (_, before, after) = store.fence_numbers(&row.name, skip).await?;
                tracing::warn!(sequence = %row.name, before, after, "numbered sequence fenced by the operator");
                (before, after)
            };
            report.changes.push(FenceChange {
                kind: "numbered sequence",
                name: row.name,
                before,
                after,
            });
            continue;
        }
        if skip == 0 {
            return Err(Error::invalid(format!(
                "skip must be between 1 and {MAX_RESERVATION}, got 0 (0 only confirms a numbered sequence)"
            )));
        }
        let mut change = if dry_run {
            FenceChange {
                kind: "sequence",
                name: row.name.clone(),
                before: row.next,
                after: forward(&row, skip),
            }
        } else {
            move_forward(store, row, skip).await?
        };
        if let Some(r) = residue {
            (change.before, change.after) = (r.value(change.before), r.value(change.after));
        }
        report.changes.push(change);
    }
    for pool in pools {
        if skip == 0 {
            return Err(Error::invalid(format!(
                "skip must be between 1 and {MAX_RESERVATION}, got 0 (0 only confirms a numbered sequence)"
            )));
        }
        // Whole rounds, so every member keeps its slot.
        let rounds = (skip + pool.size - 1) / pool.size;
        if !dry_run {
            store.fence_pool(&pool.name, rounds).await?;
            tracing::warn!(pool = %pool.name, rounds, "pool fenced by the operator");
        }
        let moved = rounds.saturating_mul(pool.size);
        report.changes.push(FenceChange {
            kind: "pool",
            before: 0,
            after: pool
                .residue
                .map_or(moved, |r| moved.saturating_mul(r.increment)),
            name: pool.name,
        });
    }
    if matches!(target, FenceTarget::All) {
        if dry_run {
            report.left_alone.push(format!(
                "worker ids: every time floor would move {WORKER_FAILOVER_SKIP_MS} ms forward"
            ));
        } else {
            for m in store.fence_workers(WORKER_FAILOVER_SKIP_MS).await? {
                report.changes.push(FenceChange {
                    kind: "worker",
                    name: format!("{}/{}", m.group, m.worker),
                    before: m.before,
                    after: m.after,
                });
            }
        }
    }
    Ok(report)
}

fn forward(row: &SequenceRow, skip: i64) -> i64 {
    row.next + skip.min(row.remaining().max(0))
}

async fn move_forward(store: &dyn Store, mut row: SequenceRow, skip: i64) -> Result<FenceChange> {
    let name = row.name.clone();
    let mut retries = Retries::new(crate::DEFAULT_RETRY_BUDGET, None);
    loop {
        let change = Alteration {
            next: forward(&row, skip),
            ..Alteration::keep(&row)
        };
        match store.alter_if_version(&name, &change, row.version).await? {
            Put::Done(done) => {
                let delta = CountsDelta {
                    skipped: done.next - row.next,
                    incarnation: done.incarnation,
                    ..CountsDelta::default()
                };
                if let Err(e) = store
                    .record_counts(&name, &delta, crate::clock::now_ms())
                    .await
                {
                    tracing::warn!(sequence = %name, "fenced, but the skipped values were not counted: {e}");
                }
                tracing::warn!(sequence = %name, before = row.next, after = done.next, "fenced by the operator");
                return Ok(FenceChange {
                    kind: "sequence",
                    name,
                    before: row.next,
                    after: done.next,
                });
            }
            Put::Conflict(current) => {
                row = current;
                if !retries.lost() {
                    return Err(Error::Contention {
                        name,
                        attempts: retries.lost_races(),
                    });
                }
            }
        }
    }
}
