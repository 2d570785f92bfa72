//! One library handle per name, opened on first use and shared by every
//! request, so all clients of a server share one block cache per sequence.
//!
//! The map is behind a `std::sync::RwLock` that is never held across an
//! await: the hot path takes the read lock, clones an `Arc`, and lets go.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use prometheus::{Histogram, IntCounter};

use crate::metrics::Metrics;

/// How long the allocation rate is averaged over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(10);

/// A library handle the server keeps open per name.
pub(crate) trait Handle: Clone + Send + Sync + 'static {
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

impl Handle for keysmith::numbers::Numbers {
    /// A numbered sequence's handle holds no values: each call reserves its own.
    async fn close(&self) {}
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

/// The open handles of one kind ("sequence" or "pool"), by name.
#[derive(Debug)]
pub(crate) struct Handles<H> {
    kind: &'static str,
    map: RwLock<HashMap<String, Arc<Entry<H>>>>,
    closing: AtomicBool,
}

impl<H: Handle> Handles<H> {
    pub(crate) fn new(kind: &'static str) -> Self {
        Handles {
            kind,
            map: RwLock::new(HashMap::new()),
            closing: AtomicBool::new(false),
        }
    }

    /// The open handle of `name`, if any.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Entry<H>>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
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
        if let Some(e) = self.get(name) {
            return Ok(e);
        }
        let closed = || keysmith::Error::Closed {
            name: name.to_owned(),
        };
        if self.closing.load(Relaxed) {
            return Err(closed());
        }
        let handle = open().await?;
        let labels = [self.kind, name];
        let fresh = Arc::new(Entry {
            handle,
            served: AtomicU64::new(0),
            last: AtomicI64::new(-1),
            values: metrics.values.with_label_values(&labels),
            requests: metrics.requests.with_label_values(&labels),
            latency: metrics.latency.with_label_values(&labels),
            samples: Mutex::new(VecDeque::new()),
        });
        fresh.sample(Instant::now());
        let (entry, loser) = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            if self.closing.load(Relaxed) {
                (None, Some(fresh))
            } else if let Some(e) = map.get(name) {
                (Some(e.clone()), Some(fresh))
            } else {
                map.insert(name.to_owned(), fresh.clone());
                (Some(fresh), None)
            }
        };
        if let Some(l) = loser {
            l.handle.close().await;
        }
        entry.ok_or_else(closed)
    }

    /// Removes and closes the handle of `name`, if there is one.
    pub(crate) async fn remove(&self, name: &str, metrics: &Metrics) {
        let gone = self
            .map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name);
        if let Some(e) = gone {
            metrics.forget(self.kind, name);
            e.handle.close().await;
        }
    }

    /// Removes and closes `entry` if it is still the handle of `name` (after
    /// it failed in a way that shows the name is gone from the store).
    pub(crate) async fn evict(&self, name: &str, entry: &Arc<Entry<H>>, metrics: &Metrics) {
        let removed = {
            let mut map = self.map.write().unwrap_or_else(|p| p.into_inner());
            match map.get(name) {
                Some(e) if Arc::ptr_eq(e, entry) => map.remove(name).is_some(),
                _ => false,
            }
        };
        if removed {
            metrics.forget(self.kind, name);
            entry.handle.close().await;
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

    /// Takes a rate sample of every handle.
    pub(crate) fn sample_all(&self, now: Instant) {
        for (_, e) in self.snapshot() {
            e.sample(now);
        }
    }

    /// Closes every handle; no handle opens after this.
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
    }
}
