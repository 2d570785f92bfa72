package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Worker leases and time ids: one worker id per holder, renewals, loss, several JVMs. */
class WorkerTest {
  static KeysmithServer server;
  static KeysmithClient client;

  @BeforeAll
  static void start() throws Exception {
    server = KeysmithServer.start(null);
    client = KeysmithClient.of(server.url);
  }

  @AfterAll
  static void stop() throws Exception {
    client.close();
    server.close();
  }

  static String group() {
    return "workers/" + UUID.randomUUID().toString().substring(0, 12);
  }

  @Test
  void leaseRenewReleaseAndAFullGroup() {
    String g = group();
    WorkerLeaseInfo a = client.leaseWorker(g, 60_000L, 2L);
    WorkerLeaseInfo b = client.leaseWorker(g, 60_000L, 2L);
    assertEquals(Set.of(0L, 1L), Set.of(a.worker(), b.worker()));
    KeysmithException.Conflict full = assertThrows(KeysmithException.Conflict.class, () -> client.leaseWorker(g, null, 2L));
    assertTrue(full.getMessage().contains(g), full.getMessage());
    WorkerLeaseInfo r = client.renewWorker(g, a.token());
    assertEquals(a.worker(), r.worker());
    assertEquals(a.fence(), r.fence());
    assertTrue(client.releaseWorker(g, r.token()));
    WorkerLeaseInfo c = client.leaseWorker(g, null, 2L);
    assertEquals(a.worker(), c.worker());
    assertEquals(a.fence() + 1, c.fence());
    assertTrue(c.notBeforeMs() >= r.untilMs());
    assertThrows(KeysmithException.Conflict.class, () -> client.renewWorker(g, r.token()));
    assertFalse(client.releaseWorker(g, r.token()));
    assertThrows(KeysmithException.BadRequest.class, () -> client.leaseWorker(g, 0L, null));
    List<WorkerInfo> listed = client.listWorkers(g);
    assertEquals(2, listed.size());
    assertFalse(listed.toString().contains(c.token()), "a listing shows no token");
    assertFalse(c.toString().contains(c.token()), "toString shows no token");
  }

  @Test
  void leasesOfSeparateClientsInThreadsNeverShareAndRenewInTheBackground() throws Exception {
    String g = group();
    List<KeysmithClient> clients = new ArrayList<>();
    List<WorkerLease> leases = Collections.synchronizedList(new ArrayList<>());
    try {
      for (int i = 0; i < 6; i++) {
        clients.add(KeysmithClient.of(server.url));
      }
      Checks.threads(6, i -> {
        // a TTL that a loaded machine's scheduling delays cannot outrun
        leases.add(clients.get(i).workerLease(g, new WorkerLease.Options().ttl(Duration.ofMillis(3000)).max(8)));
        return List.of();
      });
      Set<Long> workers = new HashSet<>();
      leases.forEach(l -> workers.add(l.worker()));
      assertEquals(6, workers.size(), "six leases, six worker ids: " + leases);
      List<Long> firstUntil = new ArrayList<>();
      leases.forEach(l -> firstUntil.add(l.untilMs()));
      Checks.eventually(() -> {
        for (WorkerLease l : leases) {
          assertNull(l.lostReason());
          if (l.renewals() < 3) {
            return false;
          }
        }
        return true;
      }, "three renewals each");
      for (int i = 0; i < leases.size(); i++) {
        WorkerLease l = leases.get(i);
        assertTrue(l.untilMs() > firstUntil.get(i), "renewals move the window");
      }
    } finally {
      leases.forEach(WorkerLease::close);
      clients.forEach(KeysmithClient::close);
    }
    assertFalse(leases.get(0).usable());
    assertTrue(client.listWorkers(g).stream().noneMatch(WorkerInfo::held), "closed leases are released");
  }

  @Test
  void timeIdsAreMadeLocallyWithTheLeasedWorkerAndDecodeOnTheServer() {
    String g = group();
    try (TimeIdGenerator ids = client.timeIds(g)) {
      assertNull(ids.lease(), "no lease before the first id");
      assertTrue(client.listWorkers(g).isEmpty());
      long prev = ids.next();
      WorkerLease lease = ids.lease();
      assertNotNull(lease);
      for (int i = 0; i < 100_000; i++) {
        long id = ids.getAsLong();
        assertTrue(id > prev, "ids increase");
        prev = id;
      }
      DecodedId d = client.decodeId(prev);
      assertEquals(lease.worker(), d.worker());
      assertEquals(IdLayout.SNOWFLAKE.worker(prev), d.worker());
      assertEquals(IdLayout.SNOWFLAKE.timeMs(prev), d.timeMs());
      assertTrue(d.timeMs() >= lease.notBeforeMs() && d.timeMs() < lease.untilMs());
    }
  }

  @Test
  void threadsSharingOneGeneratorGetUniqueIncreasingIdsUnderOneWorkerId() throws Exception {
    String g = group();
    try (TimeIdGenerator ids = client.timeIds(g)) {
      List<List<Long>> got = Checks.threads(4, i -> {
        List<Long> vs = new ArrayList<>();
        for (int k = 0; k < 20_000; k++) {
          vs.add(ids.next());
        }
        return vs;
      });
      for (List<Long> vs : got) {
        Checks.increasing(vs, "one thread's ids");
      }
      assertEquals(80_000, Checks.unique(got));
      List<WorkerInfo> held = client.listWorkers(g);
      assertEquals(1, held.size(), "one lease for the process: " + held);
      assertEquals(ids.lease().worker(), held.get(0).worker());
    }
  }

  @Test
  void aLostLeaseStopsIssuingAtOnceAndTheNextCallLeasesAnew(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
    KeysmithServer s = new KeysmithServer(dir.resolve("k.db"), null, List.of()).start(0);
    List<KeysmithException> lost = Collections.synchronizedList(new ArrayList<>());
    try (KeysmithClient c = KeysmithClient.builder().urls(s.url).deadline(Duration.ofMillis(300)).build();
        TimeIdGenerator ids = c.timeIds(group(), IdLayout.SNOWFLAKE,
            new WorkerLease.Options().ttl(Duration.ofMillis(600)).onLost(lost::add))) {
      Set<Long> seen = new HashSet<>();
      for (int i = 0; i < 1000; i++) {
        assertTrue(seen.add(ids.next()));
      }
      WorkerLease lease = ids.lease();
      s.kill();
      Checks.eventually(lease::lost, "the lease reported lost");
      assertFalse(lease.usable(), "unusable from the moment it is lost");
      Checks.eventually(() -> !lost.isEmpty(), "onLost called");
      assertEquals(1, lost.size());
      assertSame(lease.lostReason(), lost.get(0));
      assertFalse(lease.usable());
      KeysmithException.LeaseLost e = assertThrows(KeysmithException.LeaseLost.class, ids::next);
      assertSame(lease.lostReason(), e.getCause());
      assertNull(ids.lease());
      s.start(s.port);
      // the next call leases anew: another worker id, or the same one above the lost lease's window
      // (the client may wait out its backoff from the outage first: poll, bounded)
      long[] got = {-1};
      Checks.eventually(() -> {
        try {
          got[0] = ids.next();
          return true;
        } catch (KeysmithException.Unavailable notYet) {
          return false;
        }
      }, "an id under a new lease once the server is back");
      long id = got[0];
      assertTrue(seen.add(id), "no id twice");
      WorkerLease next = ids.lease();
      if (next.worker() == lease.worker()) {
        assertTrue(next.fence() > lease.fence());
        assertTrue(next.notBeforeMs() >= lease.untilMs());
      }
    } finally {
      s.close();
    }
  }

  @Test
  void severalJvmsAndThisOneHoldLeasesAtOnceNoWorkerIdAndNoIdTwice() throws Exception {
    String g = group();
    int children = 4;
    int count = 20_000;
    try (TimeIdGenerator mine = client.timeIds(g)) {
      List<Long> all = new ArrayList<>();
      all.add(mine.next());
      List<Long> workers = new ArrayList<>(List.of(mine.lease().worker()));
      String java = ProcessHandle.current().info().command().orElse("java");
      List<Process> procs = new ArrayList<>();
      for (int i = 0; i < children; i++) {
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
            IdChild.class.getName(), server.url, g, Integer.toString(count));
        pb.redirectError(ProcessBuilder.Redirect.INHERIT);
        procs.add(pb.start());
      }
      for (int i = 0; i < 10_000; i++) {
        all.add(mine.next());
      }
      for (Process p : procs) {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.US_ASCII));
        String line = r.readLine();
        assertNotNull(line, "a child printed nothing");
        assertTrue(line.startsWith("worker "), line);
        workers.add(Long.parseLong(line.substring(7)));
        int n = 0;
        List<Long> its = new ArrayList<>();
        while (!"end".equals(line = r.readLine())) {
          assertNotNull(line, "a child stopped early");
          its.add(Long.parseLong(line));
          n++;
        }
        assertEquals(count, n);
        Checks.increasing(its, "one child's ids");
        all.addAll(its);
      }
      // every child still holds its lease: now let them go
      for (Process p : procs) {
        p.getOutputStream().close();
        assertEquals(0, p.waitFor(), "a child failed");
      }
      assertEquals(children + 1, new HashSet<>(workers).size(), "one worker id per process: " + workers);
      Checks.unique(List.of(all));
      assertEquals(1 + 10_000 + children * count, all.size());
    }
  }
}
