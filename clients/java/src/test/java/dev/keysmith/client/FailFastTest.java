package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A server with an access file (an admin, and a team with use and read on "team/*" at 1 request a
 * second): every way a call fails gives its typed exception at once (a deadline of an hour would
 * hang the test otherwise), and no exception, printed trace or toString says a token.
 */
class FailFastTest {
  @TempDir Path dir;

  static final String ADMIN = "adm-" + "A1b2".repeat(10);
  static final String TEAM = "team-" + "Z9y8".repeat(10);

  final Map<String, Throwable> kept = new LinkedHashMap<>();
  final List<String> secrets = new ArrayList<>(List.of(ADMIN, TEAM));

  <T extends Throwable> T keep(String what, Class<T> type, org.junit.jupiter.api.function.Executable call) {
    T e = assertThrows(type, call, what);
    kept.put(what, e);
    return e;
  }

  static String digest(String token) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(token.getBytes(StandardCharsets.UTF_8)));
  }

  static KeysmithClient client(String url, String token, Duration deadline) {
    KeysmithClient.Builder b = KeysmithClient.builder().urls(url).deadline(deadline);
    return (token == null ? b : b.token(token)).build();
  }

  @Test
  void everyFailureIsTypedAndImmediateAndNoMessageSaysAToken() throws Exception {
    Path access = dir.resolve("access.toml");
    Path audit = dir.resolve("audit.log");
    Files.writeString(access, String.format("""
        [[principal]]
        name = "admin"
        token_sha256 = "%s"
        grants = [ { names = "*", actions = ["use", "read", "admin"] } ]

        [[principal]]
        name = "team"
        token_sha256 = "%s"
        grants = [ { names = "team/*", actions = ["use", "read"] } ]
        rate = 1
        burst = 1
        """, digest(ADMIN), digest(TEAM)));
    Duration hour = Duration.ofHours(1);
    String name = "team/" + KeysmithServer.name();
    try (KeysmithServer srv = KeysmithServer.start(null, "--access-file", access.toString(),
        "--audit-log", audit.toString(), "--auth-failures-per-ip", "0")) {
      // a token file ending in a newline: the newline is dropped
      Path tokenFile = dir.resolve("admin.token");
      Files.writeString(tokenFile, ADMIN + "\n");
      try (KeysmithClient c = KeysmithClient.builder().urls(srv.url).tokenFile(tokenFile).deadline(hour).build();
          KeysmithClient cr = client(srv.url, ADMIN + "\r\n", hour);
          KeysmithClient team = client(srv.url, TEAM, hour);
          KeysmithClient wrong = client(srv.url, "not-" + TEAM, hour);
          KeysmithClient shortDeadline = client(srv.url, TEAM, Duration.ofMillis(1))) {
        c.createSequence(name);
        assertEquals(1, cr.next(name, 1)[0], "a token from $(cat file) on Windows line ends");

        // other characters are refused at construction, naming the option, never the token
        for (String bad : List.of(ADMIN.substring(0, 10) + "\n" + ADMIN.substring(10), ADMIN + " ", "é" + ADMIN, ADMIN + "\n\n")) {
          IllegalArgumentException e = keep("bad token " + bad.length(), IllegalArgumentException.class,
              () -> client(srv.url, bad, hour));
          assertTrue(e.getMessage().contains("token"), e.getMessage());
        }
        IllegalArgumentException missing = keep("a missing token file", IllegalArgumentException.class,
            () -> KeysmithClient.builder().tokenFile(dir.resolve("missing.token")));
        assertTrue(missing.getMessage().contains("tokenFile="), missing.getMessage());

        keep("401", KeysmithException.Unauthorized.class, () -> wrong.next(name, 1));
        KeysmithException.Forbidden forbidden = keep("403", KeysmithException.Forbidden.class,
            () -> team.createSequence("other/" + KeysmithServer.name()));
        assertEquals(403, forbidden.status());
        keep("404", KeysmithException.NotFound.class, () -> c.getSequence("team/" + KeysmithServer.name()));
        keep("409", KeysmithException.AlreadyExists.class, () -> c.createSequence(name));

        // a lease of an earlier life of the name: 410
        Lease lease = c.reserve(name, 5);
        secrets.add(lease.token());
        c.dropSequence(name);
        c.createSequence(name);
        KeysmithException.Gone gone = keep("410", KeysmithException.Gone.class,
            () -> c.release(lease, lease.ranges().get(0).start()));
        assertEquals(410, gone.status());

        // a worker lease's token, edited: refused
        WorkerLeaseInfo wl = c.leaseWorker("team/" + KeysmithServer.name(), 60_000L, null);
        String tok = wl.token();
        String edited = tok.substring(0, tok.length() - 4) + (tok.endsWith("AAAA") ? "BBBB" : "AAAA");
        secrets.add(tok);
        secrets.add(edited);
        keep("renew with an edited worker lease token", KeysmithException.class, () -> c.renewWorker(wl.group(), edited));

        // printing a lease, a worker lease or a client never shows a token
        for (Object o : List.of(lease, wl, c, team)) {
          for (String s : secrets) {
            assertFalse(o.toString().contains(s), "toString says a secret: " + o);
          }
        }

        // 429 within the deadline: waited for and sent again. Calls until the audit trail shows a
        // 429, each of them answered.
        for (int i = 0; ; i++) {
          team.next(name, 1);
          if (Files.exists(audit) && Files.readString(audit).contains("\"status\":429")) {
            break;
          }
          if (i == 100) {
            fail("100 calls at 1 request a second and no 429 in the audit trail");
          }
        }
        // 429 beyond the deadline: at once, with the wait it asked for
        KeysmithException.RateLimited limited = null;
        for (int i = 0; limited == null && i < 100; i++) {
          try {
            shortDeadline.next(name, 1);
          } catch (KeysmithException.RateLimited e) {
            limited = e;
          }
        }
        assertTrue(limited != null, "no 429 over the rate");
        kept.put("429", limited);
        assertEquals(429, limited.status());
        assertFalse(limited.retryAfter().isZero(), limited.getMessage());
      }
      srv.close();
      try (KeysmithClient c = client(srv.url, ADMIN, Duration.ofMillis(200))) {
        keep("no server", KeysmithException.Unavailable.class, () -> c.next(name, 1));
      }
    }

    // TLS: a CA that did not sign the server, a server that wants a client certificate, https to
    // an http server: a setup error at once (the deadline of an hour would hang otherwise)
    Path certs = dir.resolve("certs");
    Files.createDirectories(certs);
    Process p = new ProcessBuilder("bash", Path.of("../tls-test-certs.sh").toAbsolutePath().toString(), certs.toString())
        .redirectErrorStream(true).start();
    p.getInputStream().readAllBytes();
    assertEquals(0, p.waitFor());
    String[] tls = {"--tls-cert", certs.resolve("server.pem").toString(), "--tls-key", certs.resolve("server-key.pem").toString()};
    try (KeysmithServer https = KeysmithServer.start(ADMIN, tls);
        KeysmithServer mtls = KeysmithServer.start(ADMIN, tls[0], tls[1], tls[2], tls[3], "--client-ca", certs.resolve("ca.pem").toString());
        KeysmithServer plain = KeysmithServer.start(ADMIN);
        KeysmithClient untrusted = KeysmithClient.builder().urls(https.url).token(ADMIN)
            .caFile(certs.resolve("other-ca.pem")).deadline(hour).build();
        KeysmithClient noCert = KeysmithClient.builder().urls(mtls.url).token(ADMIN)
            .caFile(certs.resolve("ca.pem")).deadline(hour).build();
        KeysmithClient wrongScheme = client(plain.url.replace("http://", "https://"), ADMIN, hour)) {
      Map<String, Supplier<Object>> calls = Map.of(
          "an untrusted server certificate", () -> untrusted.createSequence(KeysmithServer.name()),
          "no client certificate", () -> noCert.createSequence(KeysmithServer.name()),
          "https to an http server", () -> wrongScheme.createSequence(KeysmithServer.name()));
      calls.forEach((what, call) -> {
        if (what.equals("no client certificate")) {
          // TLS 1.3: the server refuses a missing certificate after the client's side of the
          // handshake ended; the JDK reports its alert (Setup) or, when the server closed first,
          // a reset connection: an unsafe call (a create) is then not sent again either
          KeysmithException e = keep(what, KeysmithException.class, call::get);
          assertTrue(e instanceof KeysmithException.Setup
              || e instanceof KeysmithException.Unavailable && e.getMessage().contains("not sent again"),
              e.toString());
        } else {
          keep(what, KeysmithException.Setup.class, call::get);
        }
      });
    }

    assertFalse(kept.isEmpty());
    kept.forEach((what, e) -> {
      for (String s : secrets) {
        RedactionTest.saysNot(s, e, what);
      }
    });
  }
}
