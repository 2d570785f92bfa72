package dev.keysmith.client;

import java.util.List;

/**
 * The base URLs of a client and, per server, when it may be tried again; shared by every call of a
 * client. The rules, as the Python and TypeScript clients: a request goes to the server that
 * answered last (at first the first URL); a connection error or a 503 sends it to the next server
 * at once; a server that failed is not tried again before its Retry-After (503) or a backoff
 * (connection errors: 50 ms doubling up to 2 s).
 */
final class Servers {
  static final long MIN_BACKOFF_NANOS = 50_000_000L;
  static final long MAX_BACKOFF_NANOS = 2_000_000_000L;
  static final long MAX_RETRY_AFTER_NANOS = 30_000_000_000L;

  final List<String> urls;
  private int preferred;
  private final long[] notBefore;
  private final long[] backoff;
  private final boolean[] waiting;
  private long unreachable;

  Servers(List<String> urls) {
    this.urls = List.copyOf(urls);
    this.notBefore = new long[urls.size()];
    this.backoff = new long[urls.size()];
    this.waiting = new boolean[urls.size()];
  }

  /** A ready server not yet tried in this round (its index), or -(nanos until one is ready) - 1. */
  synchronized long pick(long now, boolean[] tried) {
    int n = urls.size();
    for (int k = 0; k < n; k++) {
      int i = (preferred + k) % n;
      if (!tried[i] && ready(i, now)) {
        return i;
      }
    }
    for (int k = 0; k < n; k++) {
      int i = (preferred + k) % n;
      if (ready(i, now)) {
        // every ready server failed in this round already: start a new round
        java.util.Arrays.fill(tried, false);
        return i;
      }
    }
    long soonest = Long.MAX_VALUE;
    for (int i = 0; i < n; i++) {
      soonest = Math.min(soonest, notBefore[i] - now);
    }
    return -Math.max(0, soonest) - 1;
  }

  private boolean ready(int i, long now) {
    return !waiting[i] || notBefore[i] - now <= 0;
  }

  synchronized void succeeded(int i) {
    preferred = i;
    backoff[i] = 0;
    waiting[i] = false;
  }

  /** Server {@code i} failed: not again before {@code waitNanos} (Retry-After; -1: a backoff). */
  synchronized void failed(int i, long waitNanos) {
    if (waitNanos < 0) {
      unreachable++;
      backoff[i] = Math.min(MAX_BACKOFF_NANOS, Math.max(MIN_BACKOFF_NANOS, backoff[i] * 2));
      waitNanos = backoff[i];
    }
    waitNanos = Math.min(MAX_RETRY_AFTER_NANOS, Math.max(MIN_BACKOFF_NANOS, waitNanos));
    notBefore[i] = System.nanoTime() + waitNanos;
    waiting[i] = true;
    if (preferred == i) {
      preferred = (i + 1) % urls.size();
    }
  }

  /** How many requests found a server unreachable (no answer). */
  synchronized long unreachable() {
    return unreachable;
  }
}
