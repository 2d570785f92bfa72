package dev.keysmith.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * Values per second from the Java client, one thread, beside a bare {@link AtomicLong} loop in the
 * same run: a {@link KeysmithSequence} (local block cache, background prefetch), time ids made
 * locally over a worker lease ({@link TimeIdGenerator}), and one request per value. Starts its own
 * {@code keysmith serve} on a temporary SQLite store ({@code $KEYSMITH_BIN}). Run with {@code
 * ./bench.sh [SECONDS]} (default 3 per row).
 */
public final class Bench {
  private Bench() {}

  static volatile long sink;

  /** Calls {@code take} in batches until {@code seconds} passed: values per second. */
  static double measure(double seconds, LongSupplier take, int batch) {
    long n = 0;
    long sum = 0;
    long t0 = System.nanoTime();
    long end = t0 + (long) (seconds * 1e9);
    long now;
    do {
      for (int i = 0; i < batch; i++) {
        sum += take.getAsLong();
      }
      n += batch;
      now = System.nanoTime();
    } while (now < end);
    sink = sum;
    return n / ((now - t0) / 1e9);
  }

  public static void main(String[] args) throws Exception {
    double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3.0;
    List<String[]> rows = new ArrayList<>();
    // --max-count 1000000: leases of up to 1M values, so that one row shows the local cost alone
    try (KeysmithServer server = KeysmithServer.start(null, "--max-count", "1000000");
        KeysmithClient c = KeysmithClient.of(server.url)) {
      String name = "bench/" + System.nanoTime();
      c.createSequence(name, new KeysmithClient.CreateOptions().block(1000));
      // warm up the JIT on every path first, then measure
      AtomicLong counter = new AtomicLong();
      KeysmithSequence seq = c.sequence(name);
      TimeIdGenerator ids = c.timeIds("bench-" + System.nanoTime());
      measure(0.5, counter::incrementAndGet, 10_000);
      measure(0.5, seq, 10_000);
      measure(0.5, ids, 10_000);

      double bare = measure(seconds, counter::incrementAndGet, 10_000);
      rows.add(new String[] {"bare loop: `AtomicLong.incrementAndGet()`", fmt(bare), "1.00", ""});
      long leases0 = seq.leases();
      double cached = measure(seconds, seq, 10_000);
      rows.add(new String[] {"`KeysmithSequence.next()` (local block, prefetch, adaptive)", fmt(cached),
          ratio(cached, bare), (seq.leases() - leases0) + " leases, final block " + seq.block()});
      seq.close();
      KeysmithSequence big = c.sequence(name, new KeysmithSequence.Options().block(1_000_000).maxBlock(1_000_000));
      measure(0.5, big, 10_000);
      long bigLeases0 = big.leases();
      double local = measure(seconds, big, 10_000);
      rows.add(new String[] {"`KeysmithSequence.next()`, leases of 1M values (`--max-count 1000000`)", fmt(local),
          ratio(local, bare), (big.leases() - bigLeases0) + " leases"});
      big.close();
      double timeIds = measure(seconds, ids, 10_000);
      rows.add(new String[] {"`TimeIdGenerator.next()` (snowflake ids over a worker lease)", fmt(timeIds),
          ratio(timeIds, bare), "worker " + ids.lease().worker() + "; the layout allows 4096 ids per ms"});
      double plain = measure(seconds, () -> c.next(name, 1)[0], 50);
      rows.add(new String[] {"`client.next(name, 1)` (one HTTP request per value)", fmt(plain),
          ratio(plain, bare), "keep-alive, HTTP/1.1"});
      ids.close();
    }
    System.out.printf("Java %s, %d cores, %.1f s per row, one thread, server %s (SQLite store)%n%n",
        System.getProperty("java.version"), Runtime.getRuntime().availableProcessors(), seconds,
        KeysmithServer.binary());
    System.out.println("| Java client | values/s | vs bare loop | run |");
    System.out.println("| --- | ---: | ---: | --- |");
    for (String[] r : rows) {
      System.out.println("| " + r[0] + " | " + r[1] + " | " + r[2] + " | " + r[3] + " |");
    }
  }

  static String fmt(double v) {
    return String.format("%,.0f", v);
  }

  static String ratio(double v, double base) {
    return String.format("%.3f", v / base);
  }
}
