package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** https URLs, a CA file and client certificates (PEM and PKCS#12) against {@code keysmith serve --tls-cert}. */
class TlsTest {
  @TempDir static Path certs;

  static void run(String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).inheritIO().start();
    if (p.waitFor() != 0) {
      throw new IllegalStateException("failed: " + String.join(" ", cmd));
    }
  }

  @BeforeAll
  static void makeCerts() throws Exception {
    run("bash", Path.of("../tls-test-certs.sh").toAbsolutePath().toString(), certs.toString());
    run("openssl", "pkcs12", "-export", "-in", certs.resolve("client.pem").toString(),
        "-inkey", certs.resolve("client-key.pem").toString(),
        "-out", certs.resolve("client.p12").toString(), "-passout", "pass:p12secret");
  }

  static KeysmithServer https(boolean clientCa) throws Exception {
    if (clientCa) {
      return KeysmithServer.start(null, "--tls-cert", certs.resolve("server.pem").toString(),
          "--tls-key", certs.resolve("server-key.pem").toString(),
          "--client-ca", certs.resolve("ca.pem").toString());
    }
    return KeysmithServer.start(null, "--tls-cert", certs.resolve("server.pem").toString(),
        "--tls-key", certs.resolve("server-key.pem").toString());
  }

  @Test
  void httpsWithTheCaFile() throws Exception {
    try (KeysmithServer s = https(false);
        KeysmithClient c = KeysmithClient.builder().urls(s.url).caFile(certs.resolve("ca.pem")).build()) {
      assertTrue(s.url.startsWith("https://"), s.url);
      String name = KeysmithServer.name();
      c.createSequence(name, new KeysmithClient.CreateOptions().start(10));
      try (KeysmithSequence seq = c.sequence(name)) {
        assertArrayEquals(new long[] {10, 11, 12}, seq.next(3));
      }
    }
  }

  @Test
  void aServerWhoseCaIsNotTrustedIsRefused() throws Exception {
    try (KeysmithServer s = https(false);
        KeysmithClient c = KeysmithClient.builder().urls(s.url).caFile(certs.resolve("other-ca.pem"))
            .deadline(Duration.ofMillis(500)).build()) {
      // a setup error: thrown at once, never retried
      KeysmithException.Setup e = assertThrows(KeysmithException.Setup.class, c::health);
      assertTrue(e.getMessage().contains("SSLHandshakeException"), e.getMessage());
    }
  }

  @Test
  void aClientCertificateAsPemOrPkcs12() throws Exception {
    try (KeysmithServer s = https(true)) {
      String name = KeysmithServer.name();
      try (KeysmithClient none = KeysmithClient.builder().urls(s.url).caFile(certs.resolve("ca.pem"))
          .deadline(Duration.ofMillis(500)).build()) {
        // TLS 1.3: the server refuses a missing certificate after the client's side of the
        // handshake ended: its alert (Setup) or, when it closed first, a reset connection (an
        // unsafe call, not sent again)
        KeysmithException e = assertThrows(KeysmithException.class, () -> none.createSequence(name));
        assertTrue(e instanceof KeysmithException.Setup
            || e instanceof KeysmithException.Unavailable && e.getMessage().contains("not sent again"),
            e.toString());
      }
      try (KeysmithClient pem = KeysmithClient.builder().urls(s.url).caFile(certs.resolve("ca.pem"))
          .clientCertificate(certs.resolve("client.pem"), certs.resolve("client-key.pem")).build()) {
        pem.createSequence(name);
        assertArrayEquals(new long[] {1, 2}, pem.next(name, 2));
      }
      try (KeysmithClient p12 = KeysmithClient.builder().urls(s.url).caFile(certs.resolve("ca.pem"))
          .clientPkcs12(certs.resolve("client.p12"), "p12secret".toCharArray()).build()) {
        assertArrayEquals(new long[] {3, 4}, p12.next(name, 2));
      }
    }
  }

  @Test
  void badTlsFilesSayWhich() {
    Path missing = certs.resolve("missing.pem");
    IllegalArgumentException ca = assertThrows(IllegalArgumentException.class,
        () -> KeysmithClient.builder().urls("https://127.0.0.1:1").caFile(missing).build());
    assertTrue(ca.getMessage().contains("caFile=" + missing), ca.getMessage());
    IllegalArgumentException key = assertThrows(IllegalArgumentException.class,
        () -> KeysmithClient.builder().urls("https://127.0.0.1:1")
            .clientCertificate(certs.resolve("client.pem"), certs.resolve("server.pem")));
    assertTrue(key.getMessage().contains("keyFile="), key.getMessage());
    IllegalArgumentException p12 = assertThrows(IllegalArgumentException.class,
        () -> KeysmithClient.builder().urls("https://127.0.0.1:1")
            .clientPkcs12(certs.resolve("client.p12"), "wrong".toCharArray()));
    assertTrue(p12.getMessage().contains("pkcs12File="), p12.getMessage());
  }
}
