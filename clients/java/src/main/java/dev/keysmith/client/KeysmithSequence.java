package dev.keysmith.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
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
 * <p>{@link #next()} (and {@link #getAsLong()}) takes the next value of the current block with one
 * atomic add ({@link VarHandle#getAndAdd}), no lock and no request: only the caller that finds the
 * block used up takes the slow path, under a lock, that installs the next block, which is normally
 * here already. Blocks are prefetched by a background thread in a chain (the model is CosId's
 * segment chain): the last safe-distance values of a lease are a block of their own, whose
 * installation asks for the next lease (so the fast path checks nothing else); the safe distance is a
 * fifth of a lease, grown by a fifth (up to two leases) each time a caller had to wait for a lease. Lease
 * sizes double when leases last less than half the target interval and halve when they last more
 * than twice it, within {@code minBlock..maxBlock}. {@link #nextRange(long)} takes a batch in
 * O(1).
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

  /**
   * The block values are taken from without a lock: {@code start + i * step} for the {@code i}
   * each taker claims with one atomic add on {@code taken} ({@code i < n}: a value; otherwise the
   * slow path). Replaced under the lock only.
   */
  static final class Block {
    @SuppressWarnings("unused") // through TAKEN
    private volatile long taken;
    final long start;
    final long step;
    final long n;
    final String lease;
    final boolean lastOfLease;

    Block(long start, long step, long n, String lease, boolean lastOfLease) {
      this.start = start;
      this.step = step;
      this.n = n;
      this.lease = lease;
      this.lastOfLease = lastOfLease;
    }

    long left() {
      long t = (long) TAKEN.getVolatile(this);
      return t < n ? n - t : 0;
    }

    /** Claims every value left; the index of the first (n: none). Fast takers get no more. */
    long freeze() {
      long t = (long) TAKEN.getAndSet(this, n);
      return Math.min(t, n);
    }
  }

  private static final VarHandle TAKEN;

  static {
    try {
      TAKEN = MethodHandles.lookup().findVarHandle(Block.class, "taken", long.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private static final Block EMPTY = new Block(0, 1, 0, null, false);

  private final KeysmithClient client;
  private final String name;
  private final ReentrantLock lock = new ReentrantLock();
  private final Condition fetched = lock.newCondition();
  /** The values not in {@link #cur}, under the lock. */
  private final BlockBuffer buf;
  private volatile Block cur = EMPTY;
  private boolean closed;
  private long fetches;
  private long starvedFetch;
  /** The safe distance grows to this many fifths of a lease: two leases ahead. */
  static final long MAX_AHEAD = 10;
  /** The safe distance, in fifths of a lease (1..MAX_AHEAD). */
  private long ahead = 1;
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
   * The next value, from the current block with one atomic add (waiting for a lease only when no
   * leased value is here).
   *
   * @throws KeysmithException.Exhausted past the sequence's maximum
   * @throws KeysmithException.NotFound when the sequence does not exist
   * @throws KeysmithException.Closed after {@link #close()}
   * @throws KeysmithException any error of the lease request, after the client's failover
   */
  public long next() {
    Block b = cur;
    long i = (long) TAKEN.getAndAdd(b, 1L);
    if (i < b.n) {
      return b.start + i * b.step;
    }
    return slowRange(1).start();
  }

  /**
   * {@code n} consecutive values of one block ({@code start, start + step, ...}, {@code n} of them)
   * in O(1): one compare-and-set on the current block when it holds {@code n} more. When it holds
   * fewer, they stay a gap (never handed out) once the next block is here, so that values still
   * increase. A call that fails takes nothing.
   *
   * @throws IllegalArgumentException for {@code n < 1} or {@code n} above the handle's maxBlock (no
   *     lease holds that many)
   * @throws KeysmithException as {@link #next()}
   */
  public Range nextRange(long n) {
    if (n < 1 || n > buf.maxBlock) {
      throw new IllegalArgumentException(
          "keysmith: nextRange needs 1 <= n <= maxBlock (" + buf.maxBlock + "), got n=" + n);
    }
    Block b = cur;
    while (true) {
      long t = (long) TAKEN.getVolatile(b);
      if (t + n > b.n) {
        break;
      }
      if (TAKEN.compareAndSet(b, t, t + n)) {
        return rangeOf(b, t, n);
      }
    }
    return slowRange(n);
  }

  private static Range rangeOf(Block b, long i, long k) {
    long first = b.start + i * b.step;
    return new Range(first, first + (k - 1) * b.step + 1, b.step);
  }

  /**
   * The values of {@code b} from index {@code i} back into the buffer, in front: joined to the
   * front run when that one continues them (the same lease, split off by {@link #install()}).
   */
  private void putBack(Block b, long i) {
    if (i >= b.n) {
      return;
    }
    long from = b.start + i * b.step;
    long last = b.start + (b.n - 1) * b.step;
    BlockBuffer.Run front = buf.runs.peekFirst();
    if (front != null && front.left() > 0 && front.step == b.step && b.lease != null
        && b.lease.equals(front.lease) && last + b.step == front.next) {
      buf.available += b.n - i;
      front.next = from;
      return;
    }
    buf.putFront(new BlockBuffer.Run(from, last + 1, b.step, b.lease, b.lastOfLease));
  }

  /** {@code n} consecutive values under the lock, installing blocks or waiting for leases. */
  private Range slowRange(long n) {
    lock.lock();
    try {
      for (int fetched = 0; ; ) {
        if (closed) {
          throw new KeysmithException.Closed("keysmith: sequence " + name + ": this handle is closed");
        }
        Block b = cur;
        putBack(b, b.freeze());
        if (buf.dropUntilRunHolds(n)) {
          // the runs in front held fewer than n (none, for next()): they stay a gap
          BlockBuffer.Run r = buf.pollFirst();
          Range out = new Range(r.next, r.next + (n - 1) * r.step + 1, r.step);
          r.next = r.left() == n ? r.end : r.next + n * r.step;
          buf.putFront(r);
          install();
          return out;
        }
        if (n > 1 && fetched == 8) {
          install();
          throw new KeysmithException(
              "keysmith: sequence " + name + ": " + fetched + " leases in a row held no " + n
                  + " consecutive values; ask for fewer");
        }
        fetched++;
        install();
        // a lease of at least n values: the need counts what is here already
        waitForValues(n + here());
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * (Lock held) Makes the buffer's first run the current block, or none. When it is the last run
   * here, its last safe-distance values stay a run of their own behind it: the caller that installs
   * that one (the slow path) starts the next lease, so the fast path never checks for a prefetch.
   */
  private void install() {
    BlockBuffer.Run r = buf.pollFirst();
    if (r == null) {
      cur = EMPTY;
      maybePrefetch();
      return;
    }
    long n = r.left();
    long d = distance();
    boolean lastRun = buf.available == 0;
    if (lastRun && !closed && buf.leases > 0 && d > 0 && n > d) {
      long cut = r.next + (n - d) * r.step;
      buf.putFront(new BlockBuffer.Run(cut, r.end, r.step, r.lease, r.lastOfLease));
      cur = new Block(r.next, r.step, n - d, r.lease, false);
    } else {
      cur = new Block(r.next, r.step, n, r.lease, r.lastOfLease);
    }
    maybePrefetch();
  }

  /** (Lock held) The safe distance, in values. */
  private long distance() {
    return (long) (buf.leaseSize * BlockBuffer.PREFETCH_AT) * ahead;
  }

  /** (Lock held) The values here: the current block's and the buffer's. */
  private long here() {
    return cur.left() + buf.available;
  }

  private void maybePrefetch() {
    if (!buf.fetching && !closed && buf.leases > 0 && here() <= distance()) {
      startFetch(0);
    }
  }

  /** {@code n} increasing values (from one block or several); on failure none is taken. */
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
        if (closed) {
          throw new KeysmithException.Closed("keysmith: sequence " + name + ": this handle is closed");
        }
        Block b = cur;
        putBack(b, b.freeze());
        long[] vs = buf.take(n);
        install();
        if (vs != null) {
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
      return here();
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
    if (buf.leases > 0 && starvedFetch != number) {
      // a caller waits for a lease: the prefetch came too late, the safe distance grows
      starvedFetch = number;
      ahead = Math.min(MAX_AHEAD, ahead + 1);
    }
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
      } else {
        // the chain: another lease when the safe distance is not covered yet
        maybePrefetch();
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
      Block b = cur;
      putBack(b, b.freeze());
      cur = EMPTY;
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
