package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/** No exception says a secret: a password in a server URL, or a worker lease's token. */
class RedactionTest {
  static final String PASSWORD = "s3cretPassw0rd";
  static final String TOKEN = "wl1.SECRETt0kenNeverInErrors";

  /** Everything an exception can say: its message, toString, and the whole printed trace with causes. */
  static String said(Throwable t) {
    StringWriter w = new StringWriter();
    t.printStackTrace(new PrintWriter(w));
    StringBuilder b = new StringBuilder(w.toString());
    for (Throwable c = t; c != null; c = c.getCause()) {
      b.append('\n').append(c).append('\n').append(c.getMessage());
      if (c instanceof KeysmithException k) {
        b.append('\n').append(k.url());
      }
    }
    return b.toString();
  }

  static void saysNot(String secret, Throwable t, String what) {
    String s = said(t);
    assertFalse(s.contains(secret), what + ": the exception says the secret:\n" + s);
  }

  @Test
  void urlsWithAUserOrPasswordAreRefused() {
    for (String u :
        List.of(
            "http://user:" + PASSWORD + "@127.0.0.1:7878",
            "https://user:" + PASSWORD + "@keysmith.example:7878/",
            "http://" + PASSWORD + "@127.0.0.1:7878",
            "http://user:" + PASSWORD + "@not_a_host:7878")) {
      IllegalArgumentException e =
          assertThrows(
              IllegalArgumentException.class,
              () -> KeysmithClient.builder().urls("http://127.0.0.1:7878", u).build(),
              u);
      assertTrue(e.getMessage().contains("urls[1] holds a user or password"), e.getMessage());
      assertTrue(e.getMessage().contains("token("), e.getMessage());
      saysNot(PASSWORD, e, u);
    }
    // URLs refused for other reasons do not say the password either
    for (String u :
        List.of("ftp://user:" + PASSWORD + "@127.0.0.1:21", "http://user:" + PASSWORD + " x@127.0.0.1:7878")) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> KeysmithClient.of(u), u);
      assertTrue(e.getMessage().contains("urls[0]"), e.getMessage());
      saysNot(PASSWORD, e, u);
    }
    // without an "@", the URL is said (what to fix)
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> KeysmithClient.of("ftp://127.0.0.1:21"));
    assertTrue(e.getMessage().contains("ftp://127.0.0.1:21"), e.getMessage());
  }

  /** renewWorker's and releaseWorker's exceptions (or null when one succeeded) with the secret token. */
  static Map<String, Throwable> renewAndRelease(String url) {
    Map<String, Throwable> out = new LinkedHashMap<>();
    try (KeysmithClient c =
        KeysmithClient.builder()
            .urls(url)
            .deadline(Duration.ofMillis(400))
            .connectTimeout(Duration.ofMillis(200))
            .requestTimeout(Duration.ofMillis(200))
            .build()) {
      Map<String, Supplier<Object>> calls = new LinkedHashMap<>();
      calls.put("renew", () -> c.renewWorker("g/1", TOKEN));
      calls.put("release", () -> c.releaseWorker("g/1", TOKEN));
      calls.forEach(
          (what, call) -> {
            try {
              call.get();
              out.put(what, null);
            } catch (RuntimeException e) {
              out.put(what, e);
            }
          });
    }
    return out;
  }

  static void withServer(HttpHandler h, java.util.function.Consumer<String> test) throws IOException {
    HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    s.createContext("/", h);
    ExecutorService handlers = Executors.newCachedThreadPool();
    s.setExecutor(handlers);
    s.start();
    try {
      test.accept("http://127.0.0.1:" + s.getAddress().getPort());
    } finally {
      s.stop(0);
      handlers.shutdownNow();
    }
  }

  static void answer(HttpExchange x, int status, String body) throws IOException {
    byte[] b = body.getBytes(StandardCharsets.UTF_8);
    x.getResponseHeaders().set("Content-Type", "application/json");
    x.sendResponseHeaders(status, b.length);
    x.getResponseBody().write(b);
    x.close();
  }

  @Test
  void aServerThatSaysThePathInItsErrorIsRedacted() throws IOException {
    withServer(
        x -> answer(x, 404, "{\"error\":{\"code\":\"no_route\",\"message\":\"no route " + x.getRequestURI().getRawPath() + "\"}}"),
        url ->
            renewAndRelease(url)
                .forEach(
                    (what, e) -> {
                      assertInstanceOf(KeysmithException.NotFound.class, e, what);
                      saysNot(TOKEN, e, what);
                      assertTrue(e.getMessage().contains("/v1/workers/g%2F1/lease/" + what), e.getMessage());
                    }));
  }

  @Test
  void anAnswerThatIsNotWhatTheClientExpects() throws IOException {
    withServer(
        x -> answer(x, 200, "not json"),
        url ->
            renewAndRelease(url)
                .forEach(
                    (what, e) -> {
                      if (e != null) {
                        saysNot(TOKEN, e, what);
                      }
                    }));
  }

  @Test
  void aServerThatHangsUp() throws IOException {
    withServer(
        HttpExchange::close,
        url ->
            renewAndRelease(url)
                .forEach(
                    (what, e) -> {
                      assertInstanceOf(KeysmithException.Unavailable.class, e, what);
                      saysNot(TOKEN, e, what);
                    }));
  }

  @Test
  void aServerThatAnswersTooLate() throws IOException {
    CountDownLatch done = new CountDownLatch(1);
    try {
      withServer(
          x -> {
            try {
              done.await(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            x.close();
          },
          url ->
              renewAndRelease(url)
                  .forEach(
                      (what, e) -> {
                        assertInstanceOf(KeysmithException.Unavailable.class, e, what);
                        saysNot(TOKEN, e, what);
                      }));
    } finally {
      done.countDown();
    }
  }

  @Test
  void noServer() throws IOException {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort();
    }
    renewAndRelease("http://127.0.0.1:" + port)
        .forEach(
            (what, e) -> {
              assertInstanceOf(KeysmithException.Unavailable.class, e, what);
              saysNot(TOKEN, e, what);
            });
  }

  @Test
  void aRealServerRefusingAToken() throws Exception {
    try (KeysmithServer server = KeysmithServer.start(null);
        KeysmithClient c = KeysmithClient.of(server.url)) {
      WorkerLeaseInfo info = c.leaseWorker("redact/" + System.nanoTime(), 60_000L, null);
      String edited = info.token().substring(0, info.token().length() - 4) + "AAAA";
      if (edited.equals(info.token())) {
        edited = info.token().substring(0, info.token().length() - 4) + "BBBB";
      }
      String bad = edited;
      for (Throwable e :
          List.of(
              assertThrows(KeysmithException.class, () -> c.renewWorker(info.group(), bad)),
              assertThrows(KeysmithException.class, () -> c.releaseWorker(info.group(), bad)))) {
        saysNot(info.token(), e, "refused");
        saysNot(bad, e, "refused");
      }
    }
  }

  @Test
  void redactKeepsEverythingButTheToken() {
    assertEquals(
        "POST http://h:1/v1/workers/g%2F1/lease/***/renew?ttl_ms=5",
        KeysmithClient.redact("POST http://h:1/v1/workers/g%2F1/lease/" + TOKEN + "/renew?ttl_ms=5"));
    assertEquals("/v1/workers/g/lease", KeysmithClient.redact("/v1/workers/g/lease"));
    assertEquals("/v1/workers/g/lease/renew", KeysmithClient.redact("/v1/workers/g/lease/renew"));
    assertEquals("/v1/workers/g/lease/release", KeysmithClient.redact("/v1/workers/g/lease/release"));
    assertEquals("/v1/sequences/a/lease/b", KeysmithClient.redact("/v1/sequences/a/lease/b"));
  }

  @Test
  void aLeaderOverHttpsIsNeverFollowedToHttp() {
    assertEquals("http://a:1", KeysmithClient.leaderOf("http://a:1/", "http://b:2"));
    assertEquals("https://a:1", KeysmithClient.leaderOf("https://a:1", "https://b:2"));
    assertEquals(null, KeysmithClient.leaderOf("http://a:1", "https://b:2"));
    assertEquals(null, KeysmithClient.leaderOf("ftp://a", "http://b:2"));
  }
}
