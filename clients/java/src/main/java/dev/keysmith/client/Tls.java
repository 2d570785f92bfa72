package dev.keysmith.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/** SSL contexts from a PEM CA file and a client certificate (PEM or PKCS#12). */
final class Tls {
  private Tls() {}

  private static final Pattern PKCS8 =
      Pattern.compile("-----BEGIN PRIVATE KEY-----([A-Za-z0-9+/=\\s]+)-----END PRIVATE KEY-----");

  /**
   * The context for {@code caFile} (null: the JDK's CAs) and a client key store (null: none).
   *
   * @throws IllegalArgumentException naming the file that cannot be used
   */
  static SSLContext context(Path caFile, KeyStore clientKeys, char[] keyPassword) {
    try {
      TrustManagerFactory tmf =
          TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
      if (caFile == null) {
        tmf.init((KeyStore) null);
      } else {
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        int i = 0;
        for (Certificate c : certificates(caFile, "caFile")) {
          trust.setCertificateEntry("ca-" + i++, c);
        }
        tmf.init(trust);
      }
      KeyManagerFactory kmf = null;
      if (clientKeys != null) {
        kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(clientKeys, keyPassword);
      }
      SSLContext ctx = SSLContext.getInstance("TLS");
      ctx.init(kmf == null ? null : kmf.getKeyManagers(), tmf.getTrustManagers(), null);
      return ctx;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException("keysmith: cannot set up TLS: " + e.getMessage(), e);
    }
  }

  /** The certificates of a PEM file; names {@code what} when it cannot be read or holds none. */
  static List<Certificate> certificates(Path file, String what) {
    try (InputStream in = Files.newInputStream(file)) {
      Collection<? extends Certificate> cs =
          CertificateFactory.getInstance("X.509").generateCertificates(in);
      if (cs.isEmpty()) {
        throw new IllegalArgumentException(
            "keysmith: " + what + "=" + file + " holds no PEM certificate");
      }
      return new ArrayList<>(cs);
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException(
          "keysmith: cannot read the certificates of " + what + "=" + file + ": " + e, e);
    }
  }

  /**
   * A key store with the client certificate chain of {@code certFile} and the PKCS#8 key of {@code
   * keyFile} ("BEGIN PRIVATE KEY", EC or RSA, unencrypted), as {@code openssl genpkey} writes it.
   */
  static KeyStore pemKeyStore(Path certFile, Path keyFile, char[] password) {
    List<Certificate> chain = certificates(certFile, "certFile");
    String pem;
    try {
      pem = Files.readString(keyFile, StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new IllegalArgumentException("keysmith: cannot read keyFile=" + keyFile + ": " + e, e);
    }
    Matcher m = PKCS8.matcher(pem);
    if (!m.find()) {
      throw new IllegalArgumentException(
          "keysmith: keyFile="
              + keyFile
              + " holds no unencrypted PKCS#8 key (-----BEGIN PRIVATE KEY-----); convert it with"
              + " `openssl pkcs8 -topk8 -nocrypt -in KEY -out key.pem`, or give a PKCS#12 file");
    }
    byte[] der = Base64.getMimeDecoder().decode(m.group(1));
    PrivateKey key = null;
    GeneralSecurityException last = null;
    for (String alg : new String[] {"EC", "RSA", "Ed25519", "Ed448"}) {
      try {
        key = KeyFactory.getInstance(alg).generatePrivate(new PKCS8EncodedKeySpec(der));
        break;
      } catch (GeneralSecurityException e) {
        last = e;
      }
    }
    if (key == null) {
      throw new IllegalArgumentException(
          "keysmith: keyFile=" + keyFile + " is not an EC, RSA or EdDSA key: " + last, last);
    }
    try {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(null, null);
      ks.setKeyEntry("client", key, password, chain.toArray(new Certificate[0]));
      return ks;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException(
          "keysmith: the key of keyFile="
              + keyFile
              + " does not go with the certificate of certFile="
              + certFile
              + ": "
              + e,
          e);
    }
  }

  /** A PKCS#12 file; names it when it cannot be read or the password is wrong. */
  static KeyStore pkcs12(Path file, char[] password) {
    try (InputStream in = Files.newInputStream(file)) {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(in, password);
      return ks;
    } catch (IOException | GeneralSecurityException e) {
      throw new IllegalArgumentException(
          "keysmith: cannot read the PKCS#12 file pkcs12File="
              + file
              + " (a wrong password?): "
              + e,
          e);
    }
  }
}
