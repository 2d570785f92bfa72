package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The plain calls, error mapping and the bearer token, against a real server. */
class RoutesTest {
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
  void sequenceRoutes() {
    String name = KeysmithServer.name();
    SequenceInfo info = client.createSequence(name, new KeysmithClient.CreateOptions().start(10).block(7));
    assertEquals(name, info.name());
    assertEquals(10, info.start());
    assertEquals(7, info.block());
    assertArrayEquals(new long[] {10, 11, 12}, client.next(name, 3));
    assertTrue(client.getSequence(name).next() > 12);
    assertTrue(client.listSequences().stream().anyMatch(s -> s.name().equals(name)));
    Lease lease = client.reserve(name, 5);
    assertEquals(5, lease.size());
    Range back = client.release(lease, lease.ranges().get(0).start() + 2);
    assertNotNull(back);
    assertEquals(lease.ranges().get(0).start() + 2, back.start());
    SequenceInfo altered = client.alter(name, null, null, 50L);
    assertEquals(50, altered.block());
    assertThrows(KeysmithException.BadRequest.class, () -> client.alter(name, 1L, null, null));
    client.dropSequence(name);
    assertThrows(KeysmithException.NotFound.class, () -> client.getSequence(name));
  }

  @Test
  void opaqueAndEncodedSequencesDecode() {
    String opaque = KeysmithServer.name();
    client.createSequence(opaque, new KeysmithClient.CreateOptions().opaque(true).jsSafe(true));
    long[] vs = client.next(opaque, 20);
    Set<Long> seen = new HashSet<>();
    long increasing = 0;
    for (int i = 0; i < vs.length; i++) {
      assertTrue(seen.add(vs[i]), "no value twice");
      assertTrue(vs[i] >= 1 && vs[i] <= (1L << 53) - 1, "inside the JavaScript-safe range");
      assertEquals(i + 1, client.decode(opaque, vs[i]).counter(), "decodes to its counter");
      if (i > 0 && vs[i] > vs[i - 1]) {
        increasing++;
      }
    }
    assertTrue(increasing < vs.length - 1, "opaque values do not simply increase");

    String encoded = KeysmithServer.name();
    client.createSequence(encoded, new KeysmithClient.CreateOptions().encoding("base32", "ord"));
    List<String> texts = client.nextNumbers(encoded, 3);
    for (int i = 0; i < texts.size(); i++) {
      assertTrue(texts.get(i).startsWith("ord_"), texts.get(i));
      assertEquals(i + 1, client.decode(encoded, texts.get(i)).counter());
    }
    assertTrue(texts.get(0).compareTo(texts.get(1)) < 0, "fixed width: sorts as the numbers");
    KeysmithException.BadRequest bad =
        assertThrows(KeysmithException.BadRequest.class, () -> client.decode(encoded, "inv_" + texts.get(0).substring(4)));
    assertTrue(bad.getMessage().contains("prefix"), bad.getMessage());
  }

  @Test
  void errorsAreMappedWithStatusAndCode() {
    String name = KeysmithServer.name();
    KeysmithException.NotFound nf = assertThrows(KeysmithException.NotFound.class, () -> client.next(name, 1));
    assertEquals(404, nf.status());
    assertEquals("not_found", nf.code());
    assertTrue(nf.getMessage().contains(name), nf.getMessage());
    client.createSequence(name, new KeysmithClient.CreateOptions().max(3));
    assertThrows(KeysmithException.AlreadyExists.class, () -> client.createSequence(name));
    assertThrows(KeysmithException.BadRequest.class, () -> client.next(name, 0));
    assertThrows(KeysmithException.TooLarge.class, () -> client.next(name, 1_000_000_000L));
    assertArrayEquals(new long[] {1, 2, 3}, client.next(name, 3));
    assertThrows(KeysmithException.Exhausted.class, () -> client.next(name, 1));
    assertThrows(KeysmithException.BadRequest.class, () -> client.createSequence("bad name with spaces"));
  }

  @Test
  void poolsTicketsAndServerIds() {
    String pool = KeysmithServer.name();
    PoolInfo p = client.createPool(pool, 5, 100L);
    assertEquals(5, p.size());
    Set<Long> taken = new HashSet<>();
    for (long v : client.poolNext(pool, 4)) {
      assertTrue(v >= 100);
      assertTrue(taken.add(v));
    }
    assertEquals(4L, client.getPool(pool).taken());
    assertTrue(client.listPools().stream().anyMatch(q -> q.name().equals(pool)));
    client.dropPool(pool);
    assertThrows(KeysmithException.NotFound.class, () -> client.poolNext(pool, 1));

    List<String> names = client.counterNext(3);
    assertEquals(3, names.size());
    assertTrue(names.get(0).startsWith("testhost/"), names.toString());
    assertTrue(client.status().isObject());

    String inv = KeysmithServer.name();
    client.createSequence(inv, new KeysmithClient.CreateOptions().gapless(true));
    Ticket t = client.takeTicket(inv, 60L);
    assertEquals("1", t.value());
    assertEquals("1", client.commitTicket(inv, t.ticket()));
    assertThrows(KeysmithException.TicketRefused.class, () -> client.commitTicket(inv, t.ticket()));
    Ticket t2 = client.takeTicket(inv, 60L);
    assertEquals("2", client.releaseTicket(inv, t2.ticket()));
    assertEquals("2", client.takeTicket(inv, 60L).value());
    assertThrows(KeysmithException.WrongKind.class, () -> client.next(inv, 1));

    long[] ids = client.nextIds(3);
    assertTrue(ids[0] < ids[1] && ids[1] < ids[2]);
    DecodedId d = client.decodeId(ids[0]);
    assertEquals(ids[0], d.id());
    assertTrue(Math.abs(d.timeMs() - System.currentTimeMillis()) < 3_600_000, "time " + d.time());

    java.util.UUID[] uuids = client.nextUuids(200);
    assertEquals(200, uuids.length);
    for (int i = 0; i < uuids.length; i++) {
      java.util.UUID u = uuids[i];
      assertEquals(7, u.version(), u.toString());
      assertEquals(2, u.variant(), u.toString());
      assertEquals(d.worker(), (u.getLeastSignificantBits() >>> 40) & 0x3fffff, u.toString());
      if (i > 0) {
        assertTrue(uuids[i - 1].toString().compareTo(u.toString()) < 0, uuids[i - 1] + " then " + u);
      }
    }
    assertThrows(KeysmithException.BadRequest.class, () -> client.nextUuids(0));
  }

  @Test
  void aTokenProtectedServerAnswers401WithoutTheToken() throws Exception {
    try (KeysmithServer s = KeysmithServer.start("s3cret");
        KeysmithClient anon = KeysmithClient.of(s.url);
        KeysmithClient wrong = KeysmithClient.builder().urls(s.url).token("not-the-token-4711").build();
        KeysmithClient ok = KeysmithClient.builder().urls(s.url).token("s3cret").build()) {
      String name = KeysmithServer.name();
      // /healthz pings the store: a principal only, on a server with tokens.
      assertThrows(KeysmithException.Unauthorized.class, anon::health);
      assertEquals("ok", ok.health().path("status").asText());
      for (KeysmithClient c : new KeysmithClient[] {anon, wrong}) {
        KeysmithException.Unauthorized e =
            assertThrows(KeysmithException.Unauthorized.class, () -> c.createSequence(name));
        assertEquals(401, e.status());
        assertFalse(e.getMessage().contains("4711"), "the token must not be echoed: " + e.getMessage());
        try (KeysmithSequence seq = c.sequence(name)) {
          assertThrows(KeysmithException.Unauthorized.class, seq::next);
        }
      }
      ok.createSequence(name);
      try (KeysmithSequence seq = ok.sequence(name, new KeysmithSequence.Options().block(5))) {
        assertArrayEquals(new long[] {1, 2, 3}, seq.next(3));
      }
    }
  }

  @Test
  void badClientSettingsSayWhich() {
    IllegalArgumentException none = assertThrows(IllegalArgumentException.class, () -> KeysmithClient.builder().build());
    assertTrue(none.getMessage().contains("urls"), none.getMessage());
    IllegalArgumentException url = assertThrows(IllegalArgumentException.class, () -> KeysmithClient.of("ftp://x"));
    assertTrue(url.getMessage().contains("ftp://x"), url.getMessage());
    IllegalArgumentException tok = assertThrows(IllegalArgumentException.class,
        () -> KeysmithClient.builder().urls("http://127.0.0.1:1").token("a b").build());
    assertTrue(tok.getMessage().contains("token"), tok.getMessage());
  }
}
