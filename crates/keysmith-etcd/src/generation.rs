//! etcd: the store's generation, `CLUSTER_ID/EPOCH`.
//!
//! etcd keeps no history keysmith could compare a restored copy against: a
//! snapshot restored with the same member names, peer URLs and cluster
//! token even gets the same cluster id. So keysmith keeps its own epoch, a
//! random id in the key `PREFIX/epoch`, and watches every answer's header:
//! when the store's revision goes back below the highest this process has
//! seen (a restore under a running process) or the cluster id changes, the
//! process writes a new epoch. Every row last written in the old epoch is
//! then stale, and is fenced ([`SequenceRow::fence`]) at its next read by any
//! process. Every write compares the epoch it was planned in, so none lands
//! in an epoch it did not see. One write can be sent before the process
//! has seen the restore: an atomic reservation planned from the row this
//! store last wrote (`sequences.rs`, `RowHint`), which a restore can bring
//! back exactly. Its answer's revision, not above what was seen before it
//! was sent, tells ([`Tracker::went_back_under`]): its range is never
//! handed out, and the row is read again in the new epoch.
//!
//! A process that starts after a restore has seen nothing to compare with,
//! so the epoch also records `d`, the member's applied raft index less the
//! store revision, when it was written. `d` never decreases in one cluster's
//! history (every applied entry moves the index, and at most as often the
//! revision), while a restore starts a new raft log at a small index under
//! the snapshot's revision: `d` drops. A process reading the epoch at start
//! (one `Status` call) renews it when `d` is below the recorded one.
//!
//! What this cannot see: a restore after which as many raft entries that
//! write nothing (lease grants, failed transactions) were applied as the
//! snapshot had revisions, before any keysmith process started. Then the
//! operator runs `keysmith fence --all`.
//!
//! [`SequenceRow::fence`]: keysmith_core::driver::SequenceRow::fence

use std::sync::Mutex;

use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnResponse};

use super::{EtcdStore, first_kv};
use keysmith_core::Result;

/// What this process knows of the store's generation.
#[derive(Debug, Default)]
pub(super) struct Tracker {
    state: Mutex<State>,
}

#[derive(Debug, Default, Clone)]
struct State {
    /// The epoch as last read or written; `None` before the first read.
    epoch: Option<String>,
    /// The cluster id of the answers so far (0 before the first).
    cluster: u64,
    /// The highest store revision any answer carried.
    max_revision: i64,
    /// Set when an answer showed the store went back or became another
    /// cluster: the epoch must be renewed before the next write.
    stale: bool,
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The highest revision seen so far: taken before a request is sent.
    /// Answers to requests in flight together come back in any order, so an
    /// answer is compared only with what was seen before it was asked for.
    pub(super) fn floor(&self) -> i64 {
        self.lock().max_revision
    }

    /// Whether a write answered at `revision`, sent when `floor` was the
    /// highest revision seen, landed in a store that went back: its
    /// revision is not above what was seen before it was sent (every write
    /// makes a new, higher revision), or an answer marked the epoch stale.
    /// Marks the epoch stale then.
    pub(super) fn went_back_under(&self, revision: i64, floor: i64) -> bool {
        let mut s = self.lock();
        if revision <= floor {
            s.stale = true;
        }
        s.stale
    }

    /// Notes an answer's header: a revision below `floor` (the highest seen
    /// before the request was sent), or another cluster id, marks the epoch
    /// stale.
    pub(super) fn observe(&self, cluster: u64, revision: i64, floor: i64) {
        let mut s = self.lock();
        if s.cluster != 0 && cluster != 0 && cluster != s.cluster {
            tracing::error!(
                old = s.cluster,
                new = cluster,
                "etcd's cluster id changed: a new generation of the store"
            );
            s.stale = true;
            s.max_revision = revision;
        } else if revision < floor {
            tracing::error!(
                seen = floor,
                now = revision,
                "etcd's revision went back (a restore from a snapshot?): a new generation of the store"
            );
            s.stale = true;
            s.max_revision = revision;
        }
        if cluster != 0 {
            s.cluster = cluster;
        }
        s.max_revision = s.max_revision.max(revision);
    }
}

/// The `d` an epoch value records (`ID D`); `None` for an epoch without one.
fn recorded_gap(epoch: &str) -> Option<i64> {
    epoch.split_once(' ')?.1.parse().ok()
}

impl EtcdStore {
    fn epoch_key(&self) -> String {
        format!("{}epoch", self.prefix)
    }

    /// Notes the header of an answer to a request sent when the highest
    /// revision seen was `floor` (see [`Tracker::observe`]).
    pub(super) fn observe(&self, resp: &TxnResponse, floor: i64) {
        if let Some(h) = resp.header() {
            self.generation.observe(h.cluster_id(), h.revision(), floor);
        }
    }

    /// The epoch to plan and compare writes with: read (or made) on first
    /// use, renewed when an answer showed a new generation.
    pub(super) async fn epoch(&self) -> Result<String> {
        let s = self.generation.lock().clone();
        match (s.epoch, s.stale) {
            (Some(e), false) => Ok(e),
            (known, stale) => self.settle_epoch(known, stale).await,
        }
    }

    /// Reads the epoch key; writes a new epoch when it is missing, or when
    /// `stale` and it still holds `known` (another process may have renewed
    /// it already: then its epoch is adopted).
    async fn settle_epoch(&self, known: Option<String>, stale: bool) -> Result<String> {
        let key = self.epoch_key();
        for _ in 0..8 {
            let d_now = self.log_gap().await;
            let resp = self
                .txn_unobserved(
                    "read the epoch",
                    Txn::new().and_then([TxnOp::get(key.clone(), None)]),
                )
                .await?;
            let current = first_kv(&resp.op_responses(), 0)?;
            let current_value = current
                .as_ref()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned());
            let restored = match (d_now, current_value.as_deref().and_then(recorded_gap)) {
                (Some(now), Some(then)) if now < then => {
                    tracing::error!(
                        recorded = then,
                        now,
                        "etcd's raft log restarted under its data (a snapshot restore?): a new generation of the store"
                    );
                    true
                }
                _ => false,
            };
            let renew = current_value.is_none() || restored || (stale && current_value == known);
            if !renew {
                let epoch = current_value.unwrap_or_default();
                self.adopt_epoch(&epoch, &resp);
                return Ok(epoch);
            }
            let new = match d_now {
                Some(d) => format!("{} {d}", keysmith_core::driver::random_id()),
                None => keysmith_core::driver::random_id(),
            };
            let unchanged = match &current {
                Some(kv) => Compare::mod_revision(key.clone(), CompareOp::Equal, kv.mod_revision()),
                None => Compare::version(key.clone(), CompareOp::Equal, 0),
            };
            let put =
                Txn::new()
                    .when([unchanged])
                    .and_then([TxnOp::put(key.clone(), new.clone(), None)]);
            let resp = self.txn_unobserved("write a new epoch", put).await?;
            if resp.succeeded() {
                if known.is_some() {
                    tracing::warn!(
                        epoch = %new,
                        "etcd: new keysmith epoch; rows of the old one move forward by their failover skip"
                    );
                }
                self.adopt_epoch(&new, &resp);
                return Ok(new);
            }
        }
        Err(keysmith_core::Error::Contention {
            name: "etcd epoch".into(),
            attempts: 8,
        })
    }

    /// The member's applied raft index less its store revision (see the
    /// module docs); `None` when `Status` is not answered (permissions):
    /// then only the revision watch of running processes detects a restore.
    async fn log_gap(&self) -> Option<i64> {
        let status = self
            .call("read the member's status", |mut c| async move {
                c.status().await
            })
            .await;
        match status {
            Ok(s) => {
                let revision = s.header().map(|h| h.revision())?;
                // The applied index (etcd 3.4+) matches the revision; an
                // older member reports only the committed one.
                let index = match s.raft_applied_index() {
                    0 => s.raft_index(),
                    i => i,
                };
                (index > 0).then_some(i64::try_from(index).ok()? - revision)
            }
            Err(e) => {
                tracing::debug!(
                    "etcd status not read ({e}); restores are seen by running processes only"
                );
                None
            }
        }
    }

    fn adopt_epoch(&self, epoch: &str, resp: &TxnResponse) {
        let mut s = self.generation.lock();
        s.epoch = Some(epoch.to_owned());
        s.stale = false;
        if let Some(h) = resp.header() {
            if h.cluster_id() != 0 {
                s.cluster = h.cluster_id();
            }
            s.max_revision = s.max_revision.max(h.revision());
        }
    }

    /// After a write that failed: if the epoch key no longer holds the
    /// epoch it compared (read back at `at` of the answers), adopt the new.
    pub(super) fn adopt_epoch_from(&self, resp: &TxnResponse, at: usize) -> Result<()> {
        if let Some(kv) = first_kv(&resp.op_responses(), at)? {
            let value = String::from_utf8_lossy(kv.value()).into_owned();
            let mut s = self.generation.lock();
            if s.epoch.as_deref() != Some(value.as_str()) {
                s.epoch = Some(value);
            }
        } else {
            self.generation.lock().stale = true;
        }
        Ok(())
    }

    /// The compare every write carries: the epoch is still `epoch`.
    pub(super) fn epoch_compare(&self, epoch: &str) -> Compare {
        Compare::value(self.epoch_key(), CompareOp::Equal, epoch)
    }

    /// The get that reads the epoch back when a write fails.
    pub(super) fn epoch_get(&self) -> TxnOp {
        TxnOp::get(self.epoch_key(), None)
    }

    /// `CLUSTER_ID/EPOCH`, the generation rows record.
    pub(super) async fn current_generation(&self) -> Result<String> {
        let epoch = self.epoch().await?;
        Ok(format!("{:x}/{epoch}", self.generation.lock().cluster))
    }
}
