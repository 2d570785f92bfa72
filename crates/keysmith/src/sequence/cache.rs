//! The lock-free block cache: the hot path of [`super::Sequence::next`].
//!
//! Two atomics describe the current block: `cursor`, the next value to hand
//! out, and `end`, one past its last value. Taking values is one
//! compare-and-swap of `cursor` from `v` to `v + k`, allowed while `v < end`.
//!
//! Why this is safe without a lock: a handle's blocks come from the store in
//! increasing order, so `cursor` only ever grows (the one exception,
//! [`BlockCache::restore`], moves it back over values that were never handed
//! out, under the refill mutex). If the CAS from `v` succeeds, `v` was the
//! cursor at that instant, so nobody else took it. A new block is
//! installed (under the refill mutex) by storing `cursor` first and `end`
//! second, both with Release; a reader that sees the new `end` (Acquire) must
//! then see the new `cursor` in its CAS, so a stale `v` from the old block can
//! never be paired with the new block's `end`.

use std::ops::Range;
use std::sync::atomic::{AtomicI64, Ordering::*};

/// The block currently handed out.
#[derive(Debug)]
pub(crate) struct BlockCache {
    cursor: AtomicI64,
    end: AtomicI64,
    /// Taking this value starts the prefetch of the next block.
    prefetch_at: AtomicI64,
}

/// The cursor value of a sealed cache: above every block end, so every take fails.
const SEALED: i64 = i64::MAX;

impl BlockCache {
    /// An empty cache: the first take fails and triggers a refill.
    pub(crate) fn new() -> Self {
        BlockCache {
            cursor: AtomicI64::new(0),
            end: AtomicI64::new(0),
            prefetch_at: AtomicI64::new(SEALED),
        }
    }

    /// Takes up to `n` values (`n >= 1`) from the current block. Returns the
    /// values taken and whether they include the prefetch mark, or `None`
    /// when the block is used up (or the cache sealed).
    #[inline]
    pub(crate) fn take(&self, n: i64) -> Option<(Range<i64>, bool)> {
        let mut v = self.cursor.load(Acquire);
        loop {
            let end = self.end.load(Acquire);
            if v >= end {
                return None;
            }
            // end - v > 0 and n > 0: neither side overflows.
            let to = if end - v > n { v + n } else { end };
            match self.cursor.compare_exchange_weak(v, to, AcqRel, Acquire) {
                Ok(_) => {
                    let mark = self.prefetch_at.load(Relaxed);
                    return Some((v..to, v <= mark && mark < to));
                }
                Err(now) => v = now,
            }
        }
    }

    /// Takes exactly `n` values (`n >= 1`) from the current block, or
    /// nothing when it has fewer. Returns them and whether they include the
    /// prefetch mark.
    #[inline]
    pub(crate) fn take_exact(&self, n: i64) -> Option<(Range<i64>, bool)> {
        let mut v = self.cursor.load(Acquire);
        loop {
            let end = self.end.load(Acquire);
            // end - v >= n, written so nothing overflows (v < end here).
            if v >= end || end - v < n {
                return None;
            }
            match self.cursor.compare_exchange_weak(v, v + n, AcqRel, Acquire) {
                Ok(_) => {
                    let mark = self.prefetch_at.load(Relaxed);
                    return Some((v..v + n, v <= mark && mark < v + n));
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
    /// so the cache is still used up at `rest.end` and no other value of this
    /// handle was handed out since: the cursor may go back without breaking
    /// "a handle's values increase" (a taker whose CAS then succeeds from a
    /// value in `rest` takes a value nobody has).
    pub(crate) fn restore(&self, rest: Range<i64>) {
        if rest.is_empty() {
            return;
        }
        let restored = self
            .cursor
            .compare_exchange(rest.end, rest.start, AcqRel, Acquire);
        debug_assert!(
            restored.is_ok(),
            "the cache moved while the refill mutex was held"
        );
    }

    /// Whether the current block has values left.
    pub(crate) fn has_values(&self) -> bool {
        self.cursor.load(Acquire) < self.end.load(Acquire)
    }

    /// Makes `block` the current block. Caller holds the refill mutex and the
    /// current block is used up; `block.start` is above every value handed out.
    pub(crate) fn install(&self, block: Range<i64>, prefetch_at: i64) {
        debug_assert!(!self.has_values());
        debug_assert!(block.start >= self.end.load(Relaxed));
        self.prefetch_at.store(prefetch_at, Relaxed);
        self.cursor.store(block.start, Release);
        self.end.store(block.end, Release);
    }

    /// Stops all further takes and returns the values of the current block
    /// that were never handed out (possibly empty). Caller holds the refill mutex.
    pub(crate) fn seal(&self) -> Range<i64> {
        let at = self.cursor.swap(SEALED, AcqRel);
        let end = self.end.load(Acquire);
        at.min(end)..end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::{Arc, Barrier, Mutex};

    #[test]
    fn takes_within_the_block_then_stops() {
        let c = BlockCache::new();
        assert!(c.take(1).is_none());
        c.install(10..15, 13);
        assert_eq!(c.take(1), Some((10..11, false)));
        assert_eq!(c.take(2), Some((11..13, false)));
        assert_eq!(c.take(5), Some((13..15, true)));
        assert!(c.take(1).is_none());
        c.install(15..17, 16);
        assert_eq!(c.take(1), Some((15..16, false)));
        assert_eq!(c.seal(), 16..17);
        assert!(c.take(1).is_none());
    }

    #[test]
    fn seal_of_a_used_up_block_is_empty() {
        let c = BlockCache::new();
        c.install(0..2, 1);
        c.take(2).unwrap();
        assert!(c.seal().is_empty());
    }

    /// Threads race over many small blocks installed under a mutex, the way
    /// the refill path does it: every value is taken exactly once.
    #[test]
    fn racing_threads_never_share_a_value() {
        const THREADS: usize = 4;
        const BLOCKS: i64 = 2_000;
        let cache = Arc::new(BlockCache::new());
        let next_block = Arc::new(Mutex::new(0i64));
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (cache, next_block, barrier) =
                    (cache.clone(), next_block.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let mut got = Vec::new();
                    loop {
                        if let Some((r, _)) = cache.take(1 + got.len() as i64 % 3) {
                            got.extend(r);
                            continue;
                        }
                        let mut b = next_block.lock().unwrap();
                        if cache.has_values() {
                            continue;
                        }
                        if *b == BLOCKS {
                            return got;
                        }
                        // Blocks of 7 values with a gap of 3 between them.
                        let start = *b * 10;
                        cache.install(start..start + 7, start + 5);
                        *b += 1;
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
        assert_eq!(count as i64, BLOCKS * 7, "a value was lost");
    }
}
