package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CyclicBarrier;
import java.util.function.BooleanSupplier;

/** What several tests check: no value twice, values increasing, threads started together. */
final class Checks {
  private Checks() {}

  interface Work {
    List<Long> run(int i) throws Exception;
  }

  /** Runs {@code work(i)} in {@code n} threads started together; their values; rethrows failures. */
  static List<List<Long>> threads(int n, Work work) throws Exception {
    List<List<Long>> out = new ArrayList<>();
    List<Throwable> errors = new ArrayList<>();
    CyclicBarrier start = new CyclicBarrier(n);
    List<Thread> ts = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      out.add(null);
      int k = i;
      ts.add(new Thread(() -> {
        try {
          start.await();
          List<Long> got = work.run(k);
          synchronized (out) {
            out.set(k, got);
          }
        } catch (Throwable e) {
          synchronized (errors) {
            errors.add(e);
          }
        }
      }));
    }
    ts.forEach(Thread::start);
    for (Thread t : ts) {
      t.join();
    }
    if (!errors.isEmpty()) {
      AssertionError e = new AssertionError("a thread failed: " + errors.get(0), errors.get(0));
      throw e;
    }
    return out;
  }

  static void increasing(List<Long> vs, String what) {
    for (int i = 1; i < vs.size(); i++) {
      if (vs.get(i) <= vs.get(i - 1)) {
        fail(what + ": " + vs.get(i) + " after " + vs.get(i - 1) + " at " + i);
      }
    }
  }

  /** Every value of every list once; the count of all. */
  static int unique(List<List<Long>> lists) {
    Set<Long> seen = new HashSet<>();
    int n = 0;
    for (List<Long> vs : lists) {
      for (long v : vs) {
        n++;
        if (!seen.add(v)) {
          fail("value " + v + " was handed out twice");
        }
      }
    }
    assertEquals(n, seen.size());
    return n;
  }

  /** Polls {@code cond} until true: a bound on a hang (60 s), not a timing. */
  static void eventually(BooleanSupplier cond, String what) throws InterruptedException {
    long until = System.nanoTime() + 60_000_000_000L;
    while (!cond.getAsBoolean()) {
      assertTrue(System.nanoTime() < until, "never: " + what);
      Thread.sleep(5);
    }
  }
}
