package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Sequence handles against a real server: the cache, prefetch, threads, close, exhaustion. */
class SequenceTest {
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

  @Test
  void manyThreadsShareOneSequenceAndNoValueRepeats() throws Exception {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(10));
    KeysmithSequence seq = client.sequence(name);
    List<List<Long>> got = Checks.threads(8, i -> {
      List<Long> vs = new ArrayList<>();
      for (int k = 0; k < 1500; k++) {
        vs.add(seq.next());
      }
      return vs;
    });
    for (List<Long> vs : got) {
      Checks.increasing(vs, "one thread's values");
    }
    assertEquals(8 * 1500, Checks.unique(got));
    assertTrue(seq.leases() > 1, "leases: " + seq.leases());
    seq.close();
  }

  @Test
  void theNextLeaseIsPrefetchedInTheBackgroundWhenAFifthIsLeft() throws Exception {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(10));
    try (KeysmithSequence seq = client.sequence(name, new KeysmithSequence.Options().fixed(10))) {
      assertArrayEquals(LongStream.rangeClosed(1, 8).toArray(), seq.next(8));
      assertEquals(1, seq.leases());
      // 2 of 10 left: the next lease is reserved without any caller waiting for it
      assertEquals(9, seq.next());
      Checks.eventually(() -> seq.leases() == 2, "the prefetched lease arrives");
      assertEquals(11, seq.available());
      long[] rest = seq.next(11);
      assertArrayEquals(LongStream.rangeClosed(10, 20).toArray(), rest);
    }
  }

  @Test
  void severalHandlesNextNAndTheLongSupplierApi() throws Exception {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(5));
    List<KeysmithSequence> seqs = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      seqs.add(client.sequence(name, new KeysmithSequence.Options().minBlock(1).maxBlock(50)));
    }
    List<List<Long>> got = Checks.threads(6, i -> {
      KeysmithSequence seq = seqs.get(i % 3);
      List<Long> vs = new ArrayList<>();
      for (int k = 0; k < 200; k++) {
        if (k % 10 == 0) {
          for (long v : seq.next(7)) {
            vs.add(v);
          }
        } else {
          vs.add(LongStream.generate(seq).limit(1).sum());
        }
      }
      return vs;
    });
    for (List<Long> vs : got) {
      Checks.increasing(vs, "one thread's values");
    }
    assertEquals(6 * (180 + 20 * 7), Checks.unique(got));
    seqs.forEach(KeysmithSequence::close);
  }

  @Test
  void closeHandsTheUnusedTailBack() {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(10));
    KeysmithSequence seq = client.sequence(name);
    assertArrayEquals(new long[] {1, 2, 3}, new long[] {seq.next(), seq.next(), seq.next()});
    seq.close();
    Range back = seq.released();
    assertNotNull(back);
    assertEquals(4, back.start());
    assertEquals(11, back.end());
    assertEquals(4, client.reserve(name, 5).ranges().get(0).start());
    assertThrows(KeysmithException.Closed.class, seq::next);
    seq.close(); // idempotent
  }

  @Test
  void aTailStaysAGapWhenSomeoneReservedSince() {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(10));
    KeysmithSequence seq = client.sequence(name);
    assertEquals(1, seq.next());
    Lease other = client.reserve(name, 10);
    seq.close();
    assertNull(seq.released());
    long after = other.ranges().get(other.ranges().size() - 1).end();
    assertEquals(after, client.reserve(name, 1).ranges().get(0).start());
  }

  @Test
  void exhaustionIsAClearErrorAtTheI64Maximum() {
    String name = KeysmithServer.name();
    long top = Long.MAX_VALUE - 1;
    client.createSequence(name, new KeysmithClient.CreateOptions().start(top - 9).max(top).block(4));
    try (KeysmithSequence seq = client.sequence(name)) {
      assertArrayEquals(LongStream.range(top - 9, top).toArray(), seq.next(9));
      assertEquals(top, seq.next());
      KeysmithException.Exhausted e = assertThrows(KeysmithException.Exhausted.class, seq::next);
      assertEquals(409, e.status());
      assertEquals("exhausted", e.code());
      assertTrue(e.getMessage().contains(name), e.getMessage());
      // a failed call takes nothing and the handle stays usable for the error again
      assertThrows(KeysmithException.Exhausted.class, seq::next);
    }
    assertThrows(KeysmithException.Exhausted.class, () -> client.next(name, 1));
  }

  @Test
  void aResidueClassHandsOutOnlyItsValuesAndItsTailGoesBackOnAValue() {
    String name = KeysmithServer.name();
    SequenceInfo info = client.createSequence(name, new KeysmithClient.CreateOptions().residue(3, 1).block(4));
    assertEquals(3L, info.increment());
    assertEquals(1L, info.offset());
    KeysmithSequence seq = client.sequence(name);
    long[] vs = seq.next(10);
    for (int i = 0; i < vs.length; i++) {
      assertEquals(1, Math.floorMod(vs[i], 3), "value " + vs[i]);
      if (i > 0) {
        assertTrue(vs[i] > vs[i - 1]);
      }
    }
    seq.close();
    Range back = seq.released();
    if (back != null) {
      assertEquals(1, Math.floorMod(back.start(), 3));
      assertTrue(back.start() > vs[vs.length - 1]);
    }
  }

  @Test
  void formattedNumbersAreReadAsText() {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().period("year").format("INV-{period}-{n:04}"));
    List<String> got = client.nextNumbers(name, 2);
    assertEquals(2, got.size());
    assertTrue(got.get(0).matches("INV-\\d{4}-0001"), got.toString());
    NumberParts parts = client.parse(name, got.get(1));
    assertEquals(2, parts.n());
    assertThrows(KeysmithException.BadRequest.class, () -> client.parse(name, "garbage"));
    assertThrows(KeysmithException.WrongKind.class, () -> client.next(name, 1));
  }

  @Test
  void anUnknownSequenceIsNotFound() {
    String name = KeysmithServer.name();
    try (KeysmithSequence seq = client.sequence(name)) {
      KeysmithException.NotFound e = assertThrows(KeysmithException.NotFound.class, seq::next);
      assertEquals(404, e.status());
    }
  }

  /** nextRange takes n consecutive values at once; when the block holds fewer they stay a gap. */
  @Test
  void nextRangeTakesConsecutiveValuesFromOneBlock() {
    String name = KeysmithServer.name();
    client.createSequence(name, new KeysmithClient.CreateOptions().block(100));
    try (KeysmithSequence seq = client.sequence(name, new KeysmithSequence.Options().fixed(100)
        .target(java.time.Duration.ofHours(1)))) {
      assertEquals(1, seq.next());
      assertEquals(new Range(2, 12, 1), seq.nextRange(10));
      // 89 left in the block: the range comes whole from the next lease
      Range r = seq.nextRange(95);
      assertEquals(95, r.size());
      assertTrue(r.start() > 11, r.toString());
      assertTrue(seq.next() > r.end() - 1, "next() after the range is above it");
      for (long n : new long[] {0, -1, 101}) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> seq.nextRange(n));
        assertTrue(e.getMessage().contains("maxBlock"), e.getMessage());
      }
      seq.close();
      assertThrows(KeysmithException.Closed.class, () -> seq.nextRange(1));
    }
  }
}
