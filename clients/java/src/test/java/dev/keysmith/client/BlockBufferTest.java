package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The block cache alone (no server): order, prefetch point, adaptive size, tails. */
class BlockBufferTest {
  static Lease lease(String token, long step, long... bounds) {
    Range[] rs = new Range[bounds.length / 2];
    for (int i = 0; i < rs.length; i++) {
      rs[i] = new Range(bounds[2 * i], bounds[2 * i + 1], step);
    }
    return new Lease("s", List.of(rs), token, step);
  }

  @Test
  void valuesComeInOrderAndPrefetchStartsAtAFifthLeft() {
    BlockBuffer b = new BlockBuffer(10, 1, 100, 1_000_000_000L);
    b.endFetch(lease("a", 1, 1, 11));
    for (long v = 1; v <= 7; v++) {
      assertEquals(v, b.take());
      assertFalse(b.wantsPrefetch(), "at " + v);
    }
    assertEquals(8, b.take());
    assertTrue(b.wantsPrefetch());
    assertArrayEquals(new long[] {9, 10}, b.take(2));
    assertEquals(-1, b.take());
  }

  @Test
  void takeNTakesAllOrNothingAcrossRanges() {
    BlockBuffer b = new BlockBuffer(10, 1, 100, 1_000_000_000L);
    b.endFetch(lease("a", 1, 1, 3, 10, 12));
    assertNull(b.take(5));
    assertEquals(4, b.available);
    assertArrayEquals(new long[] {1, 2, 10, 11}, b.take(4));
  }

  @Test
  void valuesAtOrBelowAnyReceivedAreDroppedSoValuesIncrease() {
    BlockBuffer b = new BlockBuffer(10, 1, 100, 1_000_000_000L);
    b.endFetch(lease("a", 1, 5, 10));
    b.endFetch(lease("b", 1, 1, 8));
    assertEquals(5, b.available);
    b.endFetch(lease("c", 3, 4, 20)); // 4, 7, 10, 13, 16, 19: above 9 only 10, 13, 16, 19
    assertArrayEquals(new long[] {5, 6, 7, 8, 9, 10, 13, 16, 19}, b.take(9));
  }

  @Test
  void theBlockDoublesWhenFastHalvesWhenSlowWithinBounds() {
    BlockBuffer b = new BlockBuffer(10, 5, 40, 1000);
    assertEquals(10, b.count(0, 0));
    assertEquals(20, b.count(0, 100));
    assertEquals(40, b.count(0, 200));
    assertEquals(40, b.count(0, 300));
    assertEquals(20, b.count(0, 10_000));
    assertEquals(10, b.count(0, 20_000));
    assertEquals(5, b.count(0, 30_000));
    assertEquals(5, b.count(0, 40_000));
    assertEquals(40, b.count(100, 40_001 + 1000)); // need, up to maxBlock
    assertThrows(IllegalArgumentException.class, () -> new BlockBuffer(1, 5, 4, 1));
  }

  @Test
  void tailsAreTheUnusedEndsOfLastRangesNewestFirstFromAValueOfTheLease() {
    BlockBuffer b = new BlockBuffer(10, 1, 100, 1_000_000_000L);
    b.endFetch(lease("a", 3, 1, 10, 20, 30)); // 1 4 7 | 20 23 26 29
    b.endFetch(lease("b", 3, 40, 50));
    assertEquals(1, b.take());
    List<Object[]> tails = b.tails();
    assertEquals(2, tails.size());
    assertEquals("b", tails.get(0)[0]);
    assertEquals(40L, tails.get(0)[1]);
    assertEquals("a", tails.get(1)[0]);
    assertEquals(20L, tails.get(1)[1]);
    assertEquals(0, b.available);
  }

  @Test
  void noOverflowAtTheTopOfTheRange() {
    BlockBuffer b = new BlockBuffer(10, 1, 100, 1_000_000_000L);
    long top = Long.MAX_VALUE;
    b.endFetch(lease("a", 1_000_000, top - 2_500_000, top));
    assertArrayEquals(new long[] {top - 2_500_000, top - 1_500_000, top - 500_000}, b.take(3));
    assertEquals(-1, b.take());
  }
}
