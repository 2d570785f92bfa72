//! The lock-free block cache: the hot path of [`super::Sequence::next`].
//!
//! Two atomics describe the current block: `cursor`, the next value to hand
//! out, and `end`, one past the block's last value. They sit on cache lines
//! of their own: `cursor` is written by every take, `end` (with the prefetch
//! mark and the restore count) only when a block is installed, so a reader's
//! copy of that line stays valid while takers on other cores move `cursor`.
//!
//! # `next()`: one `fetch_add`
//!
//! [`BlockCache::next`] reads `end` and then takes `v = cursor.fetch_add(1)`.
//! Every value the cursor passes is given to exactly one caller, because
//! `fetch_add` cannot hand the same `v` out twice, and the cursor never moves
//! back (the two exceptions below are explained there). Three cases:
//!
//! - `v < end`: `v` is in the current block. Why: the `end` read was
//!   published (Release) after its block's `install` moved the cursor to at
//!   least the block's start, so this `fetch_add` comes later in the
//!   cursor's order and `v >= start`; blocks only grow, so `v` is in that
//!   block or an earlier one... and earlier ones end at or before `start`.
//! - `v >= end`: the block was used up when we took `v` (an overshoot). `v`
//!   is not handed out yet: it is a [`Claim`]. The caller takes the refill
//!   mutex and asks [`BlockCache::judge`]: if a block installed since holds
//!   `v` (the next block usually starts exactly at the old end, and
//!   `install` never moves the cursor back, so `v` is nobody else's), `v`
//!   is the caller's value; if `v` lies in the gap between two blocks, it is
//!   no value at all and the caller takes another; if no block holds it yet,
//!   the caller installs the next one and asks again. So an overshoot loses
//!   nothing, and no value is handed out that is not in a block reserved in
//!   the store.
//! - `end == 0` (the gate): the cache is empty, sealed, or a refill is under
//!   way; the caller goes to the slow path without taking anything.
//!
//! Values of one handle increase: a call that starts after another returned
//! does its `fetch_add` later, on a cursor that only grew.
//!
//! Bulk takes ([`BlockCache::take`], [`BlockCache::take_exact`]) keep a
//! compare-and-swap from `v` to `v + k`, allowed while `v + k <= end`: they
//! share the cursor with `next` and take only values below `end`.
//!
//! # The cursor moving back
//!
//! [`BlockCache::restore`] (a failed `next_n` putting back the rest of a
//! block it took) and [`BlockCache::roll_back`] (a refill that failed: the
//! overshoot goes back to the block end, so failed calls use up no values)
//! move the cursor back over values never handed out, under the refill mutex,
//! and then add one to `restores`. A claim remembers the count it read
//! before its `fetch_add`; a claim at or above where the cursor went since is
//! void (its value will be taken again), which `judge` sees from the changed
//! count and the record of the last 64 moves.
//!
//! # What can be left unused
//!
//! A void claim whose value was in fact fresh: a `next()` that read the
//! count, then lost the CPU for exactly the nanoseconds of a failed `next_n`
//! or a failed refill, then took a value. A claim settled so late that its
//! block was retired more than [`PAST_FOR`] before (and more than
//! [`PAST_MIN`] non-adjacent blocks since), or more than [`PAST_MAX`]
//! non-adjacent blocks or 64 moves back meanwhile. And a `next()` future dropped while it settles its claim, as a
//! value returned and then dropped would be. Each leaves one value unused (a
//! gap, never a value handed out twice).
//!
//! [`BlockCache::install`] moves the cursor up with `fetch_max` (never back)
//! and then publishes the new `end` (Release).

use std::collections::VecDeque;
use std::ops::{Deref, Range};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

/// Earlier blocks (adjacent ones merged) a late claim is checked against:
/// those installed in the last [`PAST_FOR`], at least the last [`PAST_MIN`],
/// at most the last [`PAST_MAX`].
const PAST_FOR: Duration = Duration::from_secs(10);
const PAST_MIN: usize = 64;
const PAST_MAX: usize = 1 << 16;

/// The cursor of a sealed cache: above every value, with room for overshoots.
const SEALED: u64 = 1 << 63;

/// `end` when no take may start: empty, sealed, or refilling.
const GATE: u64 = 0;

/// Its own cache line (128 bytes: two lines on x86, whose prefetcher pairs them).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Written only when a block is installed or the cursor moves back.
#[derive(Debug)]
struct ReadMostly {
    /// One past the last value of the current block, or [`GATE`].
    end: AtomicU64,
    /// Taking this value starts the prefetch of the next block.
    prefetch_at: AtomicI64,
    /// How often the cursor moved back; see the module comment.
    restores: AtomicU64,
}

/// The blocks, for judging claims. Under its own mutex, taken only off the
/// fast path (the caller also holds the sequence's refill mutex).
#[derive(Debug, Default)]
struct Blocks {
    /// The current block (empty before the first).
    current: Range<i64>,
    /// Earlier blocks, adjacent ones merged, oldest first, each with when it
    /// was retired; see [`PAST_FOR`].
    past: VecDeque<(Range<i64>, Instant)>,
    /// The latest moves back of the cursor: the restore count after each,
    /// and where the cursor went (values from there on are taken again).
    moves: VecDeque<(u64, i64)>,
}

/// The block currently handed out.
#[derive(Debug)]
pub(crate) struct BlockCache {
    cursor: Padded<AtomicU64>,
    shared: Padded<ReadMostly>,
    blocks: Mutex<Blocks>,
}

/// What [`BlockCache::next`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// A value, and whether it is the prefetch mark.
    Value(i64, bool),
    /// A value taken past the block end: see [`BlockCache::judge`].
    Claim(Claim),
    /// Nothing taken: the cache is empty, sealed or being refilled.
    Empty,
}

/// A value taken past the end of the block the taker saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claim {
    value: u64,
    restores: u64,
}

/// What a claim turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    /// A value of an installed block, the claimer's; and whether it is the prefetch mark.
    Value(i64, bool),
    /// No value (a gap between blocks, or void after the cursor moved back): take another.
    Void,
    /// Beyond every installed block: the current one is used up; install the next and ask again.
    Ahead,
}

impl BlockCache {
    /// An empty cache: the first take fails and triggers a refill.
    pub(crate) fn new() -> Self {
        BlockCache {
            cursor: Padded(AtomicU64::new(0)),
            shared: Padded(ReadMostly {
                end: AtomicU64::new(GATE),
                prefetch_at: AtomicI64::new(i64::MAX),
                restores: AtomicU64::new(0),
            }),
            blocks: Mutex::new(Blocks::default()),
        }
    }

    /// Takes one value: the hot path (see the module comment).
    #[inline]
    pub(crate) fn next(&self) -> Next {
        let restores = self.shared.restores.load(Acquire);
        let end = self.shared.end.load(Acquire);
        if end == GATE {
            return Next::Empty;
        }
        // Relaxed: the Acquire load of `end` already orders this after the
        // install that published it (write-write coherence on `cursor`).
        let v = self.cursor.fetch_add(1, Relaxed);
        if v < end {
            // v < end <= i64::MAX: fits.
            let v = v as i64;
            return Next::Value(v, v == self.shared.prefetch_at.load(Relaxed));
        }
        Next::Claim(Claim { value: v, restores })
    }

    /// Settles a claim. Caller holds the refill mutex (so no block is
    /// installed and the cursor does not move back meanwhile).
    pub(crate) fn judge(&self, claim: Claim) -> Judged {
        let Ok(v) = i64::try_from(claim.value) else {
            return Judged::Ahead; // past every value: sealed, or the sequence's end
        };
        let b = self.blocks();
        let restores = self.shared.restores.load(Acquire);
        if restores != claim.restores {
            // The cursor moved back since the claimer read the count: values
            // from where it went are taken again, so such a claim is void.
            // Below it, the claim still stands (a taker that saw an older
            // block end took a value of the current block).
            let known = b.moves.front().is_some_and(|m| m.0 <= claim.restores + 1);
            let undone = b
                .moves
                .iter()
                .any(|&(after, to)| after > claim.restores && v >= to);
            if !known || undone {
                return Judged::Void;
            }
        }
        if b.current.contains(&v) {
            return Judged::Value(v, v == self.shared.prefetch_at.load(Relaxed));
        }
        if v >= b.current.end {
            return Judged::Ahead;
        }
        match b.past.iter().rev().find(|(r, _)| r.start <= v) {
            Some((r, _)) if v < r.end => Judged::Value(v, false),
            _ => Judged::Void,
        }
    }

    /// Takes up to `n` values (`n >= 1`) from the current block. Returns the
    /// values taken and whether they include the prefetch mark, or `None`
    /// when the block is used up (or the cache sealed or gated).
    pub(crate) fn take(&self, n: i64) -> Option<(Range<i64>, bool)> {
        self.take_with(|v, end| if end - v > n { v + n } else { end })
    }

    /// Takes exactly `n` values (`n >= 1`) from the current block, or
    /// nothing when it has fewer. Returns them and whether they include the
    /// prefetch mark.
    #[inline]
    pub(crate) fn take_exact(&self, n: i64) -> Option<(Range<i64>, bool)> {
        self.take_with(|v, end| if end - v >= n { v + n } else { v })
    }

    /// The compare-and-swap loop of the bulk takes: `to(v, end)` is where the
    /// cursor goes from `v < end` (`to == v`: take nothing).
    #[inline]
    fn take_with(&self, to: impl Fn(i64, i64) -> i64) -> Option<(Range<i64>, bool)> {
        let mut v = self.cursor.load(Acquire);
        loop {
            let end = self.shared.end.load(Acquire);
            if v >= end {
                return None;
            }
            // v < end <= i64::MAX: both fit, and end - v > 0 cannot overflow.
            let (vi, endi) = (v as i64, end as i64);
            let t = to(vi, endi);
            if t == vi {
                return None;
            }
            // If this succeeds, the cursor was `v < end` at that instant, with
            // `end` read after it: `install` moves the cursor to the block's
            // start before it publishes `end`, so `v` is in that block.
            match self
                .cursor
                .compare_exchange_weak(v, t as u64, AcqRel, Acquire)
            {
                Ok(_) => {
                    let mark = self.shared.prefetch_at.load(Relaxed);
                    return Some((vi..t, vi <= mark && mark < t));
                }
                Err(now) => v = now,
            }
        }
    }

    /// Takes every value left in the current block (possibly none), and
    /// whether they include the prefetch mark. Caller holds the refill
    /// mutex, so no block is installed until it lets go.
    pub(crate) fn take_rest(&self) -> (Range<i64>, bool) {
        self.take(i64::MAX).unwrap_or((0..0, false))
    }

    /// Puts back `rest`, what [`Self::take_rest`] took, none of it handed
    /// out. Caller holds the refill mutex and has held it since `take_rest`,
    /// so the block is still used up at `rest.end` and no other value of it
    /// was handed out since (values past `rest.end` were claims, made void
    /// here): the cursor may go back without breaking "a handle's values
    /// increase".
    pub(crate) fn restore(&self, rest: Range<i64>) {
        if rest.is_empty() {
            return;
        }
        self.move_back(rest.start);
    }

    /// After a refill failed on a used-up block: moves the cursor back to the
    /// block end, so the claims of failed calls use up no values. Caller
    /// holds the refill mutex; the cache is gated.
    pub(crate) fn roll_back(&self) {
        let end = self.blocks().current.end;
        if self.cursor.load(Acquire) > end as u64 {
            self.move_back(end);
        }
    }

    /// The cursor goes back to `to` (values never handed out), then the
    /// restore count goes up: a claim that read the old count is void.
    fn move_back(&self, to: i64) {
        self.cursor.store(to as u64, Release);
        let after = self.shared.restores.fetch_add(1, Release) + 1;
        let mut b = self.blocks();
        b.moves.push_back((after, to));
        if b.moves.len() > 64 {
            b.moves.pop_front();
        }
    }

    /// Stops takes from starting until the next install. Caller holds the
    /// refill mutex and the current block is used up.
    pub(crate) fn gate(&self) {
        self.shared.end.store(GATE, Release);
    }

    /// Whether the current block has values left.
    pub(crate) fn has_values(&self) -> bool {
        self.cursor.load(Acquire) < self.shared.end.load(Acquire)
    }

    /// Makes `block` the current block. Caller holds the refill mutex and the
    /// current block is used up; `block.start` is above every value handed out.
    pub(crate) fn install(&self, block: Range<i64>, prefetch_at: i64) {
        debug_assert!(!self.has_values());
        let mut b = self.blocks();
        debug_assert!(block.start >= b.current.end);
        let old = std::mem::replace(&mut b.current, block.clone());
        if !old.is_empty() {
            let now = Instant::now();
            match b.past.back_mut() {
                Some((last, at)) if last.end == old.start => {
                    last.end = old.end;
                    *at = now;
                }
                _ => b.past.push_back((old, now)),
            }
            while b.past.len() > PAST_MIN
                && (b.past.len() > PAST_MAX
                    || b.past.front().is_some_and(|(_, at)| now - *at > PAST_FOR))
            {
                b.past.pop_front();
            }
        }
        drop(b);
        self.shared.prefetch_at.store(prefetch_at, Relaxed);
        // Never back: values above `block.start` may be claims (settled under
        // the refill mutex as this block's values).
        self.cursor.fetch_max(block.start as u64, Release);
        self.shared.end.store(block.end as u64, Release);
    }

    /// Stops all further takes and returns the values of the current block
    /// that were never handed out (possibly empty). Caller holds the refill mutex.
    pub(crate) fn seal(&self) -> Range<i64> {
        self.gate();
        let at = self.cursor.swap(SEALED, AcqRel);
        let end = self.blocks().current.end;
        (at.min(end as u64) as i64)..end
    }

    fn blocks(&self) -> std::sync::MutexGuard<'_, Blocks> {
        // Nothing panics while holding it; recover the data if something did.
        self.blocks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Barrier};

    fn one(c: &BlockCache) -> Option<i64> {
        match c.next() {
            Next::Value(v, _) => Some(v),
            _ => None,
        }
    }

    #[test]
    fn takes_within_the_block_then_stops() {
        let c = BlockCache::new();
        assert_eq!(c.next(), Next::Empty);
        assert!(c.take(1).is_none());
        c.install(10..15, 13);
        assert_eq!(c.take(1), Some((10..11, false)));
        assert_eq!(c.take(2), Some((11..13, false)));
        assert_eq!(c.take(5), Some((13..15, true)));
        assert!(c.take(1).is_none());
        c.install(15..17, 16);
        assert_eq!(c.next(), Next::Value(15, false));
        assert_eq!(c.seal(), 16..17);
        assert!(c.take(1).is_none());
        assert_eq!(c.next(), Next::Empty);
    }

    #[test]
    fn next_marks_the_prefetch_value_and_claims_past_the_end() {
        let c = BlockCache::new();
        c.install(0..3, 1);
        assert_eq!(c.next(), Next::Value(0, false));
        assert_eq!(c.next(), Next::Value(1, true));
        assert_eq!(c.next(), Next::Value(2, false));
        let Next::Claim(claim) = c.next() else {
            panic!("expected a claim")
        };
        assert_eq!(c.judge(claim), Judged::Ahead);
        // The next block starts at the old end: the claim is its first value.
        c.gate();
        c.install(3..6, 5);
        assert_eq!(c.judge(claim), Judged::Value(3, false));
        assert_eq!(one(&c), Some(4));
        assert_eq!(c.take_exact(2), None, "only one left");
        assert_eq!(c.take_exact(1), Some((5..6, true)));
    }

    #[test]
    fn a_claim_in_a_gap_is_void_and_a_late_one_finds_its_block() {
        let c = BlockCache::new();
        c.install(0..2, 9);
        one(&c);
        one(&c);
        let Next::Claim(in_gap) = c.next() else {
            panic!()
        };
        let Next::Claim(late) = c.next() else {
            panic!()
        };
        // Another handle reserved 2..3: this one's next block is 3..5.
        c.install(3..5, 9);
        assert_eq!(c.judge(in_gap), Judged::Void, "2 is not this handle's");
        assert_eq!(one(&c), Some(4), "3 was claimed, by `late`");
        c.install(5..8, 9);
        assert_eq!(
            c.judge(late),
            Judged::Value(3, false),
            "found in an earlier block"
        );
    }

    #[test]
    fn claims_before_a_move_back_are_void() {
        let c = BlockCache::new();
        c.install(0..2, 9);
        one(&c);
        one(&c);
        let Next::Claim(claim) = c.next() else {
            panic!()
        };
        c.gate();
        c.roll_back();
        assert_eq!(c.judge(claim), Judged::Void);
        c.install(2..4, 9);
        assert_eq!(one(&c), Some(2), "the rolled-back value is handed out");

        let (rest, _) = c.take_rest();
        assert_eq!(rest, 3..4);
        let Next::Claim(claim) = c.next() else {
            panic!()
        };
        c.restore(rest);
        assert_eq!(c.judge(claim), Judged::Void);
        assert_eq!(one(&c), Some(3));
    }

    #[test]
    fn seal_of_a_used_up_block_is_empty() {
        let c = BlockCache::new();
        c.install(0..2, 1);
        c.take(2).unwrap();
        assert!(c.seal().is_empty());
        let c = BlockCache::new();
        c.install(0..2, 1);
        c.take(2).unwrap();
        let _ = c.next(); // an overshoot
        assert!(c.seal().is_empty());
    }

    /// Threads race over many small blocks installed under a mutex, the way
    /// the refill path does it (claims settled under the mutex): every value
    /// is taken exactly once, none is lost, and each thread's values increase.
    #[test]
    fn racing_threads_never_share_or_lose_a_value() {
        for (threads, gap) in [(2usize, 3i64), (4, 3), (4, 0), (3, 1)] {
            let lost = race(threads, gap, false);
            assert_eq!(lost, 0, "a value was lost ({threads} threads, gap {gap})");
        }
    }

    /// As above, with every fifth refill failing (the cursor moves back): no
    /// value twice, each thread's values increase, and a value is left unused
    /// only by a taker caught between its reads and its `fetch_add` by a
    /// failed refill: at most one per other thread and failure.
    #[test]
    fn racing_threads_with_failed_refills_never_share_a_value() {
        for (threads, gap) in [(2usize, 0i64), (4, 0), (3, 2)] {
            let lost = race(threads, gap, true);
            let failures = (BLOCKS * 5 / 4) as usize;
            assert!(lost <= (threads - 1) * failures, "{lost} values lost");
        }
    }

    const BLOCKS: i64 = 2_000;

    /// Returns how many values were left unused.
    fn race(threads: usize, gap: i64, failures: bool) -> usize {
        const LEN: i64 = 7;
        let cache = Arc::new(BlockCache::new());
        // The next block to install, and the installs so far.
        let refill = Arc::new(std::sync::Mutex::new((0i64, 0u64)));
        let barrier = Arc::new(Barrier::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (cache, refill, barrier) = (cache.clone(), refill.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut got = Vec::new();
                    let mut i = 0u64;
                    loop {
                        i += 1;
                        let claim = match (t + i as usize) % 4 {
                            0 => match cache.take(1 + (i % 3) as i64) {
                                Some((r, _)) => {
                                    got.extend(r);
                                    continue;
                                }
                                None => None,
                            },
                            _ => match cache.next() {
                                Next::Value(v, _) => {
                                    got.push(v);
                                    continue;
                                }
                                Next::Claim(c) => Some(c),
                                Next::Empty => None,
                            },
                        };
                        let mut st = refill.lock().unwrap();
                        loop {
                            let ahead = match claim {
                                Some(c) => match cache.judge(c) {
                                    Judged::Value(v, _) => {
                                        got.push(v);
                                        break;
                                    }
                                    Judged::Void => false,
                                    Judged::Ahead => true,
                                },
                                None => !cache.has_values(),
                            };
                            if !ahead {
                                break;
                            }
                            cache.gate();
                            if st.0 == BLOCKS {
                                cache.roll_back();
                                return got;
                            }
                            st.1 += 1;
                            if failures && st.1 % 5 == 0 {
                                // A failed refill: the overshoot goes back,
                                // the gate stays shut, this call fails.
                                cache.roll_back();
                                break;
                            }
                            let start = st.0 * (LEN + gap);
                            cache.install(start..start + LEN, start + LEN / 2);
                            st.0 += 1;
                            if claim.is_none() {
                                break;
                            }
                        }
                    }
                })
            })
            .collect();
        let mut all = HashSet::new();
        let mut count = 0;
        for h in handles {
            let got = h.join().unwrap();
            assert!(got.windows(2).all(|w| w[0] < w[1]), "per-thread order");
            count += got.len();
            all.extend(got);
        }
        assert_eq!(count, all.len(), "a value was taken twice");
        assert!(all.iter().all(|v| v % (LEN + gap) < LEN), "a gap value");
        (BLOCKS * LEN) as usize - count
    }
}
