package dev.keysmith.client;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * Values of one sequence, served from a local block leased from the server ({@code POST
 * /v1/sequences/{name}/reserve}). Make it with {@link KeysmithClient#sequence}.
 *
 * <p>{@link #next()} (and {@link #getAsLong()}) takes the next value of the local block under a
 * lock, with no request; when a fifth of the last lease is left, a background thread reserves the
 * next one, so callers do not wait on the server in steady state. Lease sizes double when leases
 * last less than half the target interval and halve when they last more than twice it, within
 * {@code minBlock..maxBlock}.
 *
 * <p>Guarantees: every value is handed out at most once, across threads, handles, processes and
 * server restarts (each lease is reserved durably before its first value leaves); values from one
 * handle increase across all threads using it. A call that fails takes nothing. {@link #close()}
 * hands the unused tail back when no one reserved since; otherwise it stays a gap.
 */
public final class KeysmithSequence implements LongSupplier, AutoCloseable {
  private static final System.Logger LOG = System.getLogger("dev.keysmith.client");

  /** How a handle sizes its leases. */
  public static final class Options {
    long block;
    long minBlock = 1;
    long maxBlock = 100_000;
    Duration target = Duration.ofSeconds(1);

    /** The first lease's size (default: the sequence's own block). */
    public Options block(long block) {
      if (block < 1) {
        throw new IllegalArgumentException("keysmith: block must be at least 1, got " + block);
      }
      this.block = block;
      return this;
    }

    /** The smallest lease (default 1). */
    public Options minBlock(long minBlock) {
      this.minBlock = minBlock;
      return this;
    }

    /** The largest lease (default 100 000, the server's default largest count). */
    public Options maxBlock(long maxBlock) {
      this.maxBlock = maxBlock;
      return this;
    }

    /** The wanted time between two leases (default 1 s). */
    public Options target(Duration target) {
      this.target = KeysmithClient.positive(target, "target");
      return this;
    }

    /** A fixed lease size: {@code block = minBlock = maxBlock = n}. */
    public Options fixed(long n) {
      return block(n).minBlock(n).maxBlock(n);
    }
  }

  private final KeysmithClient client;
  private final String name;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition fetched = lock.newCondition();
  private final BlockBuffer buf;
  private boolean closed;
  private long fetches;
  private final Map<Long, RuntimeException> failed = new HashMap<>();
  private volatile Range released;

  KeysmithSequence(KeysmithClient client, String name, Options o) {
    this.client = client;
    this.name = name;
    this.buf = new BlockBuffer(o.block, o.minBlock, o.maxBlock, o.target.toNanos());
  }

  /** The sequence's name. */
  public String name() {
    return name;
  }

  /** The next value; same as {@link #next()}. */
  @Override
  public long getAsLong() {
    return next();
  }

  /**
   * The next value, from the local block (waiting for a lease only when the block is empty).
   *
   * @throws KeysmithException.Exhausted past the sequence's maximum
   * @throws KeysmithException.NotFound when the sequence does not exist
   * @throws KeysmithException.Closed after {@link #close()}
   * @throws KeysmithException any error of the lease request, after the client's failover
   */
  public long next() {
    lock.lock();
    try {
      while (true) {
        long v = buf.take();
        if (v >= 0) {
          if (buf.wantsPrefetch() && !closed) {
            startFetch(0);
          }
          return v;
        }
        waitForValues(1);
      }
    } finally {
      lock.unlock();
    }
  }

  /** {@code n} increasing values; on failure none is taken. */
  public long[] next(int n) {
    if (n < 0) {
      throw new IllegalArgumentException("keysmith: n must not be negative, got " + n);
    }
    if (n == 0) {
      return new long[0];
    }
    lock.lock();
    try {
      while (true) {
        long[] vs = buf.take(n);
        if (vs != null) {
          if (buf.wantsPrefetch() && !closed) {
            startFetch(0);
          }
          return vs;
        }
        waitForValues(n);
      }
    } finally {
      lock.unlock();
    }
  }

  /** How many leases this handle has received. */
  public long leases() {
    lock.lock();
    try {
      return buf.leases;
    } finally {
      lock.unlock();
    }
  }

  /** The current lease size (0 before the first lease). */
  public long block() {
    lock.lock();
    try {
      return buf.block;
    } finally {
      lock.unlock();
    }
  }

  /** Values leased and not yet handed out. */
  public long available() {
    lock.lock();
    try {
      return buf.available;
    } finally {
      lock.unlock();
    }
  }

  /** What {@link #close()} handed back to the server; null: nothing (the values stay a gap). */
  public Range released() {
    return released;
  }

  private void waitForValues(long need) {
    if (closed) {
      throw new KeysmithException.Closed("keysmith: sequence " + name + ": this handle is closed");
    }
    if (!buf.fetching) {
      startFetch(need);
    }
    long number = fetches;
    while (buf.fetching) {
      fetched.awaitUninterruptibly();
    }
    RuntimeException err = failed.get(number);
    if (err != null) {
      throw err;
    }
  }

  private void startFetch(long need) {
    buf.fetching = true;
    long number = ++fetches;
    failed.clear(); // errors nobody waited for
    try {
      client.fetchers().execute(() -> fetch(number, need));
    } catch (RejectedExecutionException e) {
      buf.fetching = false;
      failed.put(number, new KeysmithException.Closed("keysmith: the client is closed"));
    }
  }

  private void fetch(long number, long need) {
    Lease lease = null;
    RuntimeException err = null;
    try {
      boolean known;
      lock.lock();
      try {
        known = buf.block != 0;
      } finally {
        lock.unlock();
      }
      long sequenceBlock = known ? 0 : client.getSequence(name).block();
      long count;
      lock.lock();
      try {
        if (buf.block == 0) {
          buf.block = buf.clamp(sequenceBlock);
        }
        count = buf.count(need, System.nanoTime());
      } finally {
        lock.unlock();
      }
      lease = client.reserve(name, count);
    } catch (RuntimeException e) {
      err = e;
    } catch (Error e) {
      err = new KeysmithException("keysmith: sequence " + name + ": " + e, 0, null, List.of(), null, e);
    }
    lock.lock();
    try {
      buf.endFetch(lease);
      if (err != null) {
        failed.put(number, err);
      }
      fetched.signalAll();
    } finally {
      lock.unlock();
    }
  }

  /**
   * Stops serving and hands the unused tail of the newest lease back to the server, when no one
   * reserved since (the server's rule); otherwise, or when no server takes it, the tail stays a
   * gap, never handed out by anyone. Waits for a lease in flight so that it goes back too.
   * Idempotent; never throws for a tail that could not go back (it is logged).
   */
  @Override
  public void close() {
    List<Object[]> tails;
    long step;
    lock.lock();
    try {
      if (closed) {
        return;
      }
      closed = true;
      while (buf.fetching) {
        fetched.awaitUninterruptibly();
      }
      tails = buf.tails();
      step = buf.step;
    } finally {
      lock.unlock();
    }
    client.forget(this);
    if (!tails.isEmpty()) {
      String lease = (String) tails.get(0)[0];
      long from = (Long) tails.get(0)[1];
      try {
        released = client.release(name, lease, from, step);
      } catch (KeysmithException e) {
        LOG.log(
            System.Logger.Level.WARNING,
            "keysmith: sequence {0}: the unused tail from {1} stays a gap: {2}",
            name,
            from,
            e.getMessage());
      }
    }
  }

  @Override
  public String toString() {
    return "KeysmithSequence[" + name + "]";
  }
}
