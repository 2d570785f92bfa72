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
//! (one `Status` call, then the epoch) renews it when `d` is below the
//! recorded one by more than a `Status` can misread.
//!
//! Both measures are taken so that no ordinary history looks like a
//! restore (a false one fences every row: a gap users see). A `Status`
//! reads the revision before the applied index, so its `d` can read high
//! (writes applied in between) or one low (a write applied between the
//! two, `PROBE_SLACK`). So the recorded `d` is a lower bound: the applied
//! index of a `Status` less the revision of the epoch read sent after it,
//! which saw at least every write up to that index. And the `d` compared
//! with it comes from a `Status` answered after the recorded epoch was
//! written (its revision at least the epoch's mod revision); one answered
//! before (another process wrote the first epoch of a fresh prefix
//! meanwhile) is taken again.
//!
//! What this cannot see: a restore after which as many raft entries that
//! write nothing (lease grants, failed transactions) were applied as the
//! snapshot had revisions (less the margins above: one, and the writes
//! applied while the recording process read the epoch), before any
//! keysmith process started. Then the operator runs `keysmith fence --all`.
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

/// How often [`EtcdStore::settle_epoch`] reads the epoch key before it
/// gives up with [`keysmith_core::Error::Contention`].
const SETTLE_ATTEMPTS: u32 = 8;

/// How far below the true gap a [`LogProbe::gap`] can read: the member
/// raises the revision while it applies a write, and its applied index
/// only once the write is applied, so a `Status` answered in between
/// reads one less.
const PROBE_SLACK: i64 = 1;

/// One `Status` answer of a member: its applied raft index and the store
/// revision in the answer's header.
///
/// etcd reads the two at different moments: the revision first, then the
/// applied index. So [`LogProbe::gap`] can read above the member's true
/// gap (by every write applied in between) or one below it (a write
/// applied between its revision and its index, [`PROBE_SLACK`]).
#[derive(Debug, Clone, Copy)]
struct LogProbe {
    applied: i64,
    revision: i64,
}

impl LogProbe {
    /// The gap `d` this answer shows: at least the true gap where the
    /// member stood when it answered, less [`PROBE_SLACK`]; perhaps more.
    fn gap(self) -> i64 {
        self.applied - self.revision
    }

    /// The gap to record with an epoch, at most the true one at any point
    /// of the log after this answer: the applied index less `read_at`, the
    /// revision of a linearizable read sent after this answer came back
    /// (that read saw every write up to this applied index, so its
    /// revision is at least the revision there).
    fn gap_at_most(self, read_at: i64) -> i64 {
        self.applied - read_at
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
        for attempt in 0..SETTLE_ATTEMPTS {
            if attempt > 0 {
                // A member whose Status lags the epoch, or a racing writer:
                // give either a moment (1, 2, 4 ... 64 ms) before looking again.
                tokio::time::sleep(std::time::Duration::from_millis(1 << (attempt - 1).min(6)))
                    .await;
            }
            let probe = self.probe_log().await;
            let last = attempt + 1 == SETTLE_ATTEMPTS;
            if let Some(epoch) = self
                .settle_after(probe, known.as_deref(), stale, last)
                .await?
            {
                return Ok(epoch);
            }
        }
        Err(keysmith_core::Error::Contention {
            name: "etcd epoch".into(),
            attempts: SETTLE_ATTEMPTS,
        })
    }

    /// One attempt of [`EtcdStore::settle_epoch`], with `probe` taken just
    /// before it: reads the epoch key, adopts it or writes a new one.
    /// `None` when the key changed meanwhile, or `probe` was answered
    /// before the epoch it would be compared with was written: the caller
    /// tries again with a new probe. On the `last` attempt such a probe is
    /// set aside instead (as when `Status` is not answered): the epoch is
    /// adopted without the restore check, and a warning says so, rather
    /// than the store failing to open behind a member that lags.
    async fn settle_after(
        &self,
        probe: Option<LogProbe>,
        known: Option<&str>,
        stale: bool,
        last: bool,
    ) -> Result<Option<String>> {
        let key = self.epoch_key();
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
        let recorded = current_value.as_deref().and_then(recorded_gap);
        // A stale epoch still holding what this process knew is renewed
        // whatever the log says: the check below cannot change that.
        let renewing = stale && current_value.as_deref() == known;
        let restored = match (probe, &current, recorded) {
            _ if renewing => false,
            (Some(p), Some(kv), Some(then)) => {
                if p.revision < kv.mod_revision() {
                    // The status predates this epoch (written since by
                    // another process, its gap measured later): it tells
                    // nothing about it. Look again, or set it aside.
                    if !last {
                        return Ok(None);
                    }
                    tracing::warn!(
                        "etcd: the member's status stayed older than the keysmith epoch; the epoch is adopted without the snapshot-restore check (after a restore, run `keysmith fence --all`)"
                    );
                    false
                } else if p.gap() < then.saturating_sub(PROBE_SLACK) {
                    tracing::error!(
                        recorded = then,
                        now = p.gap(),
                        "etcd's raft log restarted under its data (a snapshot restore?): a new generation of the store"
                    );
                    true
                } else {
                    false
                }
            }
            _ => false,
        };
        let renew = current_value.is_none() || restored || renewing;
        if !renew {
            let epoch = current_value.unwrap_or_default();
            self.adopt_epoch(&epoch, &resp);
            return Ok(Some(epoch));
        }
        // The gap to record: at most the true one where the new epoch
        // lands (see [`LogProbe::gap_at_most`]).
        let read_at = resp.header().map(|h| h.revision());
        let new = match probe.zip(read_at) {
            Some((p, r)) => format!(
                "{} {}",
                keysmith_core::driver::random_id(),
                p.gap_at_most(r)
            ),
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
        if !resp.succeeded() {
            return Ok(None);
        }
        if known.is_some() {
            tracing::warn!(
                epoch = %new,
                "etcd: new keysmith epoch; rows of the old one move forward by their failover skip"
            );
        }
        self.adopt_epoch(&new, &resp);
        Ok(Some(new))
    }

    /// Where the member's raft log stands (one `Status` call; see the
    /// module docs); `None` when `Status` is not answered (permissions):
    /// then only the revision watch of running processes detects a restore.
    async fn probe_log(&self) -> Option<LogProbe> {
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
                let applied = i64::try_from(index).ok().filter(|&i| i > 0)?;
                Some(LogProbe { applied, revision })
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

#[cfg(test)]
mod tests {
    use super::*;
    use keysmith_testsupport::etcd::TempEtcd;

    async fn two_stores_on_a_fresh_prefix(etcd: &TempEtcd) -> (EtcdStore, EtcdStore) {
        let url = etcd.url_with_prefix(&format!(
            "generation-{}",
            keysmith_core::driver::random_id()
        ));
        let a = EtcdStore::connect(&url).await.unwrap();
        let b = EtcdStore::connect(&url).await.unwrap();
        (a, b)
    }

    /// A raft entry that writes nothing: a transaction whose compare fails
    /// (it has a put, so it goes through the log). It moves the applied
    /// index and not the revision, as a lost race of any client does.
    async fn a_failed_transaction(store: &EtcdStore) {
        let key = format!("{}no-such-key", store.prefix);
        let txn = Txn::new()
            .when([Compare::version(key.clone(), CompareOp::Equal, 1)])
            .and_then([TxnOp::put(key, "never", None)]);
        let resp = store.txn_unobserved("fail a compare", txn).await.unwrap();
        assert!(!resp.succeeded());
    }

    /// Two processes start on a fresh prefix: `b` reads the member's status,
    /// another client loses a race (a raft entry that writes nothing), `a`
    /// writes the first epoch, then `b` reads it. `b`'s status is older than
    /// the epoch, so it must not take the epoch's recorded gap, measured
    /// later, for a log that restarted: `b` adopts `a`'s epoch, and the
    /// rows `a` wrote in it are not fenced.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_status_read_before_the_epoch_was_written_is_no_restore() {
        let Some(etcd) = TempEtcd::shared() else {
            return;
        };
        let (a, b) = two_stores_on_a_fresh_prefix(etcd).await;
        let early = b.probe_log().await.expect("etcd answers Status");
        a_failed_transaction(&a).await;
        let first = a.epoch().await.unwrap();
        let settled = b
            .settle_after(Some(early), None, false, false)
            .await
            .unwrap();
        assert!(
            settled.is_none() || settled.as_deref() == Some(first.as_str()),
            "b wrote a new epoch {settled:?} over a's {first:?}: a spurious new generation"
        );
        assert_eq!(b.epoch().await.unwrap(), first);
        assert_eq!(a.epoch().await.unwrap(), first);
        // On the last attempt the old status is set aside: the epoch is
        // adopted (the store opens behind a lagging member), never renewed.
        let last = b
            .settle_after(Some(early), None, false, true)
            .await
            .unwrap();
        assert_eq!(last.as_deref(), Some(first.as_str()));
        assert_eq!(a.epoch().await.unwrap(), first);
    }

    /// The other side: a store opened after a snapshot restore (nothing
    /// seen before to compare with) still finds the raft log restarted
    /// under the data and writes a new epoch, while one opened on the same
    /// cluster before the restore, with writes and lost races since the
    /// epoch, adopts it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_store_opened_after_a_snapshot_restore_renews_the_epoch() {
        use keysmith_testsupport::etcd::EtcdCluster;
        use keysmith_testsupport::etcd_restore::EtcdTools;
        let Some(mut cluster) = EtcdCluster::start(1) else {
            return;
        };
        let Some(tools) = EtcdTools::find() else {
            return;
        };
        let url = cluster.url();
        let a = EtcdStore::connect(&url).await.unwrap();
        let first = a.epoch().await.unwrap();
        for i in 0..20 {
            let key = format!("{}filler/{i}", a.prefix);
            let put = Txn::new().and_then([TxnOp::put(key, "x", None)]);
            a.txn_unobserved("write a filler", put).await.unwrap();
            a_failed_transaction(&a).await;
        }
        let before = EtcdStore::connect(&url).await.unwrap();
        assert_eq!(before.epoch().await.unwrap(), first);
        let snapshot = tokio::task::block_in_place(|| tools.save(&cluster, 0));
        tokio::task::block_in_place(|| tools.restore(&mut cluster, &snapshot));
        let after = EtcdStore::connect(&url).await.unwrap();
        let renewed = after.epoch().await.unwrap();
        assert_ne!(
            renewed, first,
            "a store opened after the restore kept the old epoch"
        );
        let later = EtcdStore::connect(&url).await.unwrap();
        assert_eq!(later.epoch().await.unwrap(), renewed);
    }
}
