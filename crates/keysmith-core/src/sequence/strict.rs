//! Strict mode's group commit: many callers of one strict handle, one store
//! reservation.
//!
//! A strict handle (block 1) has no cache: every value comes from a
//! reservation committed in the store before it is returned. Callers that
//! wait at the same time share one: each caller joins a queue (in the order
//! it arrives at the handle) and, if no batch is being reserved, starts a
//! drain task. The task takes every caller queued so far, reserves the sum of
//! their counts in one [`Allocator::reserve`](super::strategy::Allocator)
//! (so the [`HighWater`](super::HighWater) check applies to the batch), and
//! hands the range out in arrival order, each caller its own sub-range. Who
//! arrives while a batch is in flight waits for the next one; the task runs
//! until the queue is empty. At most one batch of a handle is in flight.
//! After a slow reservation the task may wait a moment for the callers it just
//! answered ([`Linger`]), so that callers in a closed loop share batches
//! instead of taking turns in two halves.
//!
//! Why the strict guarantees still hold:
//!
//! - *Time order across every handle*: a caller B that asks after a caller A
//!   got its value joins the queue after A's batch was committed, so B's
//!   batch is reserved later: by the same handle after A's batch completed,
//!   or by another handle in a store transaction that began after A's
//!   committed; the store is linearizable, so B's values are larger.
//!   Within a batch, a caller that arrived earlier gets smaller values.
//! - *Durable before returned*: nothing is sent before the reservation
//!   returned.
//! - *No gap but what callers lose*: a caller whose future is dropped
//!   before its batch is taken is removed from the queue and costs nothing.
//!   One dropped after its batch was taken has its sub-range handed back
//!   with a conditional put on the batch's version (the existing hand-back:
//!   only if its values are the batch's tail and nobody reserved since);
//!   otherwise those values are a gap, logged: the values the caller lost.
//!   Values of a batch that hit the maximum and were not handed to anyone
//!   go back the same way.
//! - A failed reservation fails every caller of that batch with its error
//!   and hands nothing out.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use tokio::sync::oneshot;

use super::Sequence;
use crate::store::{MAX_RESERVATION, Reservation};
use crate::{Error, Result};

/// The queue of callers of one strict handle.
#[derive(Debug, Default)]
pub(crate) struct StrictQueue {
    state: Mutex<State>,
    /// Woken when a caller joins while a drain task runs (see [`Linger`]).
    arrived: tokio::sync::Notify,
}

/// How long a drain task waits for the callers it just answered: tokio's
/// timer tick, the shortest wait its clock keeps.
const LINGER: Duration = Duration::from_millis(1);

/// A drain task waits only after a reservation that took at least this
/// long. Below it, the wait, which the timer rounds up to its tick, costs
/// the callers more than it saves: with reservations of 0.1 to 0.3 ms,
/// waiting lowered strict values/s at 16 connections on SQLite by about
/// 15 % and raised the fixed-rate p99; with reservations of about 3 ms
/// (PostgreSQL and etcd behind a link of 1 ms each way) 16 callers share
/// every commit, 13.6 and 13.8 times the bare loop's values/s (BENCHMARKS.md,
/// issue 26, "Linger only after a slow reservation" and "`Linger` counted
/// the queue after answering").
const LINGER_AFTER: Duration = Duration::from_millis(2);

/// Waiting a moment before the next batch for the callers just answered.
/// Callers in a closed loop (a client that asks again as soon as it is
/// answered) otherwise fall into two cohorts that take turns, each batch
/// half of them: those answered by batch k ask again while batch k+1, sent
/// at once with whoever was queued, is being written. When batch k had two
/// callers or more and its reservation took at least [`LINGER_AFTER`], the
/// task waits until as many have joined as it answered and found queued
/// when the reservation came back (counted before anyone is answered: one
/// answered and back already would count twice), or [`LINGER`] has passed;
/// a caller that joins after that ends the wait even before tokio's timer,
/// which rounds up to its millisecond. It waits with nobody queued too:
/// else the task ends, the first caller back starts a batch alone, and the
/// others, back while it is written, form a second cohort again. A wait
/// that runs out means the callers did not come back (an open loop, or a
/// busy machine): the next 2, 4, ... 1024 batches after consecutive misses
/// go at once, so waits that do not pay stop soon. Order is unchanged: a
/// batch is still taken in arrival order, and only after every batch
/// before it completed.
#[derive(Debug, Default)]
struct Linger {
    /// How many callers to wait for, and until when.
    plan: Option<(usize, Instant)>,
    /// Waits in a row that ran out.
    misses: u32,
    /// Batches still to go at once after the last miss.
    skip: u32,
    /// The last wait ran out.
    missed: bool,
}

/// After this many misses in a row, batches go at once for `2^MAX_BACKOFF`.
const MAX_BACKOFF: u32 = 10;

impl Linger {
    /// After a batch of `answered` callers whose reservation took `took`,
    /// with `queued` others in the queue when it came back, before any of
    /// the answered could ask again (counted later, a caller answered and
    /// back already would count twice, and the wait for it could never be
    /// met).
    fn served(&mut self, answered: usize, took: Duration, queued: usize) {
        self.plan = None;
        if std::mem::take(&mut self.missed) {
            self.misses += 1;
            self.skip = 1 << self.misses.min(MAX_BACKOFF);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        if answered < 2 || took < LINGER_AFTER {
            return;
        }
        self.plan = Some((queued + answered, Instant::now() + LINGER));
    }

    /// Waits as [`Self::served`] planned.
    async fn wait(&mut self, q: &StrictQueue) {
        let Some((want, until)) = self.plan.take() else {
            return;
        };
        loop {
            let arrived = {
                let s = q.lock();
                // tokio's timer rounds up to its millisecond: past `until`
                // the wait ends at the next arrival, and counts as a miss.
                let late = Instant::now() >= until;
                if s.waiting.len() >= want || late {
                    if late {
                        self.missed = true;
                    } else {
                        self.misses = 0;
                    }
                    return;
                }
                // Made under the lock: an arrival, which takes the lock
                // too, cannot come between the count and the wait.
                q.arrived.notified()
            };
            if tokio::time::timeout_at(until, arrived).await.is_err() {
                self.missed = true;
                return;
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Callers not yet in a batch, in arrival order.
    waiting: VecDeque<Waiter>,
    /// A drain task is running (it will take everyone in `waiting`).
    draining: bool,
    next_id: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    n: i64,
    tx: oneshot::Sender<Result<Grant>>,
}

/// A caller's sub-range of a batch.
#[derive(Debug, Clone)]
struct Grant {
    values: Range<i64>,
    /// The row version the batch's reservation left behind.
    version: u64,
    /// The end of the batch's range.
    batch_end: i64,
}

impl StrictQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A caller waiting for its grant; on drop (the caller's future was dropped)
/// it leaves the queue, or gives its grant back.
struct Wait<'a> {
    seq: &'a Sequence,
    id: u64,
    rx: oneshot::Receiver<Result<Grant>>,
    done: bool,
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        {
            let mut s = self.seq.inner.strict.lock();
            if let Some(i) = s.waiting.iter().position(|w| w.id == self.id) {
                // Not in a batch yet: nothing was reserved for it.
                s.waiting.remove(i);
                return;
            }
        }
        // In a batch: after `close` the drain task's send fails and it gives
        // the values back itself; if it sent already, they are here.
        self.rx.close();
        if let Ok(Ok(g)) = self.rx.try_recv() {
            let seq = self.seq.clone();
            self.seq.inner.runtime.spawn(async move {
                seq.give_back_grant(&g).await;
            });
        }
    }
}

/// The drain task's state; if the task is dropped before the queue is empty
/// (its runtime shut down), the callers still queued fail instead of waiting
/// for a task that will not come, and the next caller starts a new one.
/// Made before the task is spawned: a task dropped without ever running
/// clears the queue too.
struct Draining {
    seq: Sequence,
    done: bool,
}

impl Drop for Draining {
    fn drop(&mut self) {
        if !self.done {
            let mut s = self.seq.inner.strict.lock();
            s.draining = false;
            // Dropping their senders fails them (see `take_strict`).
            s.waiting.clear();
        }
    }
}

/// Reserves and hands out batches until no caller waits.
async fn drain(mut guard: Draining) {
    let seq = guard.seq.clone();
    let mut linger = Linger::default();
    loop {
        linger.wait(&seq.inner.strict).await;
        let batch = {
            let mut s = seq.inner.strict.lock();
            let mut batch = Vec::new();
            let mut total = 0i64;
            while let Some(w) = s.waiting.front() {
                if !batch.is_empty() && total + w.n > MAX_RESERVATION {
                    break;
                }
                total += w.n;
                batch.extend(s.waiting.pop_front());
            }
            if batch.is_empty() {
                s.draining = false;
                guard.done = true;
                return;
            }
            batch
        };
        let (answered, began) = (batch.len(), Instant::now());
        let queued = seq.serve(batch).await;
        linger.served(answered, began.elapsed(), queued);
    }
}

impl Sequence {
    /// `n` values of a strict handle, through the queue (see the module docs).
    pub(super) async fn take_strict(&self, n: i64) -> Result<Range<i64>> {
        let (tx, rx) = oneshot::channel();
        let (id, start) = {
            let mut s = self.inner.strict.lock();
            let id = s.next_id;
            s.next_id += 1;
            s.waiting.push_back(Waiter { id, n, tx });
            let start = !s.draining;
            if !start {
                self.inner.strict.arrived.notify_waiters();
            }
            s.draining = true;
            (id, start)
        };
        if start {
            let guard = Draining {
                seq: self.clone(),
                done: false,
            };
            self.inner.runtime.spawn(drain(guard));
        }
        let mut wait = Wait {
            seq: self,
            id,
            rx,
            done: false,
        };
        let got = (&mut wait.rx).await;
        wait.done = true;
        match got {
            Ok(r) => r.map(|g| g.values),
            // The drain task was dropped (its runtime shut down).
            Err(_) => Err(Error::Unavailable(format!(
                "sequence {:?}: the runtime stopped before the value was reserved",
                self.name()
            ))),
        }
    }

    /// One batch: one reservation, handed out in arrival order. Returns how
    /// many callers were queued when the reservation came back, before any
    /// of the batch was answered.
    async fn serve(&self, batch: Vec<Waiter>) -> usize {
        let total: i64 = batch.iter().map(|w| w.n).sum();
        let reserved = self.inner.alloc.reserve(total).await;
        let queued = self.inner.strict.lock().waiting.len();
        let r = match reserved {
            Ok(r) => r,
            Err(e) => {
                for w in batch {
                    let _ = w.tx.send(Err(e.clone()));
                }
                return queued;
            }
        };
        let mut at = r.start;
        // The start of the run of values handed to no one that ends at `at`.
        let mut unused_from: Option<i64> = None;
        let mut refused = Vec::new();
        for w in batch {
            if r.end - at >= w.n {
                let g = Grant {
                    values: at..at + w.n,
                    version: r.version,
                    batch_end: r.end,
                };
                if w.tx.send(Ok(g)).is_err() {
                    // Dropped after the batch was taken.
                    unused_from.get_or_insert(at);
                } else {
                    unused_from = None;
                }
                at += w.n;
            } else {
                // Fewer came back than asked: the batch reached the maximum
                // (its last value is the maximum). A smaller later count may
                // still fit.
                refused.push(w.tx);
            }
        }
        let from = unused_from.unwrap_or(at);
        if from < r.end {
            self.hand_back(&[Reservation { start: from, ..r }]).await;
        }
        // Told after the hand-back: a caller that fails near the maximum
        // finds what was reserved for it back in the store.
        for tx in refused {
            let _ = tx.send(Err(Error::Exhausted {
                name: self.name().to_owned(),
                max: r.end - 1,
            }));
        }
        queued
    }

    /// A grant whose caller was dropped after it was sent: back to the store
    /// if it is its batch's tail and nobody reserved since, else a gap.
    async fn give_back_grant(&self, g: &Grant) {
        if g.values.end == g.batch_end {
            self.hand_back(&[Reservation {
                start: g.values.start,
                end: g.batch_end,
                version: g.version,
                fenced: 0,
                incarnation: 0,
            }])
            .await;
        } else {
            tracing::info!(
                sequence = %self.name(),
                "values {}..{} stay a gap: the caller was dropped and later values of its batch were handed out",
                g.values.start,
                g.values.end
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue_with(waiting: usize) -> StrictQueue {
        let q = StrictQueue::default();
        for _ in 0..waiting {
            join(&q);
        }
        q
    }

    /// A caller joins as `take_strict` has it join while a task drains.
    fn join(q: &StrictQueue) {
        let mut s = q.lock();
        let id = s.next_id;
        s.next_id += 1;
        let (tx, _rx) = oneshot::channel();
        s.waiting.push_back(Waiter { id, n: 1, tx });
        q.arrived.notify_waiters();
    }

    fn poll_once<F: std::future::Future + Unpin>(fut: &mut F) -> std::task::Poll<F::Output> {
        let waker = std::task::Waker::noop();
        std::pin::Pin::new(fut).poll(&mut std::task::Context::from_waker(waker))
    }

    #[tokio::test(start_paused = true)]
    async fn a_linger_waits_for_as_many_as_were_answered_and_queued() {
        let q = queue_with(1);
        let mut linger = Linger::default();
        linger.served(2, Duration::from_millis(10), q.lock().waiting.len());
        let mut wait = Box::pin(linger.wait(&q));
        assert!(poll_once(&mut wait).is_pending(), "1 of 3 queued");
        join(&q);
        assert!(poll_once(&mut wait).is_pending(), "2 of 3 queued");
        join(&q);
        wait.await;
        assert!(!linger.missed, "ended by arrivals, not by the clock");
    }

    /// Serves batches of two until one is planned to wait: how many went
    /// at once before it.
    fn at_once_until_planned(linger: &mut Linger, q: &StrictQueue) -> u32 {
        let mut at_once = 0;
        loop {
            linger.served(2, Duration::from_secs(60), q.lock().waiting.len());
            if linger.plan.is_some() {
                return at_once;
            }
            at_once += 1;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn waits_that_run_out_back_off_and_one_that_pays_resets() {
        let q = queue_with(1);
        let mut linger = Linger::default();
        linger.served(2, Duration::from_secs(60), q.lock().waiting.len());
        let (_, until) = linger.plan.expect("planned");
        assert!(until <= Instant::now() + LINGER, "never longer than LINGER");
        let mut after_misses = Vec::new();
        for _ in 0..11 {
            linger.wait(&q).await;
            assert!(linger.missed, "nobody came back: the clock ended it");
            after_misses.push(at_once_until_planned(&mut linger, &q));
        }
        assert_eq!(
            after_misses,
            [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 1024]
        );
        // A wait that pays: the next batch may wait again at once.
        let mut wait = Box::pin(linger.wait(&q));
        assert!(poll_once(&mut wait).is_pending());
        join(&q);
        join(&q);
        wait.await;
        assert!(!linger.missed);
        assert_eq!(at_once_until_planned(&mut linger, &q), 0);
        // And the next miss starts the back-off from the beginning.
        linger.wait(&q).await;
        assert_eq!(at_once_until_planned(&mut linger, &q), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn no_linger_after_a_single_caller_or_a_fast_reservation() {
        let mut linger = Linger::default();
        linger.served(8, LINGER_AFTER - Duration::from_micros(1), 5);
        assert_eq!(linger.plan, None, "a fast reservation: the tick costs more");
        linger.served(8, LINGER_AFTER, 5);
        assert!(linger.plan.is_some(), "a slow one: the wait pays");
        let mut linger = Linger::default();
        linger.served(1, Duration::from_millis(10), 5);
        assert_eq!(linger.plan, None, "one caller: no cohorts to merge");
    }

    /// With nobody queued after a slow batch, the task waits for the
    /// callers it answered: the first back does not go alone.
    #[tokio::test(start_paused = true)]
    async fn with_nobody_queued_a_linger_waits_for_those_answered() {
        let q = queue_with(0);
        let mut linger = Linger::default();
        linger.served(3, Duration::from_millis(10), 0);
        assert_eq!(linger.plan.map(|(want, _)| want), Some(3));
        let mut wait = Box::pin(linger.wait(&q));
        join(&q);
        assert!(poll_once(&mut wait).is_pending(), "1 of 3 back");
        join(&q);
        join(&q);
        wait.await;
        assert!(!linger.missed, "ended by arrivals, not by the clock");
    }
}
