//! A real store (any `Store`) whose sequence reservations can be made to
//! fail or to wait, on demand: for checks that a call which fails or is
//! dropped at a block boundary loses nothing. Everything else goes straight
//! through.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use async_trait::async_trait;
use keysmith::store::{
    Alteration, AtomicReserve, CountsDelta, Put, Reservation, SequenceCounts, SequenceRow,
    SequenceSpec, SequenceStore, Store,
};
use keysmith::{Error, Result};

/// The wrapper; see the module comment.
#[derive(Debug)]
pub struct Faulty {
    pub inner: Arc<dyn Store>,
    /// Every reservation fails with `Unavailable` while set.
    pub fail: AtomicBool,
    /// Every `n`-th reservation fails (0: none).
    pub fail_every: AtomicU64,
    /// Reservations wait (pending, without a wake-up) while set.
    pub hold: AtomicBool,
    /// Reservations yield to the runtime once before they go through, so a
    /// task can be aborted there.
    pub yield_first: AtomicBool,
    /// While set, reservations wait at a door for a permit
    /// ([`Faulty::let_through`]); [`Faulty::wait_at_door`] awaits arrivals.
    pub doored: AtomicBool,
    door: tokio::sync::Semaphore,
    arrived: tokio::sync::watch::Sender<u64>,
    calls: AtomicU64,
}

impl Faulty {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner,
            fail: AtomicBool::new(false),
            fail_every: AtomicU64::new(0),
            hold: AtomicBool::new(false),
            yield_first: AtomicBool::new(false),
            doored: AtomicBool::new(false),
            door: tokio::sync::Semaphore::new(0),
            arrived: tokio::sync::watch::Sender::new(0),
            calls: AtomicU64::new(0),
        })
    }

    /// Lets `n` more reservations through the door.
    #[allow(dead_code)]
    pub fn let_through(&self, n: usize) {
        self.door.add_permits(n);
    }

    /// Waits until `k` reservations in all have come to the door.
    #[allow(dead_code)]
    pub async fn wait_at_door(&self, k: u64) {
        let mut rx = self.arrived.subscribe();
        rx.wait_for(|&n| n >= k).await.unwrap();
    }

    async fn gate(&self) -> Result<()> {
        if self.doored.load(SeqCst) {
            self.arrived.send_modify(|n| *n += 1);
            self.door.acquire().await.unwrap().forget();
        }
        if self.hold.load(SeqCst) {
            // Never woken: the caller polls once and drops the future.
            std::future::pending::<()>().await;
        }
        if self.yield_first.load(SeqCst) {
            tokio::task::yield_now().await;
        }
        let n = self.calls.fetch_add(1, SeqCst) + 1;
        let every = self.fail_every.load(SeqCst);
        if self.fail.load(SeqCst) || (every > 0 && n.is_multiple_of(every)) {
            return Err(Error::Unavailable("failing on demand".into()));
        }
        Ok(())
    }
}

#[async_trait]
impl SequenceStore for Faulty {
    async fn create_sequence(&self, spec: &SequenceSpec) -> Result<SequenceRow> {
        self.inner.create_sequence(spec).await
    }
    async fn read_sequence(&self, name: &str) -> Result<Option<SequenceRow>> {
        self.inner.read_sequence(name).await
    }
    async fn put_if_version(&self, name: &str, n: i64, v: u64) -> Result<Put> {
        self.inner.put_if_version(name, n, v).await
    }
    async fn alter_checked(&self, name: &str, change: &Alteration, v: u64) -> Result<Put> {
        self.inner.alter_checked(name, change, v).await
    }
    async fn raise_failover_skip(&self, name: &str, at_least: i64) -> Result<()> {
        self.inner.raise_failover_skip(name, at_least).await
    }
    async fn reserve_locked(&self, name: &str, n: i64) -> Result<Reservation> {
        self.gate().await?;
        self.inner.reserve_locked(name, n).await
    }
    async fn reserve_atomic(&self, name: &str, n: i64) -> Result<Reservation> {
        self.gate().await?;
        self.inner.reserve_atomic(name, n).await
    }
    /// The inner store's capability, so the wrapper says what it wraps;
    /// the handles still go through [`Self::reserve_atomic`] and the gate.
    fn atomic_reserve(&self) -> Option<&dyn AtomicReserve> {
        self.inner.atomic_reserve()
    }
    async fn record_counts(&self, name: &str, delta: &CountsDelta, now_ms: i64) -> Result<()> {
        self.inner.record_counts(name, delta, now_ms).await
    }
    async fn read_counts(&self, name: &str) -> Result<(SequenceRow, SequenceCounts)> {
        self.inner.read_counts(name).await
    }
    async fn list_sequences(&self) -> Result<Vec<SequenceRow>> {
        self.inner.list_sequences().await
    }
    async fn sequence_names_near(&self, name: &str, limit: usize) -> Result<Vec<String>> {
        self.inner.sequence_names_near(name, limit).await
    }
    async fn drop_sequence(&self, name: &str) -> Result<()> {
        self.inner.drop_sequence(name).await
    }
}

// The other concerns go straight through.
crate::pass_through!(Faulty: pools, numbers, workers, store);

/// Polls `f` once (with a waker that does nothing) and drops it if it is
/// not ready: a caller that gives up on a call, as a timeout would.
#[allow(dead_code)]
pub fn poll_once<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}
