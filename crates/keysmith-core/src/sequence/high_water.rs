//! What a process remembers of the ranges it reserved, so that a store that
//! went back in time (a failover to a lagging replica, a restore from backup)
//! is caught before any value of a range it hands out again leaves the
//! library.
//!
//! A [`HighWater`] is kept per sequence by a [`super::Sequence`] handle, and
//! shared between a server's handle and the leases it grants
//! ([`super::SequenceBuilder::high_water`], [`super::lease::lease_guarded`]).
//! Every range the store returns is checked before it is used:
//!
//! - it must start at or above the end of every range that had come back
//!   before the request for it was sent (the store is linearizable: a
//!   reservation that completed before another began got lower values);
//! - it must not overlap any of the last [`RECENT`] ranges (those that
//!   completed while it was in flight).
//!
//! A range that fails either is refused with [`Error::StoreWentBack`]: none
//! of its values is handed out. A hand-back that the store took (a clean
//! close, a lease release, a failed strict batch) lowers the mark, since
//! those values are the store's to hand out again. Hand-backs go through
//! `HighWater::hand_back`: while one is in flight, a range that would be
//! refused waits for its outcome and is checked again, since the store may
//! already have taken the values back and handed them to this very request.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use crate::store::{Put, SequenceStore};
use crate::{Error, Result};

/// How many recent ranges a [`HighWater`] keeps to check ranges that were in
/// flight together.
pub const RECENT: usize = 64;

/// The ranges one process reserved of one sequence: see the module docs.
#[derive(Debug, Default)]
pub struct HighWater {
    state: Mutex<State>,
    refused: AtomicU64,
    /// Woken when a hand-back in flight ends.
    settled: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The end of the highest range admitted; `None` before the first.
    high: Option<i64>,
    /// The newest ranges admitted, oldest first.
    recent: VecDeque<Range<i64>>,
    /// Hand-backs so far, and the lowest value the last one gave back.
    handbacks: u64,
    last_handback_from: i64,
    /// Hand-backs sent to the store whose outcome is not known yet.
    pending: usize,
}

/// What was known when a request was sent: see [`HighWater::before`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    floor: Option<i64>,
    handbacks: u64,
}

impl HighWater {
    /// A mark that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// The end of the highest range admitted, if any.
    pub fn high(&self) -> Option<i64> {
        self.lock().high
    }

    /// How many ranges this mark refused.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Taken right before a reservation is sent to the store.
    pub(crate) fn before(&self) -> Ticket {
        let s = self.lock();
        Ticket {
            floor: s.high,
            handbacks: s.handbacks,
        }
    }

    /// Checks the range `got` the store returned for the request `ticket`
    /// was taken for, and remembers it. A range that would be refused while
    /// a hand-back is in flight waits for it to end, then is checked again.
    ///
    /// # Errors
    /// [`Error::StoreWentBack`] naming `kind` and `name` when `got` starts
    /// below what had come back before the request, or overlaps a recent
    /// range; the range is not remembered.
    pub(crate) async fn admit(
        &self,
        kind: &'static str,
        name: &str,
        ticket: Ticket,
        got: &Range<i64>,
    ) -> Result<()> {
        let held = loop {
            let settled = {
                let mut s = self.lock();
                let Some(held) = refusal(&s, ticket, got) else {
                    s.high = Some(s.high.map_or(got.end, |h| h.max(got.end)));
                    if s.recent.len() == RECENT {
                        s.recent.pop_front();
                    }
                    s.recent.push_back(got.clone());
                    return Ok(());
                };
                if s.pending == 0 {
                    break held;
                }
                // Made under the lock: the end of the hand-back, which
                // takes the lock too, cannot come before it.
                self.settled.notified()
            };
            settled.await;
        };
        self.refused.fetch_add(1, Relaxed);
        tracing::error!(
            kind,
            name,
            held,
            got = got.start,
            "the store went back: it returned values this process already reserved; refused, nothing handed out"
        );
        Err(Error::StoreWentBack {
            kind,
            name: name.to_owned(),
            held,
            got: got.start,
        })
    }

    /// Hands every value of sequence `name` from `from` on back to the
    /// store (a conditional put of `next` on the row `version` the last
    /// reservation left), lowering the mark if the store took them. Ranges
    /// that come back meanwhile wait for the outcome before they are
    /// checked (see [`Self::admit`]).
    ///
    /// # Errors
    /// What the store's put returns; the mark is unchanged then.
    pub(crate) async fn hand_back(
        &self,
        store: &dyn SequenceStore,
        name: &str,
        from: i64,
        version: u64,
    ) -> Result<Put> {
        let _pending = Pending::start(self);
        let put = store.put_if_version(name, from, version).await?;
        if let Put::Done(_) = put {
            self.handed_back(from);
        }
        Ok(put)
    }

    /// The store took back every value from `from` on (a conditional put
    /// that succeeded): they may be reserved again.
    fn handed_back(&self, from: i64) {
        let mut s = self.lock();
        s.high = s.high.map(|h| h.min(from));
        for r in s.recent.iter_mut() {
            r.end = r.end.min(from);
        }
        s.recent.retain(|r| r.start < r.end);
        s.handbacks += 1;
        s.last_handback_from = from;
    }
}

/// Why `got`, returned for the request of `ticket`, must be refused: the
/// value this process held that it is below or overlaps; `None` if it may
/// be admitted.
fn refusal(s: &State, ticket: Ticket, got: &Range<i64>) -> Option<i64> {
    let mut floor = ticket.floor;
    if s.handbacks != ticket.handbacks {
        // Values were handed back while the request was in flight: the
        // store may rightly return them.
        floor = floor.map(|f| f.min(s.last_handback_from));
    }
    let below = floor.filter(|f| got.start < *f);
    let overlap = s
        .recent
        .iter()
        .find(|r| r.start < got.end && got.start < r.end)
        .map(|r| r.end);
    below.or(overlap)
}

/// A hand-back in flight: counted from its start until it ends, however
/// it ends (a put that failed, or a future dropped mid-way).
struct Pending<'a>(&'a HighWater);

impl<'a> Pending<'a> {
    fn start(hw: &'a HighWater) -> Self {
        hw.lock().pending += 1;
        Pending(hw)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.pending -= 1;
        // Under the lock: see `admit`.
        self.0.settled.notify_waiters();
    }
}

/// One [`HighWater`] per sequence name, for a process that opens handles and
/// grants leases of many sequences of one store (the HTTP service).
///
/// While anyone holds the mark of a name (a handle, a lease being granted),
/// [`Self::get`] hands out that same mark. [`Self::release_unheld`] turns
/// the marks no one else holds into what a later request needs to be
/// checked against: the end of the highest range each admitted (after its
/// hand-backs), in 24 bytes under a 128-bit digest of the name, in one
/// table. So a server's memory follows its open handles, not every name it
/// ever served (issue 50: a sequence per customer); the next
/// [`Self::get`] of a name starts from the end its last mark left. Two
/// names whose digests collide (SHA-256, truncated: not in practice) would
/// share the higher end, which can only refuse a range, never admit one
/// twice.
#[derive(Debug, Default)]
pub struct HighWaters {
    marks: Mutex<Marks>,
}

#[derive(Debug, Default)]
struct Marks {
    /// The marks handed out and not released, by name.
    held: HashMap<String, Arc<HighWater>>,
    /// The end of the highest range of each released mark, by digest of
    /// its name.
    ends: HashMap<[u8; 16], i64>,
    /// The ranges refused by released marks, by name (only names with
    /// refusals: a store that went back).
    refused: BTreeMap<String, u64>,
}

/// If only the registry holds `h`, the mark of `name`: keeps its end (and
/// its refusals) and says so; it is to be removed from the marks held.
/// Only `get` clones a held mark, under the lock the caller holds: no one
/// can take it up meanwhile. A hand-back in flight holds its handle, so the
/// mark too.
fn keep_end(
    name: &str,
    h: &Arc<HighWater>,
    ends: &mut HashMap<[u8; 16], i64>,
    refused: &mut BTreeMap<String, u64>,
) -> bool {
    if Arc::strong_count(h) > 1 {
        return false;
    }
    if let Some(high) = h.high() {
        ends.insert(digest(name), high);
    }
    if h.refused() > 0 {
        *refused.entry(name.to_owned()).or_default() += h.refused();
    }
    true
}

/// The key of a name in [`Marks::ends`].
fn digest(name: &str) -> [u8; 16] {
    use sha2::Digest;
    let d = sha2::Sha256::digest(name.as_bytes());
    let mut key = [0; 16];
    key.copy_from_slice(&d[..16]);
    key
}

impl HighWaters {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The mark of sequence `name`: the one handed out already, else one
    /// that starts from the end the last one of the name left, if any.
    pub fn get(&self, name: &str) -> Arc<HighWater> {
        let mut m = self.lock();
        if let Some(h) = m.held.get(name) {
            return h.clone();
        }
        let high = m.ends.remove(&digest(name));
        let h = Arc::new(HighWater {
            state: Mutex::new(State {
                high,
                ..State::default()
            }),
            ..HighWater::default()
        });
        m.held.insert(name.to_owned(), h.clone());
        h
    }

    /// Forgets `name` (it was dropped; a sequence created later under the
    /// same name continues above the values it handed out, unless created
    /// with `start_below_dropped`, which may start again below).
    pub fn forget(&self, name: &str) {
        let mut m = self.lock();
        m.held.remove(name);
        m.ends.remove(&digest(name));
    }

    /// Releases every mark that no one but this registry holds (its
    /// handles closed, its leases granted), keeping of each only the end
    /// of its highest range (a mark that admitted nothing keeps nothing);
    /// returns how many. One pass over the marks held: for a sweeper, not
    /// for a request.
    pub fn release_unheld(&self) -> usize {
        let m = &mut *self.lock();
        let before = m.held.len();
        m.held
            .retain(|name, h| !keep_end(name, h, &mut m.ends, &mut m.refused));
        before - m.held.len()
    }

    /// Releases the mark of `name` if no one but this registry holds it:
    /// [`Self::release_unheld`] for one name (for a request whose use of
    /// the name failed, so that names that hold no values take no memory).
    pub fn release(&self, name: &str) {
        let m = &mut *self.lock();
        if let Some(h) = m.held.get(name)
            && keep_end(name, h, &mut m.ends, &mut m.refused)
        {
            m.held.remove(name);
        }
    }

    /// How many names have a mark: held, or the end of a released one.
    pub fn len(&self) -> usize {
        let m = self.lock();
        m.held.len() + m.ends.len()
    }

    /// Whether no name has a mark.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ranges refused so far, per name, for names with any.
    pub fn refused(&self) -> Vec<(String, u64)> {
        let m = self.lock();
        let mut all = m.refused.clone();
        for (n, h) in &m.held {
            if h.refused() > 0 {
                *all.entry(n.clone()).or_default() += h.refused();
            }
        }
        all.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A released mark keeps only its end: the next `get` starts from it
    /// and refuses what lies below; an unused one keeps nothing; a held one
    /// is not released; a forgotten name starts afresh.
    #[tokio::test]
    async fn a_released_mark_keeps_its_end_and_nothing_else() {
        let marks = HighWaters::new();
        drop(marks.get("never"));
        assert_eq!(marks.release_unheld(), 1);
        assert_eq!(marks.len(), 0, "an unused mark keeps nothing");
        let held = marks.get("held");
        held.admit("sequence", "held", held.before(), &(1..10))
            .await
            .unwrap();
        assert_eq!(marks.release_unheld(), 0, "held: kept");
        assert!(Arc::ptr_eq(&held, &marks.get("held")));
        drop(held);
        assert_eq!(marks.release_unheld(), 1);
        assert_eq!(marks.len(), 1, "its end");
        let again = marks.get("held");
        assert_eq!(again.high(), Some(10));
        let e = again
            .admit("sequence", "held", again.before(), &(5..15))
            .await
            .unwrap_err();
        assert!(matches!(e, Error::StoreWentBack { held: 10, .. }), "{e}");
        drop(again);
        marks.release_unheld();
        assert_eq!(marks.refused(), vec![("held".to_owned(), 1)]);
        marks.forget("held");
        assert_eq!(marks.len(), 0);
        assert_eq!(marks.get("held").high(), None);
    }

    /// A hand-back lowers the end a released mark keeps.
    #[tokio::test]
    async fn a_released_mark_keeps_its_end_after_a_hand_back() {
        let marks = HighWaters::new();
        let h = marks.get("s");
        h.admit("sequence", "s", h.before(), &(1..11))
            .await
            .unwrap();
        h.handed_back(4);
        drop(h);
        marks.release_unheld();
        assert_eq!(marks.get("s").high(), Some(4));
    }

    #[tokio::test]
    async fn ranges_in_order_and_out_of_order_completions_pass() {
        let h = HighWater::new();
        let t1 = h.before();
        let t2 = h.before();
        // Two requests in flight; the later one comes back first.
        h.admit("sequence", "s", t2, &(20..30)).await.unwrap();
        h.admit("sequence", "s", t1, &(10..20)).await.unwrap();
        assert_eq!(h.high(), Some(30));
        h.admit("sequence", "s", h.before(), &(30..40))
            .await
            .unwrap();
        assert_eq!(h.refused(), 0);
    }

    #[tokio::test]
    async fn a_range_below_what_came_back_before_is_refused() {
        let h = HighWater::new();
        h.admit("sequence", "s", h.before(), &(10..20))
            .await
            .unwrap();
        let e = h
            .admit("sequence", "s", h.before(), &(15..25))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            Error::StoreWentBack {
                kind: "sequence",
                name: "s".into(),
                held: 20,
                got: 15
            }
        );
        assert!(e.to_string().contains("went back"), "{e}");
        // Not remembered: the mark is where it was.
        assert_eq!(h.high(), Some(20));
        assert_eq!(h.refused(), 1);
        // Far below, as after a restore: refused too.
        assert!(h.admit("sequence", "s", h.before(), &(1..5)).await.is_err());
    }

    #[tokio::test]
    async fn overlapping_ranges_in_flight_together_are_refused() {
        let h = HighWater::new();
        let (t1, t2) = (h.before(), h.before());
        h.admit("sequence", "s", t1, &(10..20)).await.unwrap();
        assert!(h.admit("sequence", "s", t2, &(15..16)).await.is_err());
    }

    #[tokio::test]
    async fn a_hand_back_lowers_the_mark_even_for_requests_in_flight() {
        let h = HighWater::new();
        h.admit("sequence", "s", h.before(), &(10..20))
            .await
            .unwrap();
        let in_flight = h.before();
        h.handed_back(15);
        assert_eq!(h.high(), Some(15));
        h.admit("sequence", "s", in_flight, &(15..25))
            .await
            .unwrap();
        // Below the hand-back is still refused.
        assert!(
            h.admit("sequence", "s", h.before(), &(12..13))
                .await
                .is_err()
        );
    }

    /// Polls `fut` once.
    fn poll_once<F: std::future::Future + Unpin>(fut: &mut F) -> std::task::Poll<F::Output> {
        let waker = std::task::Waker::noop();
        std::pin::Pin::new(fut).poll(&mut std::task::Context::from_waker(waker))
    }

    /// After 10..20 came back, the range 15..25 comes back while a hand-back
    /// from 15 is in flight: what `admit` says once the store `took` the
    /// hand-back, or refused it.
    async fn admit_during_a_hand_back(took: bool) -> (HighWater, Result<()>) {
        let h = HighWater::new();
        h.admit("sequence", "s", h.before(), &(10..20))
            .await
            .unwrap();
        let in_flight = h.before();
        let pending = Pending::start(&h);
        let outcome = {
            let mut admit = Box::pin(h.admit("sequence", "s", in_flight, &(15..25)));
            assert!(
                poll_once(&mut admit).is_pending(),
                "waits for the hand-back"
            );
            if took {
                h.handed_back(15);
            }
            drop(pending);
            admit.await
        };
        (h, outcome)
    }

    #[tokio::test]
    async fn a_range_back_while_a_hand_back_is_in_flight_waits_for_its_outcome() {
        // Taken back: the range the store handed out again is admitted.
        let (h, outcome) = admit_during_a_hand_back(true).await;
        outcome.unwrap();
        assert_eq!(h.high(), Some(25));

        // Refused by the store: the range is refused once the hand-back ends.
        let (h, outcome) = admit_during_a_hand_back(false).await;
        assert!(outcome.is_err());
        assert_eq!(h.refused(), 1);

        // With no hand-back in flight a refusal does not wait.
        let mut admit = Box::pin(h.admit("sequence", "s", h.before(), &(1..2)));
        assert!(poll_once(&mut admit).is_ready());
    }
}
