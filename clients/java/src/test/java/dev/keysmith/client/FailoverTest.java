package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.ServerSocket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Servers that die: a dead URL in the list, one of two servers over one store SIGKILLed mid-run. */
class FailoverTest {
  static String deadUrl() throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      return "http://127.0.0.1:" + s.getLocalPort();
    }
  }

  @Test
  void aDeadUrlFirstInTheList() throws Exception {
    try (KeysmithServer server = KeysmithServer.start(null);
        KeysmithClient c = KeysmithClient.builder().urls(deadUrl(), server.url).build()) {
      String name = KeysmithServer.name();
      c.createSequence(name);
      List<Long> vs = new ArrayList<>();
      try (KeysmithSequence seq = c.sequence(name, new KeysmithSequence.Options().block(10))) {
        for (long v : seq.next(25)) {
          vs.add(v);
        }
      }
      for (long v : c.next(name, 5)) {
        vs.add(v);
      }
      Checks.unique(List.of(vs));
      // only the first call tried the dead URL; the others went to the server that answered
      assertEquals(1, c.unreachableCount());
    }
  }

  @Test
  void noLiveServerIsUnavailableAfterTheDeadline() throws Exception {
    try (KeysmithClient c = KeysmithClient.builder().urls(deadUrl(), deadUrl()).deadline(Duration.ofMillis(300)).build()) {
      KeysmithException.Unavailable e = assertThrows(KeysmithException.Unavailable.class, () -> c.next("x", 1));
      assertEquals(0, e.status());
      assertTrue(e.getMessage().contains("127.0.0.1"), e.getMessage());
    }
  }

  /** Threads on a sequence handle (two per client) and on plain next calls (one per client). */
  static final class Workload {
    final AtomicBoolean stop = new AtomicBoolean();
    final AtomicLong total = new AtomicLong();
    final List<List<Long>> perHandle = Collections.synchronizedList(new ArrayList<>());
    final List<List<Long>> plain = Collections.synchronizedList(new ArrayList<>());
    final List<Throwable> errors = Collections.synchronizedList(new ArrayList<>());
    final List<Thread> threads = new ArrayList<>();
    final List<KeysmithSequence> handles = new ArrayList<>();

    Workload(List<KeysmithClient> clients, String name) {
      for (KeysmithClient c : clients) {
        KeysmithSequence seq = c.sequence(name, new KeysmithSequence.Options().block(20).maxBlock(200));
        handles.add(seq);
        for (int t = 0; t < 2; t++) {
          List<Long> mine = new ArrayList<>();
          perHandle.add(mine);
          threads.add(new Thread(() -> {
            try {
              while (!stop.get()) {
                mine.add(seq.next());
                total.incrementAndGet();
              }
            } catch (Throwable e) {
              errors.add(e);
            }
          }));
        }
        List<Long> mine = new ArrayList<>();
        plain.add(mine);
        threads.add(new Thread(() -> {
          try {
            while (!stop.get()) {
              for (long v : c.next(name, 2)) {
                mine.add(v);
                total.incrementAndGet();
              }
            }
          } catch (Throwable e) {
            errors.add(e);
          }
        }));
      }
      threads.forEach(Thread::start);
    }

    /** Waits until {@code n} more values than now were handed out (or a worker failed). */
    void more(long n, String what) throws InterruptedException {
      long target = total.get() + n;
      Checks.eventually(() -> total.get() >= target || !errors.isEmpty(), what);
    }

    /** Stops, closes the handles, checks: no failure, no value twice, each thread's handle values increasing. */
    void stopAndCheck() throws InterruptedException {
      stop.set(true);
      for (Thread t : threads) {
        t.join();
      }
      assertTrue(errors.isEmpty(), "a worker failed: " + errors);
      handles.forEach(KeysmithSequence::close);
      List<List<Long>> all = new ArrayList<>(perHandle);
      all.addAll(plain);
      Checks.unique(all);
      for (List<Long> vs : perHandle) {
        Checks.increasing(vs, "one thread's values of one handle");
      }
    }
  }

  @Test
  void twoServersOverOneStoreTheFirstKilledMidRun(@TempDir Path dir) throws Exception {
    KeysmithServer a = new KeysmithServer(dir.resolve("k.db"), null, List.of()).start(0);
    KeysmithServer b = new KeysmithServer(dir.resolve("k.db"), null, List.of()).start(0);
    String name = KeysmithServer.name();
    List<String> urls = List.of(a.url, b.url);
    List<KeysmithClient> clients = new ArrayList<>();
    try {
      try (KeysmithClient setup = KeysmithClient.builder().urls(urls).build()) {
        setup.createSequence(name, new KeysmithClient.CreateOptions().block(10));
      }
      for (int i = 0; i < 2; i++) {
        clients.add(KeysmithClient.builder().urls(urls).build());
      }
      Workload w = new Workload(clients, name);
      w.more(3000, "3000 values before the kill");
      a.kill();
      w.more(3000, "3000 values after the kill");
      w.stopAndCheck();
      for (KeysmithClient c : clients) {
        assertTrue(c.unreachableCount() > 0, "the outage was seen and failed over");
      }
    } finally {
      clients.forEach(KeysmithClient::close);
      a.kill();
      b.close();
    }
  }

  @Test
  void oneServerKilledAndRestartedOnItsPortMidRunNoCallFails(@TempDir Path dir) throws Exception {
    KeysmithServer s = new KeysmithServer(dir.resolve("k.db"), null, List.of()).start(0);
    String name = KeysmithServer.name();
    List<KeysmithClient> clients = new ArrayList<>();
    try {
      for (int i = 0; i < 2; i++) {
        clients.add(KeysmithClient.of(s.url));
      }
      clients.get(0).createSequence(name, new KeysmithClient.CreateOptions().block(10));
      Workload w = new Workload(clients, name);
      w.more(2000, "2000 values before the restart");
      s.kill();
      s.start(s.port); // the same store: pooled connections to the old process are dead
      w.more(2000, "2000 values after the restart");
      w.stopAndCheck();
    } finally {
      clients.forEach(KeysmithClient::close);
      s.close();
    }
  }
}
