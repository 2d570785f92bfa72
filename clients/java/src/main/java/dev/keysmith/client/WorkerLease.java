package dev.keysmith.client;

import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A worker id of a group held and renewed in the background, for generators of ids that need one
 * (snowflake-style). Make it with {@link KeysmithClient#workerLease}; it is leased when made.
 *
 * <p>It renews every third of its TTL. It is <em>lost</em> when a renewal is refused (409: it
 * expired, or another holder took the worker id) or when no renewal succeeded within the TTL: then
 * {@link #lost()} turns true and {@code onLost} is called once, from the renewal thread. {@link
 * #usable(long)} is false from that moment, and already from two thirds of the TTL after the last
 * successful renewal was sent, so that nothing is issued with a lease that may have expired in the
 * store. Use the worker id only while {@link #usable(long)} holds for the id's time. {@link
 * #close()} releases it (its time floor stays, so the next holder starts above every id made).
 */
public final class WorkerLease implements AutoCloseable {
  private static final System.Logger LOG = System.getLogger("dev.keysmith.client");

  /** The lease's TTL, group size and loss callback. */
  public static final class Options {
    Duration ttl = Duration.ofSeconds(10);
    long max = 1024;
    Consumer<KeysmithException> onLost;

    /** The lease's time to live (default 10 s); it is renewed every third of it. */
    public Options ttl(Duration ttl) {
      this.ttl = KeysmithClient.positive(ttl, "ttl");
      return this;
    }

    /** Worker ids are {@code 0..max-1} (default 1024); every holder of a group uses the same. */
    public Options max(long max) {
      if (max < 1) {
        throw new IllegalArgumentException("keysmith: max must be at least 1, got " + max);
      }
      this.max = max;
      return this;
    }

    /** Called once, from the renewal thread, when the lease is lost. */
    public Options onLost(Consumer<KeysmithException> onLost) {
      this.onLost = onLost;
      return this;
    }

    Options copy() {
      Options o = new Options();
      o.ttl = ttl;
      o.max = max;
      o.onLost = onLost;
      return o;
    }
  }

  private final KeysmithClient client;
  private final Options options;
  private final Object renewing = new Object();
  private volatile WorkerLeaseInfo info;
  /** Monotonic: ids may be issued before this (two thirds of the TTL after the last renewal was sent). */
  private volatile long deadlineNanos;
  /** Monotonic: the lease may have expired in the store from here on (the TTL after it was sent). */
  private volatile long expiryNanos;
  private volatile KeysmithException lostReason;
  private volatile boolean closed;
  private volatile long renewals;
  private ScheduledFuture<?> next;

  WorkerLease(KeysmithClient client, String group, Options options) {
    this.client = client;
    this.options = options.copy();
    long sent = System.nanoTime();
    WorkerLeaseInfo first = client.leaseWorker(group, options.ttl.toMillis(), options.max);
    installed(first, sent);
    schedule(first.ttlMs() / 3);
  }

  private void installed(WorkerLeaseInfo i, long sent) {
    long ttl = TimeUnit.MILLISECONDS.toNanos(i.ttlMs());
    info = i;
    deadlineNanos = sent + ttl * 2 / 3;
    expiryNanos = sent + ttl;
  }

  private void schedule(long delayMs) {
    synchronized (renewing) {
      if (closed || lostReason != null) {
        return;
      }
      try {
        next = client.scheduler().schedule(this::tick, Math.max(1, delayMs), TimeUnit.MILLISECONDS);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        // the client is closing: this lease is closed with it
      }
    }
  }

  private void tick() {
    if (closed) {
      return;
    }
    try {
      WorkerLeaseInfo n = renew();
      schedule(n.ttlMs() / 3);
    } catch (KeysmithException.Conflict e) {
      // renew() lost it
    } catch (KeysmithException e) {
      if (System.nanoTime() - expiryNanos >= 0) {
        lose(e);
      } else {
        // try again soon: the lease expires unless a renewal succeeds
        schedule(Math.max(1, info.ttlMs() / 10));
      }
    }
  }

  /**
   * Renews now (the renewal thread does this every third of the TTL).
   *
   * @throws KeysmithException.Conflict when refused: the lease is then lost
   * @throws KeysmithException.Closed after {@link #close()}
   */
  public WorkerLeaseInfo renew() {
    synchronized (renewing) {
      if (closed) {
        throw new KeysmithException.Closed("keysmith: worker lease of group " + info.group() + " is closed");
      }
      WorkerLeaseInfo cur = info;
      long left = Math.max(50_000_000L, expiryNanos - System.nanoTime());
      long sent = System.nanoTime();
      try {
        WorkerLeaseInfo n = client.renewWorker(cur.group(), cur.token(), Duration.ofNanos(left));
        if (n.worker() != cur.worker() || n.fence() != cur.fence()) {
          throw new KeysmithException.Conflict(
              "the server renewed worker " + n.worker() + " fence " + n.fence() + " for a lease of worker "
                  + cur.worker() + " fence " + cur.fence(), 409, "conflict", java.util.List.of(), null);
        }
        installed(n, sent);
        renewals++;
        return n;
      } catch (KeysmithException.Conflict e) {
        lose(e);
        throw e;
      }
    }
  }

  private void lose(KeysmithException e) {
    synchronized (renewing) {
      if (lostReason != null) {
        return;
      }
      lostReason = e;
      deadlineNanos = System.nanoTime();
    }
    LOG.log(System.Logger.Level.WARNING, "keysmith: worker {0} of group {1} lost: {2}",
        info.worker(), info.group(), e.getMessage());
    if (options.onLost != null) {
      try {
        options.onLost.accept(e);
      } catch (RuntimeException cb) {
        LOG.log(System.Logger.Level.WARNING, "keysmith: the onLost callback failed", cb);
      }
    }
  }

  /** The lease as last renewed (its token is a secret: do not log it). */
  public WorkerLeaseInfo info() {
    return info;
  }

  /** The worker id. */
  public long worker() {
    return info.worker();
  }

  /** The fence of this holding of the worker id. */
  public long fence() {
    return info.fence();
  }

  /** Ids made with the worker id use times at or above this, ms since 1970. */
  public long notBeforeMs() {
    return info.notBeforeMs();
  }

  /** Ids made with the worker id use times below this, ms since 1970; renewals move it. */
  public long untilMs() {
    return info.untilMs();
  }

  /** Successful renewals so far. */
  public long renewals() {
    return renewals;
  }

  /** True once the lease is lost: issue no more ids with this worker id. */
  public boolean lost() {
    return lostReason != null;
  }

  /** Why the lease was lost, or null. */
  public KeysmithException lostReason() {
    return lostReason;
  }

  /** Held, not closed, and within two thirds of the TTL after the last renewal was sent. */
  boolean current() {
    return lostReason == null && !closed && System.nanoTime() - deadlineNanos < 0;
  }

  /**
   * Whether an id with time {@code timeMs} (ms since 1970) may use the worker id now: the lease is
   * held, its last renewal is recent enough, and the time lies in {@code notBeforeMs..untilMs}.
   */
  public boolean usable(long timeMs) {
    WorkerLeaseInfo i = info;
    return current() && i.notBeforeMs() <= timeMs && timeMs < i.untilMs();
  }

  /** {@link #usable(long)} for now. */
  public boolean usable() {
    return usable(System.currentTimeMillis());
  }

  /**
   * Stops renewing and releases the worker id (its time floor stays). Idempotent; a release that
   * fails leaves the worker id to expire after its TTL.
   */
  @Override
  public void close() {
    synchronized (renewing) {
      if (closed) {
        return;
      }
      closed = true;
      if (next != null) {
        next.cancel(false);
      }
    }
    client.forget(this);
    if (lostReason == null) {
      WorkerLeaseInfo i = info;
      try {
        client.releaseWorker(i.group(), i.token());
      } catch (KeysmithException e) {
        LOG.log(System.Logger.Level.DEBUG, "keysmith: release of worker {0} failed: {1}", i.worker(), e.getMessage());
      }
    }
  }

  @Override
  public String toString() {
    return "WorkerLease[" + info + (lost() ? ", lost" : "") + "]";
  }
}
