package dev.keysmith.client;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * The local block cache of a {@link KeysmithSequence}: leased ranges not yet handed out, the
 * adaptive block size, what to hand back. No I/O and no locking: the sequence holds its lock
 * around every call. A port of the Python client's {@code Buffer}.
 */
final class BlockBuffer {
  /** Prefetch when this fraction of the last lease is left. */
  static final double PREFETCH_AT = 0.2;

  /** The unused part of one leased range: {@code next, next + step, ...} below {@code end}. */
  static final class Run {
    long next;
    final long end;
    final long step;
    final String lease;
    /** The last range of its lease: only there can a tail go back. */
    final boolean lastOfLease;

    Run(long next, long end, long step, String lease, boolean lastOfLease) {
      this.next = next;
      this.end = end;
      this.step = step;
      this.lease = lease;
      this.lastOfLease = lastOfLease;
    }

    long left() {
      return next >= end ? 0 : (end - next - 1) / step + 1;
    }

    /** The value after {@code v} in this run, or {@code end} (no overflow near 2^63). */
    long after(long v) {
      return end - v > step ? v + step : end;
    }
  }

  final long minBlock;
  final long maxBlock;
  final long targetNanos;
  /** The current lease size; 0 until known (the sequence's own block, read at the first fetch). */
  long block;
  final ArrayDeque<Run> runs = new ArrayDeque<>();
  long available;
  /** The largest value received: later values at or below it are dropped (values increase). */
  long high = Long.MIN_VALUE;
  long step = 1;
  long leaseSize;
  boolean fetching;
  long lastFetch;
  boolean fetchedBefore;
  long leases;

  BlockBuffer(long block, long minBlock, long maxBlock, long targetNanos) {
    if (minBlock < 1 || minBlock > maxBlock) {
      throw new IllegalArgumentException(
          "keysmith: need 1 <= minBlock <= maxBlock, got " + minBlock + ".." + maxBlock);
    }
    if (targetNanos <= 0) {
      throw new IllegalArgumentException("keysmith: target must be positive");
    }
    if (block < 0) {
      throw new IllegalArgumentException("keysmith: block must be positive, got " + block);
    }
    this.minBlock = minBlock;
    this.maxBlock = maxBlock;
    this.targetNanos = targetNanos;
    this.block = block == 0 ? 0 : clamp(block);
  }

  long clamp(long b) {
    return Math.max(minBlock, Math.min(maxBlock, b));
  }

  /** The next value, or -1 when none is here. Values are never negative. */
  long take() {
    Run r;
    while ((r = runs.peekFirst()) != null) {
      long v = r.next;
      if (v < r.end) {
        r.next = r.after(v);
        available--;
        return v;
      }
      runs.pollFirst();
    }
    return -1;
  }

  /** {@code n} values, or null (taking nothing) when fewer are here. */
  long[] take(int n) {
    if (available < n) {
      return null;
    }
    long[] out = new long[n];
    int k = 0;
    while (k < n) {
      Run r = runs.peekFirst();
      if (r.next >= r.end) {
        runs.pollFirst();
        continue;
      }
      out[k++] = r.next;
      r.next = r.after(r.next);
      available--;
    }
    return out;
  }

  /** Puts a run (the rest of the current block) back in front. */
  void putFront(Run r) {
    long n = r.left();
    if (n > 0) {
      runs.addFirst(r);
      available += n;
    }
  }

  /** Takes the first run with values left, or null. */
  Run pollFirst() {
    Run r;
    while ((r = runs.pollFirst()) != null) {
      long n = r.left();
      if (n > 0) {
        available -= n;
        return r;
      }
    }
    return null;
  }

  /**
   * Whether a run holds {@code n} values; when one does, the runs before it are dropped (their values
   * stay a gap, never handed out). Drops nothing otherwise.
   */
  boolean dropUntilRunHolds(long n) {
    boolean found = false;
    for (Run r : runs) {
      if (r.left() >= n) {
        found = true;
        break;
      }
    }
    if (!found) {
      return false;
    }
    while (runs.peekFirst().left() < n) {
      available -= runs.pollFirst().left();
    }
    return true;
  }

  boolean wantsPrefetch() {
    return !fetching && available <= leaseSize * PREFETCH_AT;
  }

  /** How many values to reserve now ({@code block} known): adapts the block to the rate. */
  long count(long need, long now) {
    if (fetchedBefore) {
      long dt = now - lastFetch;
      if (dt < targetNanos / 2) {
        block = clamp(block * 2);
      } else if (dt > targetNanos * 2) {
        block = clamp(block / 2);
      }
    }
    fetchedBefore = true;
    lastFetch = now;
    return Math.max(block, Math.min(maxBlock, need - available));
  }

  /** A fetch ended: install its lease (null after a failure). */
  void endFetch(Lease lease) {
    fetching = false;
    if (lease == null) {
      return;
    }
    leases++;
    leaseSize = lease.size();
    long s = step = lease.step();
    List<Range> ranges = new ArrayList<>();
    for (Range r : lease.ranges()) {
      if (r.end() > r.start()) {
        ranges.add(r);
      }
    }
    for (int k = 0; k < ranges.size(); k++) {
      Range r = ranges.get(k);
      long start = r.start();
      if (start <= high) {
        // the first value of the range above high (values are r.start + i*step)
        long skip = (high - r.start()) / s + 1;
        if (skip >= (r.end() - r.start() + s - 1) / s) {
          continue;
        }
        start = r.start() + skip * s;
      }
      Run run = new Run(start, r.end(), s, lease.token(), k == ranges.size() - 1);
      long n = run.left();
      runs.addLast(run);
      available += n;
      high = start + (n - 1) * s;
    }
  }

  /**
   * {@code (lease, from)} of every lease whose last range has values left, newest first; empties
   * the buffer. {@code from} is the run's next value, a value of the lease.
   */
  List<Object[]> tails() {
    List<Object[]> out = new ArrayList<>();
    Iterator<Run> it = runs.descendingIterator();
    while (it.hasNext()) {
      Run r = it.next();
      if (r.lastOfLease && r.next < r.end) {
        out.add(new Object[] {r.lease, r.next});
      }
    }
    runs.clear();
    available = 0;
    return out;
  }
}
