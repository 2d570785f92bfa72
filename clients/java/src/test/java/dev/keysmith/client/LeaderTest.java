package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Leader-ordered sequences: a client of a follower follows its 421 to the leader. */
class LeaderTest {
  @Test
  void aClientOfAFollowerGetsValuesFromTheLeaderInCallOrder() throws Exception {
    try (KeysmithServer a = KeysmithServer.start(null);
        KeysmithServer b = new KeysmithServer(a.store, null, List.of()).start(0);
        KeysmithClient ca = KeysmithClient.of(a.url);
        KeysmithClient cb = KeysmithClient.of(b.url)) {
      ca.createSequence("led", new KeysmithClient.CreateOptions().order("leader"));
      assertArrayEquals(new long[] {1, 2}, ca.next("led", 2)); // a leads from here on
      HttpResponse<String> r = HttpClient.newHttpClient().send(
          HttpRequest.newBuilder(URI.create(b.url + "/v1/sequences/led/next"))
              .POST(HttpRequest.BodyPublishers.noBody())
              .build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(421, r.statusCode());
      assertEquals(a.url, r.headers().firstValue("Keysmith-Leader").orElse(null));
      long prev = 2;
      for (int i = 0; i < 5; i++) {
        long v = cb.next("led", 1)[0];
        assertTrue(v > prev, v + " after " + prev);
        prev = v;
      }
    }
  }
}
