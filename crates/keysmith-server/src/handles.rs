//! One library handle per name, opened on first use and shared by every
//! request, so all clients of a server share one block cache per sequence.
//!
//! The map is behind a `std::sync::RwLock` that is never held across an
//! await: the hot path takes the read lock, clones an `Arc`, and lets go.
//!
//! The map is bounded ([`HandleLimits`]): a handle no request used for
//! `idle` is closed by the server's sweeper ([`Handles::close_idle`]), and
//! when `max_open` handles are open, opening another first closes one that
//! no request holds: of the principal that opened the most handles, the
//! least recently used (so one principal's many names push out its own
//! handles, not another's); if every one is in use, the open fails with a
//! 503. Closing goes through [`Handle::close`], so a sequence's
//! unused tail goes back to the store as at shutdown. The closes an open at
//! the cap makes run on a task of their own, so the request that opened
//! waits for none of them (unless closes fall far behind:
//! [`MAX_CLOSES_BEHIND`]); [`Handles::close_all`] waits for them. These closes take only
//! a handle no request holds: its `Arc` is the map's alone, checked under
//! the write lock, which keeps every lookup out meanwhile. (A drop of the
//! sequence, or shutdown, closes handles in use too; their requests then
//! see [`keysmith::Error::Closed`].)

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use prometheus::{Histogram, IntCounter};

use crate::access::ObjectKind;
use crate::metrics::Metrics;

/// How long the allocation rate is averaged over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// A library handle the server keeps open per name.
pub(crate) trait Handle: Send + Sync + 'static {
    /// Closes the handle, handing back what it can; logs what happened.
    fn close(&self) -> impl Future<Output = ()> + Send;
}

impl Handle for keysmith::sequence::Sequence {
    async fn close(&self) {
        match keysmith::sequence::Sequence::close(self).await {
            Ok(Some(r)) => tracing::info!(
                sequence = self.name(),
                "closed; handed back {}..={}",
                r.start,
                r.end - 1
            ),
            Ok(None) => tracing::info!(sequence = self.name(), "closed; nothing to hand back"),
            // Dropped: nothing to hand back to.
            Err(keysmith::Error::NotFound { .. }) => {
                tracing::debug!(sequence = self.name(), "closed; the sequence was dropped")
            }
            Err(e) => tracing::warn!(sequence = self.name(), "close failed: {e}"),
        }
    }
}

impl Handle for keysmith::AnySequence {
    /// A plain sequence hands its unused values back; a leader releases
    /// its lease (its values in memory are a gap); a numbered sequence's
    /// handle holds no values (each call reserves its own).
    async fn close(&self) {
        match self {
            keysmith::AnySequence::Plain(s) => Handle::close(s).await,
            keysmith::AnySequence::Leader(s) => match s.close().await {
                Ok(()) => tracing::info!(sequence = s.name(), "closed; leader lease released"),
                Err(e) => tracing::warn!(
                    sequence = s.name(),
                    "releasing the leader lease failed: {e}; it expires after its time to live"
                ),
            },
            keysmith::AnySequence::Numbered(_) => {}
        }
    }
}

impl Handle for keysmith::pool::ValuePool {
    /// A pool handle holds nothing back: every number it took was handed out.
    async fn close(&self) {}
}

/// A handle and what the server counts about it.
#[derive(Debug)]
pub(crate) struct Entry<H> {
    pub(crate) handle: H,
    /// Values handed out through this handle.
    pub(crate) served: AtomicU64,
    /// The greatest value handed out through this handle (-1: none yet).
    pub(crate) last: AtomicI64,
    pub(crate) values: IntCounter,
    pub(crate) requests: IntCounter,
    pub(crate) latency: Histogram,
    /// `(when, served)` samples, one a second, over [`RATE_WINDOW`].
    samples: Mutex<VecDeque<(Instant, u64)>>,
    /// When a request last asked for this handle, in ms since the map's
    /// epoch.
    last_used: AtomicU64,
    /// The map's use count when a request last asked for it: orders
    /// handles by last use (the clock above may tie).
    last_use: AtomicU64,
    /// Whether the metric series above are this name's own (else the shared
    /// `_other` series: see [`Metrics::series`]).
    pub(crate) named: bool,
    /// The principal whose request opened it (`""`: outside a request): at
    /// the cap, the principal holding the most handles gives one up first.
    owner: String,
}

impl<H> Entry<H> {
    /// Records a successful allocation of `values` that took since `started`.
    pub(crate) fn record(&self, values: &[i64], started: Instant) {
        let n = values.len() as u64;
        self.served.fetch_add(n, Relaxed);
        if let Some(&max) = values.iter().max() {
            self.last.fetch_max(max, Relaxed);
        }
        self.values.inc_by(n);
        self.requests.inc();
        self.latency.observe(started.elapsed().as_secs_f64());
    }

    /// Values handed out per second over the last [`RATE_WINDOW`] (0 until
    /// two samples exist).
    pub(crate) fn rate(&self) -> f64 {
        let s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        match (s.front(), s.back()) {
            (Some(a), Some(b)) if b.0 > a.0 => {
                (b.1 - a.1) as f64 / b.0.duration_since(a.0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    fn sample(&self, now: Instant) {
        let mut s = self.samples.lock().unwrap_or_else(|p| p.into_inner());
        s.push_back((now, self.served.load(Relaxed)));
        while s
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > RATE_WINDOW)
        {
            s.pop_front();
        }
    }
}

/// How many handles of one kind stay open, and for how long unused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HandleLimits {
    /// The most open at once.
    pub(crate) max_open: usize,
    /// A handle no request asked for this long is closed.
    pub(crate) idle: Duration,
}

/// The open handles of one kind (sequences or pools), by name.
#[derive(Debug)]
pub(crate) struct Handles<H> {
    kind: ObjectKind,
    map: RwLock<HashMap<String, Arc<Entry<H>>>>,
    /// Handles out of the map whose close (a hand-back, a store write) has
    /// not finished: still open, as [`Handles::len`] counts.
    being_closed: Arc<ClosesUnderWay>,
    closing: AtomicBool,
    limits: HandleLimits,
    /// What `last_used` counts from.
    epoch: Instant,
    /// Uses so far (see `Entry::last_use`).
    uses: AtomicU64,
}

impl<H: Handle> Handles<H> {
    pub(crate) fn new(kind: ObjectKind, limits: HandleLimits) -> Self {
        Handles {
            kind,
            map: RwLock::new(HashMap::new()),
            being_closed: Arc::default(),
            closing: AtomicBool::new(false),
            limits,
            epoch: Instant::now(),
            uses: AtomicU64::new(0),
        }
    }

    /// How many handles are open: in the map, or out of it and still
    /// closing (the metric `keysmith_open_handles`: 0 once every close is
    /// done).
    pub(crate) fn len(&self) -> usize {
        self.map.read().unwrap_or_else(|p| p.into_inner()).len()
            + self.being_closed.count.load(Relaxed)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// `e` was asked for by a request now.
    fn touch(&self, e: &Entry<H>) {
        e.last_used.store(self.now_ms(), Relaxed);
        e.last_use.store(self.uses.fetch_add(1, Relaxed), Relaxed);
    }

    /// The open handle of `name`, if any (to look at: it does not count as
    /// a use).
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Entry<H>>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The open handle of `name`, if any, for a request that uses it: it
    /// counts as used now (see [`HandleLimits`]).
    pub(crate) fn get_to_use(&self, name: &str) -> Option<Arc<Entry<H>>> {
        let e = self.get(name)?;
        self.touch(&e);
        Some(e)
    }

    /// The handle of `name`, opened with `open` if there is none yet. Two
    /// requests that race to open it both open one; the first inserted wins
    /// and the other is closed (it has reserved nothing).
    ///
    /// # Errors
    /// What `open` fails with; [`keysmith::Error::Closed`] once the server
    /// is shutting down.
    pub(crate) async fn get_or_open<F, Fut>(
        &self,
        name: &str,
        metrics: &Metrics,
        open: F,
    ) -> keysmith::Result<Arc<Entry<H>>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = keysmith::Result<H>>,
    {
        if let Some(e) = self.get_to_use(name) {
            return Ok(e);
        }
        let closed = || keysmith::Error::Closed {
            name: name.to_owned(),
        };
        if self.closing.load(Relaxed) {
            return Err(closed());
        }
        let handle = open().await?;
        let series = metrics.series(self.kind, name);
        let fresh = Arc::new(Entry {
            handle,
            served: AtomicU64::new(0),
            last: AtomicI64::new(-1),
            values: series.values,
            requests: series.requests,
            latency: series.latency,
            samples: Mutex::new(VecDeque::new()),
            last_used: AtomicU64::new(self.now_ms()),
            last_use: AtomicU64::new(self.uses.fetch_add(1, Relaxed)),
            named: series.named,
            owner: crate::access::caller_name().unwrap_or_default(),
        });
        fresh.sample(Instant::now());
        let mut full = false;
        let (entry, loser, pushed_out) = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            if self.closing.load(Relaxed) {
                (None, Some(fresh), Vec::new())
            } else if let Some(e) = map.get(name) {
                self.touch(e);
                (Some(e.clone()), Some(fresh), Vec::new())
            } else {
                let pushed_out: Vec<_> = if map.len() >= self.limits.max_open {
                    least_recently_used(&map, eviction_batch(self.limits.max_open))
                        .into_iter()
                        .filter_map(|n| map.remove_entry(&n))
                        .map(|(n, e)| (n, e, self.taken_out()))
                        .collect()
                } else {
                    Vec::new()
                };
                if map.len() >= self.limits.max_open {
                    full = true;
                    (None, Some(fresh), pushed_out)
                } else {
                    map.insert(name.to_owned(), fresh.clone());
                    (Some(fresh), None, pushed_out)
                }
            }
        };
        if !pushed_out.is_empty() {
            self.close_pushed_out(pushed_out, metrics).await;
        }
        if let Some(l) = loser {
            // Beside a winner its series are the winner's (same labels): kept.
            if entry.is_none() {
                metrics.forget(self.kind, name, l.named);
            }
            l.handle.close().await;
        }
        if full {
            return Err(keysmith::Error::Unavailable(format!(
                "this server has {} {} handles open, every one in use by a request; retry shortly, \
                 or raise the server's max_open_handles (`keysmith serve --max-open-handles`)",
                self.limits.max_open,
                self.kind.as_str()
            )));
        }
        entry.ok_or_else(closed)
    }

    /// Closes the handles an open at the cap took out of the map: on a task
    /// of their own, one after another, so that the request waits for none
    /// of them; in the request itself when more than a
    /// [`MAX_CLOSES_BEHIND`]th of the cap is still being closed (opens
    /// outrun the store's writes: the request waits, and so do the opens
    /// after it).
    async fn close_pushed_out(
        &self,
        pushed_out: Vec<(String, Arc<Entry<H>>, BeingClosed)>,
        metrics: &Metrics,
    ) {
        let kind = self.kind;
        // Closes under way from before this batch.
        let behind = (self.being_closed.count.load(Relaxed)).saturating_sub(pushed_out.len());
        for (n, e, _) in &pushed_out {
            metrics.forget(kind, n, e.named);
        }
        let closes = async move {
            for (n, e, counted) in pushed_out {
                tracing::debug!(kind = kind.as_str(), name = %n, "closing a least recently used handle to open another");
                e.handle.close().await;
                drop(counted);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) if behind <= self.limits.max_open / MAX_CLOSES_BEHIND => {
                rt.spawn(closes);
            }
            _ => closes.await,
        }
    }

    /// One handle taken out of the map to be closed: counted open until
    /// the guard goes (after its close, or with a call dropped before it).
    fn taken_out(&self) -> BeingClosed {
        self.being_closed.count.fetch_add(1, Relaxed);
        BeingClosed(self.being_closed.clone())
    }

    /// Removes `entry` from the metrics and closes it (it is out of the map,
    /// `counted` by [`Self::taken_out`]).
    async fn close_entry(
        &self,
        name: &str,
        entry: &Arc<Entry<H>>,
        metrics: &Metrics,
        counted: BeingClosed,
    ) {
        metrics.forget(self.kind, name, entry.named);
        entry.handle.close().await;
        drop(counted);
    }

    /// Closes every handle no request asked for over the last `idle` of the
    /// limits and none holds now; returns how many.
    pub(crate) async fn close_idle(&self, metrics: &Metrics) -> usize {
        let idle_ms = u64::try_from(self.limits.idle.as_millis()).unwrap_or(u64::MAX);
        let now = self.now_ms();
        let idle = |e: &Arc<Entry<H>>| {
            Arc::strong_count(e) == 1 && now.saturating_sub(e.last_used.load(Relaxed)) >= idle_ms
        };
        // Found under the read lock (requests go on), taken out under the
        // write lock only if still idle: the write lock is held for the
        // idle handles, not for every open one.
        let names: Vec<String> = self
            .map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, e)| idle(e))
            .map(|(n, _)| n.clone())
            .collect();
        if names.is_empty() {
            return 0;
        }
        let gone: Vec<_> = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            let mut gone = Vec::with_capacity(names.len());
            for n in names {
                if map.get(&n).is_some_and(idle)
                    && let Some((n, e)) = map.remove_entry(&n)
                {
                    gone.push((n, e, self.taken_out()));
                }
            }
            gone
        };
        let closed = gone.len();
        for (n, e, counted) in gone {
            tracing::debug!(kind = self.kind.as_str(), name = %n, "closing a handle idle for {} ms", idle_ms);
            self.close_entry(&n, &e, metrics, counted).await;
        }
        closed
    }

    /// Removes and closes the handle of `name`, if there is one.
    pub(crate) async fn remove(&self, name: &str, metrics: &Metrics) {
        let gone = self
            .map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
            .map(|e| (e, self.taken_out()));
        if let Some((e, counted)) = gone {
            self.close_entry(name, &e, metrics, counted).await;
        }
    }

    /// Removes and closes `entry` if it is still the handle of `name` (after
    /// it failed in a way that shows the name is gone from the store).
    pub(crate) async fn evict(&self, name: &str, entry: &Arc<Entry<H>>, metrics: &Metrics) {
        let removed = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            match map.get(name) {
                Some(e) if Arc::ptr_eq(e, entry) => map.remove(name).map(|_| self.taken_out()),
                _ => None,
            }
        };
        if let Some(counted) = removed {
            self.close_entry(name, entry, metrics, counted).await;
        }
    }

    /// Every open handle, by name.
    pub(crate) fn snapshot(&self) -> Vec<(String, Arc<Entry<H>>)> {
        let mut v: Vec<_> = self
            .map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Takes a rate sample of every handle (under the read lock: no copy
    /// of the map, no sort).
    pub(crate) fn sample_all(&self, now: Instant) {
        for e in self.map.read().unwrap_or_else(|p| p.into_inner()).values() {
            e.sample(now);
        }
    }

    /// Closes every handle, and waits for the closes already under way;
    /// no handle opens after this.
    pub(crate) async fn close_all(&self) {
        self.closing.store(true, Relaxed);
        let all: Vec<_> = self
            .map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .collect();
        for (_, e) in all {
            e.handle.close().await;
        }
        self.being_closed.all_done().await;
    }
}

/// Opens at the cap close in the background while at most a
/// `MAX_CLOSES_BEHIND`th of the cap is still being closed; past it an open
/// closes its batch itself, so that the handles out of the map and not yet
/// closed stay bounded.
const MAX_CLOSES_BEHIND: usize = 4;

/// How many handles are out of the map and not closed yet, and a wake-up
/// when that falls to 0.
#[derive(Debug, Default)]
struct ClosesUnderWay {
    count: AtomicUsize,
    none_left: tokio::sync::Notify,
}

impl ClosesUnderWay {
    /// Returns once no close is under way.
    async fn all_done(&self) {
        loop {
            let none_left = self.none_left.notified();
            tokio::pin!(none_left);
            none_left.as_mut().enable();
            if self.count.load(Relaxed) == 0 {
                return;
            }
            none_left.await;
        }
    }
}

/// A handle out of the map and not closed yet ([`Handles::taken_out`]).
struct BeingClosed(Arc<ClosesUnderWay>);

impl Drop for BeingClosed {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Relaxed) == 1 {
            self.0.none_left.notify_waiters();
        }
    }
}

/// How many handles one open at the cap closes: a 64th of the cap (at
/// least one), so that the scan that picks them ([`least_recently_used`],
/// O(open handles)) runs once per that many opens, and an open at the cap
/// costs O(64) map work on average, whatever the cap.
fn eviction_batch(max_open: usize) -> usize {
    (max_open / 64).max(1)
}

/// The (at most `k`) handles to close to open another: of the principals
/// holding handles no request holds, the one that opened the most handles
/// first (so that one principal's many names push out its own handles, not
/// another's), and of its idle handles the ones used longest ago; none when
/// every handle is in use. One pass over the map and a partial sort.
fn least_recently_used<H>(map: &HashMap<String, Arc<Entry<H>>>, k: usize) -> Vec<String> {
    let mut held: HashMap<&str, usize> = HashMap::new();
    for e in map.values() {
        *held.entry(e.owner.as_str()).or_default() += 1;
    }
    let mut idle: Vec<_> = map
        .iter()
        .filter(|(_, e)| Arc::strong_count(e) == 1)
        .map(|(n, e)| {
            let key = (
                std::cmp::Reverse(held.get(e.owner.as_str()).copied().unwrap_or(0)),
                e.last_use.load(Relaxed),
            );
            (key, n)
        })
        .collect();
    if k < idle.len() {
        idle.select_nth_unstable_by_key(k, |(key, _)| *key);
        idle.truncate(k);
    }
    idle.into_iter().map(|(_, n)| n.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keysmith::pool::ValuePool;
    use keysmith::store::{PoolSpec, Store};

    async fn pools(names: &[&str]) -> Arc<dyn Store> {
        let store: Arc<dyn Store> = Arc::new(keysmith::store::memory::MemoryStore::new());
        for name in names {
            let spec = PoolSpec {
                name: (*name).into(),
                start: 1,
                size: 4,
                residue: None,
                start_below_dropped: false,
            };
            keysmith::pool::create(&*store, &spec).await.unwrap();
        }
        store
    }

    async fn open(
        handles: &Handles<ValuePool>,
        store: &Arc<dyn Store>,
        metrics: &Metrics,
        name: &str,
    ) -> keysmith::Result<Arc<Entry<ValuePool>>> {
        handles
            .get_or_open(name, metrics, || {
                ValuePool::builder().store(store.clone()).name(name).build()
            })
            .await
    }

    /// A handle a request holds is never closed to make room: the open
    /// fails with a 503 naming the limit, and succeeds once it is let go.
    #[tokio::test]
    async fn at_the_cap_with_every_handle_in_use_an_open_fails_until_one_is_free() {
        let store = pools(&["a", "b"]).await;
        let metrics = Metrics::new(10);
        let handles = Handles::new(
            ObjectKind::Pool,
            HandleLimits {
                max_open: 1,
                idle: Duration::from_secs(3600),
            },
        );
        let in_use = open(&handles, &store, &metrics, "a").await.unwrap();
        let e = open(&handles, &store, &metrics, "b").await.unwrap_err();
        assert!(matches!(e, keysmith::Error::Unavailable(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("1 pool handles open") && msg.contains("max_open_handles"),
            "{msg}"
        );
        assert_eq!(handles.len(), 1);
        assert!(Arc::ptr_eq(&handles.get("a").unwrap(), &in_use));
        drop(in_use);
        let b = open(&handles, &store, &metrics, "b").await.unwrap();
        handles.being_closed.all_done().await;
        assert_eq!(handles.len(), 1);
        assert!(handles.get("a").is_none());
        assert!(Arc::ptr_eq(&handles.get("b").unwrap(), &b));
    }

    /// An open at the cap closes a batch of the least recently used idle
    /// handles ([`eviction_batch`]), so the next opens find room without
    /// another scan; a handle in use is never among them.
    #[tokio::test]
    async fn an_open_at_the_cap_closes_the_least_recently_used_batch() {
        let names: Vec<String> = (0..129).map(|i| format!("p{i:03}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let store = pools(&refs).await;
        let metrics = Metrics::new(1000);
        let handles = Handles::new(
            ObjectKind::Pool,
            HandleLimits {
                max_open: 128,
                idle: Duration::from_secs(3600),
            },
        );
        assert_eq!(eviction_batch(128), 2);
        let held = open(&handles, &store, &metrics, "p000").await.unwrap();
        for n in &names[1..128] {
            drop(open(&handles, &store, &metrics, n).await.unwrap());
        }
        assert_eq!(handles.len(), 128);
        drop(open(&handles, &store, &metrics, "p128").await.unwrap());
        handles.being_closed.all_done().await;
        assert_eq!(handles.len(), 127, "two closed, one opened");
        assert!(handles.get("p001").is_none() && handles.get("p002").is_none());
        assert!(Arc::ptr_eq(&handles.get("p000").unwrap(), &held), "in use");
        assert!(handles.get("p003").is_some() && handles.get("p128").is_some());
    }

    /// Only handles no request holds are closed when idle.
    #[tokio::test]
    async fn an_idle_handle_in_use_is_kept() {
        let store = pools(&["a", "b"]).await;
        let metrics = Metrics::new(10);
        let handles = Handles::new(
            ObjectKind::Pool,
            HandleLimits {
                max_open: 10,
                idle: Duration::from_millis(1),
            },
        );
        let held = open(&handles, &store, &metrics, "a").await.unwrap();
        drop(open(&handles, &store, &metrics, "b").await.unwrap());
        // Idle for at least the idle time: the clock only moves forward.
        let since = Instant::now();
        while since.elapsed() < Duration::from_millis(2) {
            tokio::task::yield_now().await;
        }
        assert_eq!(handles.close_idle(&metrics).await, 1);
        assert!(handles.get("b").is_none());
        assert!(Arc::ptr_eq(&handles.get("a").unwrap(), &held));
    }

    /// A handle whose close waits for the test to let it finish.
    struct Gate {
        started: Arc<tokio::sync::Notify>,
        finish: Arc<tokio::sync::Notify>,
    }

    impl Handle for Gate {
        async fn close(&self) {
            self.started.notify_one();
            self.finish.notified().await;
        }
    }

    /// A handle taken out of the map is counted open until its close (a
    /// store write, for a sequence) is done, or the close is dropped: the
    /// count the metric `keysmith_open_handles` shows.
    #[tokio::test]
    async fn a_handle_being_closed_counts_as_open_until_its_close_is_done() {
        let started = Arc::new(tokio::sync::Notify::new());
        let finish = Arc::new(tokio::sync::Notify::new());
        let metrics = Arc::new(Metrics::new(10));
        let handles = Arc::new(Handles::new(
            ObjectKind::Pool,
            HandleLimits {
                max_open: 10,
                idle: Duration::from_millis(1),
            },
        ));
        // First the close finishes; then a close is dropped half-way.
        for finishes in [true, false] {
            let gate = Gate {
                started: started.clone(),
                finish: finish.clone(),
            };
            drop(
                handles
                    .get_or_open("g", &metrics, || async { Ok(gate) })
                    .await
                    .unwrap(),
            );
            assert_eq!(handles.len(), 1);
            let since = Instant::now();
            while since.elapsed() < Duration::from_millis(2) {
                tokio::task::yield_now().await;
            }
            let sweep = {
                let (handles, metrics) = (handles.clone(), metrics.clone());
                tokio::spawn(async move { handles.close_idle(&metrics).await })
            };
            started.notified().await;
            assert!(handles.get("g").is_none(), "out of the map");
            assert_eq!(handles.len(), 1, "still closing: still open");
            if finishes {
                finish.notify_one();
                assert_eq!(sweep.await.unwrap(), 1);
            } else {
                sweep.abort();
                assert!(sweep.await.unwrap_err().is_cancelled());
            }
            assert_eq!(handles.len(), 0, "closed, or its close dropped");
        }
    }

    /// An open at the cap waits for none of the closes it starts: they run
    /// on a task of their own, counted open until done, and shutdown
    /// (`close_all`) waits for them.
    #[tokio::test]
    async fn an_open_at_the_cap_does_not_wait_for_the_closes_it_starts() {
        let started = Arc::new(tokio::sync::Notify::new());
        let (finish_a, finish_b) = (
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(tokio::sync::Notify::new()),
        );
        // b's close goes through at once.
        finish_b.notify_one();
        let metrics = Metrics::new(10);
        let handles = Arc::new(Handles::new(
            ObjectKind::Pool,
            HandleLimits {
                max_open: 1,
                idle: Duration::from_secs(3600),
            },
        ));
        let gate = |finish: &Arc<tokio::sync::Notify>| Gate {
            started: started.clone(),
            finish: finish.clone(),
        };
        drop(
            handles
                .get_or_open("a", &metrics, || async { Ok(gate(&finish_a)) })
                .await
                .unwrap(),
        );
        // "a" is pushed out; its close waits for `finish_a`, yet "b" opens.
        let b = handles
            .get_or_open("b", &metrics, || async { Ok(gate(&finish_b)) })
            .await
            .unwrap();
        started.notified().await;
        assert!(handles.get("a").is_none());
        assert_eq!(handles.len(), 2, "b open, a still closing");
        drop(b);
        let shutdown = {
            let handles = handles.clone();
            tokio::spawn(async move { handles.close_all().await })
        };
        // One thread: the shutdown task runs as far as it can meanwhile.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!shutdown.is_finished(), "waits for a's close");
        assert_eq!(handles.len(), 1);
        finish_a.notify_one();
        shutdown.await.unwrap();
        assert_eq!(handles.len(), 0);
    }
}
