package dev.keysmith.client;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * Time-ordered 64-bit ids made in this process, with no request per id, under a worker lease of a
 * group ({@link WorkerLease}). Make it with {@link KeysmithClient#timeIds}; one per group per
 * process, shared by its threads.
 *
 * <p><b>One worker id per process, taken lazily.</b> No lease is taken when the generator is made:
 * the first {@link #next()} leases the lowest free worker id of the group, so a generator made in
 * a static initializer, a build step or a parent that hands work to others holds nothing until an
 * id is asked for where it is used.
 *
 * <p>Guarantees: ids from one generator increase; ids of all generators of a group (threads,
 * processes, hosts, restarts) are unique, as long as they share the servers' store, the group and
 * the layout. An id's time unit lies in the lease's {@code notBeforeMs..untilMs}, and an id is
 * issued only while the lease is current ({@link WorkerLease#usable(long)}): when the lease is lost
 * (a renewal refused, or none succeeded in time) the generator stops issuing at once, the call that
 * finds it lost throws {@link KeysmithException.LeaseLost}, and the call after takes a new lease.
 * When the clock goes back or a time unit's sequence runs out, ids borrow time ahead of the clock,
 * at most the lease's TTL; past that a call waits for the clock at most one second, then throws
 * {@link KeysmithException.Unavailable} naming the skew.
 */
public final class TimeIdGenerator implements LongSupplier, AutoCloseable {
  private static final long MAX_WAIT_NANOS = TimeUnit.SECONDS.toNanos(1);

  private final KeysmithClient client;
  private final String group;
  private final IdLayout layout;
  private final WorkerLease.Options options;
  private final long maxBorrowMs;
  private final long maxSequence;
  private final long maxTime;
  private WorkerLease lease;
  private long lastUnit = -1;
  private long sequence;
  private boolean closed;

  TimeIdGenerator(KeysmithClient client, String group, IdLayout layout, WorkerLease.Options options) {
    this.client = client;
    this.group = group;
    this.layout = layout;
    this.options = options.copy().max(layout.workers());
    this.maxBorrowMs = Math.max(5_000, this.options.ttl.toMillis());
    this.maxSequence = (1L << layout.sequenceBits()) - 1;
    this.maxTime = (1L << layout.timeBits()) - 1;
  }

  /** The layout of this generator's ids. */
  public IdLayout layout() {
    return layout;
  }

  /** The lease held now, or null before the first id and after a loss. */
  public synchronized WorkerLease lease() {
    return lease;
  }

  /** The next id; same as {@link #next()}. */
  @Override
  public long getAsLong() {
    return next();
  }

  /**
   * The next id, larger than every id this generator issued before.
   *
   * @throws KeysmithException.LeaseLost when the worker lease was lost (the next call leases anew)
   * @throws KeysmithException.Conflict when every worker id of the group is held
   * @throws KeysmithException.Unavailable when the clock is far behind the lease's window
   * @throws KeysmithException.Closed after {@link #close()}
   */
  public synchronized long next() {
    if (closed) {
      throw new KeysmithException.Closed("keysmith: time id generator of group " + group + " is closed");
    }
    if (lease == null) {
      lease = new WorkerLease(client, group, options);
    }
    long started = System.nanoTime();
    while (true) {
      WorkerLease l = lease;
      if (l.lost()) {
        lease = null;
        l.close();
        throw new KeysmithException.LeaseLost(
            "keysmith: the worker lease of group " + group + " (worker " + l.worker()
                + ") was lost; no id was issued with it since. The next call leases a new worker id",
            l.lostReason());
      }
      WorkerLeaseInfo info = l.info();
      long now = System.currentTimeMillis();
      long unit = Math.floorDiv(now - layout.epochMs(), layout.unitMs());
      long first = Math.floorDiv(info.notBeforeMs() - layout.epochMs() + layout.unitMs() - 1, layout.unitMs());
      long t = Math.max(Math.max(unit, first), lastUnit);
      long s = t == lastUnit ? sequence + 1 : 0;
      if (s > maxSequence) {
        t++;
        s = 0;
      }
      long aheadMs = t * layout.unitMs() + layout.epochMs() - now;
      boolean aheadOk = aheadMs <= maxBorrowMs;
      boolean belowFloor = layout.epochMs() + (t + 1) * layout.unitMs() <= info.untilMs();
      if (aheadOk && belowFloor && l.current()) {
        if (t > maxTime || t < 0) {
          throw new KeysmithException.Unavailable(
              "keysmith: the id layout's time bits have run out (or the clock is before its epoch)",
              0, "ids_unavailable", List.of(), null, null);
        }
        lastUnit = t;
        sequence = s;
        return (t << (layout.workerBits() + layout.sequenceBits()))
            | (info.worker() << layout.sequenceBits())
            | s;
      }
      if (System.nanoTime() - started > MAX_WAIT_NANOS) {
        String why = !aheadOk
            ? "ids would run " + aheadMs + " ms ahead of the clock (at most " + maxBorrowMs
                + " ms): the clock went back or is behind the lease's window; fix the clock (NTP)"
            : !belowFloor
                ? "the lease's window ends at " + info.untilMs() + " ms and no renewal moved it"
                : "no renewal of the worker lease succeeded for two thirds of its TTL";
        throw new KeysmithException.Unavailable(
            "keysmith: no id for group " + group + " (worker " + info.worker() + "): " + why,
            0, "ids_unavailable", List.of(), null, null);
      }
      LockSupport.parkNanos(Duration.ofMillis(1).toNanos());
    }
  }

  /** Stops issuing and releases the worker id (its time floor stays). Idempotent. */
  @Override
  public synchronized void close() {
    if (closed) {
      return;
    }
    closed = true;
    client.forget(this);
    if (lease != null) {
      lease.close();
      lease = null;
    }
  }
}
