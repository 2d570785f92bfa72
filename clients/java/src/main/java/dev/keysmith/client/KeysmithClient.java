package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.KeyStore;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;

/**
 * A client of one keysmith service, or of several servers over one store. Thread-safe: share one
 * per process.
 *
 * <pre>{@code
 * try (KeysmithClient client = KeysmithClient.builder()
 *         .urls("https://10.0.0.1:7878", "https://10.0.0.2:7878")
 *         .token(System.getenv("KEYSMITH_TOKEN"))
 *         .caFile(Path.of("ca.pem"))
 *         .build()) {
 *   KeysmithSequence orders = client.sequence("orders");
 *   long id = orders.getAsLong();
 * }
 * }</pre>
 *
 * <p>Every call goes to the server that answered last and fails over to the next one on
 * connection errors and 503s, honouring Retry-After, for at most the client's deadline (default
 * 30 s); then it throws the last error ({@link KeysmithException.Unavailable} when no server
 * answered). A call that may have reached a server and is not safe to repeat (create, drop, alter,
 * a worker lease, a ticket's commit or release) is not sent again after an error that leaves its
 * outcome unknown: it throws, saying so.
 */
public final class KeysmithClient implements AutoCloseable {
  /** Seconds one call may spend failing over and waiting for Retry-After, by default. */
  public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(30);
  /** The time to connect to one server, by default. */
  public static final Duration DEFAULT_CONNECT_TIMEOUT = Duration.ofSeconds(3);
  /** The time one request may take, by default (above the server's 10 s request timeout). */
  public static final Duration DEFAULT_REQUEST_TIMEOUT = Duration.ofSeconds(15);

  private final Servers servers;
  private final String authorization;
  private final HttpClient http;
  private final Duration deadline;
  private final Duration requestTimeout;
  private final ExecutorService fetchers;
  private final ScheduledExecutorService scheduler;
  private final Set<AutoCloseable> handles = ConcurrentHashMap.newKeySet();
  private volatile boolean closed;

  private KeysmithClient(Builder b) {
    if (b.urls.isEmpty()) {
      throw new IllegalArgumentException("keysmith: give at least one server URL (urls)");
    }
    List<String> urls = new ArrayList<>();
    for (int i = 0; i < b.urls.size(); i++) {
      String u = b.urls.get(i);
      if (u == null) {
        throw new IllegalArgumentException("keysmith: urls[" + i + "] is null");
      }
      // A URL with an "@" may hold a password: never said back (not even by URI's own
      // message, so not chained either).
      boolean mayHoldPassword = u.indexOf('@') >= 0;
      URI uri;
      try {
        uri = URI.create(u);
      } catch (IllegalArgumentException e) {
        throw mayHoldPassword
            ? new IllegalArgumentException("keysmith: urls[" + i + "] is not a URL (not shown: it holds an @)")
            : new IllegalArgumentException("keysmith: urls[" + i + "] is not a URL: " + u, e);
      }
      if (uri.getRawUserInfo() != null || uri.getHost() == null && uri.getRawAuthority() != null
          && uri.getRawAuthority().indexOf('@') >= 0) {
        throw new IllegalArgumentException(
            "keysmith: urls[" + i + "] holds a user or password: give the token with token(...) instead"
                + " (the URL would be in every error message)");
      }
      if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())
          || uri.getHost() == null) {
        throw new IllegalArgumentException(
            "keysmith: urls[" + i + "] must be an http:// or https:// URL with a host, got "
                + (mayHoldPassword ? "one that is not shown (it holds an @)" : u));
      }
      urls.add(u.replaceAll("/+$", ""));
    }
    String token = checkToken(b.token, b.tokenFrom);
    this.servers = new Servers(urls);
    this.authorization = token == null ? null : "Bearer " + token;
    this.deadline = b.deadline;
    this.requestTimeout = b.requestTimeout;
    HttpClient.Builder hb =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(b.connectTimeout)
            .followRedirects(HttpClient.Redirect.NEVER);
    KeyStore keys = b.clientKeys;
    if (b.caFile != null || keys != null) {
      hb.sslContext(Tls.context(b.caFile, keys, b.keyPassword));
    }
    this.http = hb.build();
    this.fetchers = Executors.newCachedThreadPool(daemons("keysmith-prefetch"));
    ScheduledThreadPoolExecutor s = new ScheduledThreadPoolExecutor(2, daemons("keysmith-renew"));
    s.setRemoveOnCancelPolicy(true);
    this.scheduler = s;
  }

  /**
   * {@code token} without one trailing newline ({@code \n} or {@code \r\n}, as a file or {@code
   * $(cat file)} leaves it), or an error naming {@code from} and the refused character, never the
   * token.
   */
  static String checkToken(String token, String from) {
    if (token == null) {
      return null;
    }
    String t = token.endsWith("\n") ? token.substring(0, token.length() - 1) : token;
    t = t.endsWith("\r") ? t.substring(0, t.length() - 1) : t;
    if (t.isEmpty()) {
      throw new IllegalArgumentException(
          "keysmith: " + from + " is empty: give the server's token (a string of printable ASCII)");
    }
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      if (c < 0x21 || c > 0x7e) {
        String what =
            c == ' ' ? "a space" : c == '\n' ? "a newline" : c == '\r' ? "a carriage return"
                : c == '\t' ? "a tab" : c > 0x7e ? "a non-ASCII character" : "a control character";
        throw new IllegalArgumentException(
            "keysmith: " + from + " holds " + what + " at character " + (i + 1) + " of " + t.length()
                + ": a bearer token is printable ASCII without spaces; check where it came from"
                + " (the token is not shown)");
      }
    }
    return t;
  }

  private static ThreadFactory daemons(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  /** A builder: {@code urls(...)} is required. */
  public static Builder builder() {
    return new Builder();
  }

  /** A client of one or more servers with no token and the default TLS settings. */
  public static KeysmithClient of(String... urls) {
    return builder().urls(urls).build();
  }

  /** How a client is made. */
  public static final class Builder {
    private final List<String> urls = new ArrayList<>();
    private String token;
    private String tokenFrom = "token";
    private Path caFile;
    private KeyStore clientKeys;
    private char[] keyPassword;
    private Duration deadline = DEFAULT_DEADLINE;
    private Duration connectTimeout = DEFAULT_CONNECT_TIMEOUT;
    private Duration requestTimeout = DEFAULT_REQUEST_TIMEOUT;

    private Builder() {}

    /**
     * The servers' base URLs ({@code http://} or {@code https://}), tried in this order. A URL with
     * a user or password is refused (give the token with {@link #token(String)}).
     */
    public Builder urls(String... urls) {
      return urls(List.of(urls));
    }

    /** The servers' base URLs, tried in this order. */
    public Builder urls(List<String> urls) {
      this.urls.addAll(urls);
      return this;
    }

    /**
     * The bearer token of a server started with one (sent in a header, never in a URL). One
     * trailing newline is dropped ({@code System.getenv("KEYSMITH_TOKEN")} may be given as it is);
     * any other character outside printable ASCII makes {@link #build()} fail, without showing the
     * token.
     */
    public Builder token(String token) {
      this.token = token;
      this.tokenFrom = "token";
      return this;
    }

    /**
     * Reads the bearer token from a file (its trailing newline dropped), now.
     *
     * @throws IllegalArgumentException naming the file when it cannot be read
     */
    public Builder tokenFile(Path file) {
      try {
        this.token = java.nio.file.Files.readString(file, StandardCharsets.UTF_8);
      } catch (IOException | RuntimeException e) {
        throw new IllegalArgumentException(
            "keysmith: cannot read the token file tokenFile=" + file + ": " + e.getClass().getSimpleName(), e);
      }
      this.tokenFrom = "the token file tokenFile=" + file;
      return this;
    }

    /** The PEM file of the CA that signed the servers' certificates (default: the JDK's CAs). */
    public Builder caFile(Path caFile) {
      this.caFile = caFile;
      return this;
    }

    /**
     * A client certificate for a server that requires one ({@code keysmith serve --client-ca}):
     * the PEM certificate (chain) and its unencrypted PKCS#8 key ({@code BEGIN PRIVATE KEY}, EC or
     * RSA). Read when called.
     *
     * @throws IllegalArgumentException naming the file that cannot be used
     */
    public Builder clientCertificate(Path certFile, Path keyFile) {
      char[] pw = new char[0];
      this.clientKeys = Tls.pemKeyStore(certFile, keyFile, pw);
      this.keyPassword = pw;
      return this;
    }

    /**
     * A client certificate from a PKCS#12 file ({@code openssl pkcs12 -export}) and its password.
     * Read when called.
     *
     * @throws IllegalArgumentException naming the file when it cannot be read
     */
    public Builder clientPkcs12(Path pkcs12File, char[] password) {
      this.clientKeys = Tls.pkcs12(pkcs12File, password);
      this.keyPassword = password.clone();
      return this;
    }

    /** How long one call may fail over and wait for Retry-After in all (default 30 s). */
    public Builder deadline(Duration deadline) {
      this.deadline = positive(deadline, "deadline");
      return this;
    }

    /** How long connecting to one server may take (default 3 s). */
    public Builder connectTimeout(Duration timeout) {
      this.connectTimeout = positive(timeout, "connectTimeout");
      return this;
    }

    /** How long one request may take (default 15 s). */
    public Builder requestTimeout(Duration timeout) {
      this.requestTimeout = positive(timeout, "requestTimeout");
      return this;
    }

    /**
     * The client.
     *
     * @throws IllegalArgumentException naming the setting that is wrong (no URL, a bad URL, a
     *     token with spaces)
     */
    public KeysmithClient build() {
      return new KeysmithClient(this);
    }
  }

  static Duration positive(Duration d, String what) {
    Objects.requireNonNull(d, what);
    if (d.isNegative() || d.isZero()) {
      throw new IllegalArgumentException("keysmith: " + what + " must be positive, got " + d);
    }
    return d;
  }

  /** The servers' base URLs, in the order given. */
  public List<String> urls() {
    return servers.urls;
  }

  /** How many requests found a server unreachable (no answer) so far: failovers seen. */
  public long unreachableCount() {
    return servers.unreachable();
  }

  // ---------------------------------------------------------------- requests

  /** One route: what to send and how to read the answer. */
  record Req<T>(
      String method, String path, Map<String, String> query, JsonNode body, Function<JsonNode, T> parse, boolean safe) {}

  /**
   * The token segment of the deprecated path forms of a lease's renewal and release
   * (/v1/workers/GROUP/lease/TOKEN/renew and /release). The client sends the token in the body; a
   * server's message that quotes an old-form path is still redacted.
   */
  private static final java.util.regex.Pattern LEASE_TOKEN =
      java.util.regex.Pattern.compile("(/v1/workers/[^/?#\\s]*/lease/)[^/?#\\s]+(/(?:renew|release))");

  /**
   * {@code s} (a path, a URL or a message) with every worker lease token in it replaced by {@code
   * ***}: errors say {@code /v1/workers/GROUP/lease/***}{@code /renew}, never the token.
   */
  static String redact(String s) {
    return s == null ? null : LEASE_TOKEN.matcher(s).replaceAll("$1***$2");
  }

  static String seg(String name) {
    return URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20");
  }

  private static Map<String, String> count(long count) {
    Map<String, String> q = new LinkedHashMap<>();
    q.put("count", Long.toString(count));
    q.put("as", "string");
    return q;
  }

  <T> T call(Req<T> req) {
    return call(req, deadline);
  }

  <T> T call(Req<T> req, Duration budget) {
    if (closed) {
      throw new KeysmithException.Closed("keysmith: this client is closed");
    }
    StringBuilder qs = new StringBuilder();
    if (req.query() != null) {
      for (Map.Entry<String, String> e : req.query().entrySet()) {
        qs.append(qs.length() == 0 ? '?' : '&')
            .append(seg(e.getKey()))
            .append('=')
            .append(seg(e.getValue()));
      }
    }
    long deadlineAt = System.nanoTime() + budget.toNanos();
    boolean[] tried = new boolean[servers.urls.size()];
    KeysmithException last = null;
    while (true) {
      long now = System.nanoTime();
      long got = servers.pick(now, tried);
      if (got < 0) {
        long wait = -got - 1;
        if (now + wait - deadlineAt > 0) {
          throw last != null
              ? last
              : KeysmithException.unreachable(
                  "no keysmith server is ready before the deadline (" + String.join(", ", servers.urls) + ")",
                  null,
                  null);
        }
        LockSupport.parkNanos(wait);
        if (Thread.interrupted()) {
          Thread.currentThread().interrupt();
          throw KeysmithException.unreachable("keysmith: interrupted while failing over", null, null);
        }
        continue;
      }
      int i = (int) got;
      if (now - deadlineAt >= 0 && last != null) {
        throw last;
      }
      tried[i] = true;
      String url = servers.urls.get(i);
      HttpResponse<byte[]> resp;
      try {
        resp = http.send(request(url, req, qs), HttpResponse.BodyHandlers.ofByteArray());
        // A leader-ordered sequence that another server leads: the 421 names the leader; the same
        // request goes there, once, with this client's token and TLS settings.
        String leader = resp.statusCode() == 421 ? leaderOf(resp.headers().firstValue("Keysmith-Leader").orElse(null), url) : null;
        if (leader != null) {
          url = leader;
          resp = http.send(request(url, req, qs), HttpResponse.BodyHandlers.ofByteArray());
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw KeysmithException.unreachable(url + ": interrupted", url, e);
      } catch (IOException e) {
        String setup = setupError(e);
        if (setup != null) {
          // no other server or later try can help: the client's own settings are refused
          throw new KeysmithException.Setup(
              url + ": " + setup + " (" + e.getClass().getSimpleName()
                  + (e.getMessage() == null ? "" : ": " + redact(e.getMessage())) + ")",
              url,
              e);
        }
        servers.failed(i, -1);
        boolean notSent = notSent(e);
        String what = e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + redact(e.getMessage()));
        if (!req.safe() && !notSent) {
          throw KeysmithException.unreachable(
              url + ": " + what + "; the request may or may not have taken effect, so it was not sent again",
              url,
              e);
        }
        last = KeysmithException.unreachable(url + ": " + what, url, e);
        continue;
      }
      JsonNode body = decode(resp.body());
      int status = resp.statusCode();
      if (status == 503) {
        servers.failed(i, retryAfterNanos(resp));
        KeysmithException err = KeysmithException.fromResponse(503, body, url);
        if (!req.safe() && "timeout".equals(err.code())) {
          throw new KeysmithException.Unavailable(
              err.getMessage() + "; the request may still take effect, so it was not sent again",
              503, err.code(), List.of(), url, err);
        }
        last = err;
        continue;
      }
      if (status == 429) {
        // refused before any handler ran: sending it again is safe
        long wait = retryAfterNanos(resp);
        KeysmithException err = KeysmithException.fromResponse(429, body, url);
        Duration asked = Duration.ofNanos(Math.max(0, wait));
        long sleep = wait > 0 ? wait : 50_000_000L;
        if (System.nanoTime() + sleep - deadlineAt > 0) {
          throw new KeysmithException.RateLimited(
              err.getMessage()
                  + (wait > 0 ? " (the server asks to retry after " + asked.toMillis() + " ms, beyond this call's deadline)" : ""),
              429, err.code(), List.of(), url, asked);
        }
        LockSupport.parkNanos(sleep);
        if (Thread.interrupted()) {
          Thread.currentThread().interrupt();
          throw err;
        }
        tried[i] = false;
        continue;
      }
      servers.succeeded(i);
      if (status >= 400) {
        throw KeysmithException.fromResponse(status, body, url);
      }
      return req.parse().apply(body == null ? Json.MAPPER.createObjectNode() : body);
    }
  }

  /** The request {@code req} to the server at {@code base}. */
  private HttpRequest request(String base, Req<?> req, CharSequence qs) {
    URI uri;
    try {
      uri = URI.create(base + req.path() + qs);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "keysmith: cannot make the request " + req.method() + " " + redact(req.path()) + ": "
              + redact(String.valueOf(e.getMessage())));
    }
    HttpRequest.Builder rb = HttpRequest.newBuilder(uri).timeout(requestTimeout);
    if (authorization != null) {
      rb.header("Authorization", authorization);
    }
    if (req.body() != null) {
      rb.header("Content-Type", "application/json");
      rb.method(req.method(), HttpRequest.BodyPublishers.ofString(req.body().toString()));
    } else {
      rb.method(req.method(), HttpRequest.BodyPublishers.noBody());
    }
    return rb.build();
  }

  /**
   * The leader's address a 421 {@code not_leader} names, or null when it names none, and null for
   * an http leader of a request that went to {@code base} over https: the token is never sent in
   * clear text (the 421 reaches the caller as an error naming the leader).
   */
  static String leaderOf(String header, String base) {
    if (header == null || !(header.startsWith("http://") || header.startsWith("https://"))) {
      return null;
    }
    if (base.startsWith("https://") && !header.startsWith("https://")) {
      return null;
    }
    return header.replaceAll("/+$", "");
  }

  /**
   * Why {@code e} shows the client's own TLS settings refused, or null: a handshake that failed (a
   * server certificate the CA does not vouch for, a client certificate refused or missing) or TLS
   * spoken to a server that does not speak it.
   */
  static String setupError(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof javax.net.ssl.SSLHandshakeException) {
        return "the TLS handshake failed: a server certificate the CA file (caFile) does not vouch for,"
            + " or a client certificate (clientCertificate) the server refuses or needs";
      }
      if (t instanceof javax.net.ssl.SSLException) {
        String m = String.valueOf(t.getMessage());
        if (m.contains("plaintext") || m.contains("Unsupported or unrecognized SSL message")) {
          return "the server does not speak TLS: use an http:// URL for it";
        }
        return "TLS failed: check caFile and clientCertificate";
      }
    }
    return null;
  }

  private static boolean notSent(IOException e) {
    for (Throwable t = e; t != null; t = t.getCause()) {
      if (t instanceof ConnectException
          || t instanceof HttpConnectTimeoutException
          || t instanceof SSLException) {
        return true;
      }
    }
    return false;
  }

  private static JsonNode decode(byte[] body) {
    if (body == null || body.length == 0) {
      return null;
    }
    try {
      return Json.MAPPER.readTree(body);
    } catch (IOException e) {
      return null;
    }
  }

  private static long retryAfterNanos(HttpResponse<?> resp) {
    String raw = resp.headers().firstValue("retry-after").orElse(null);
    if (raw == null) {
      return -1;
    }
    raw = raw.trim();
    try {
      return Duration.ofSeconds(Long.parseLong(raw)).toNanos();
    } catch (NumberFormatException | ArithmeticException e) {
      // an HTTP date
    }
    try {
      ZonedDateTime when = ZonedDateTime.parse(raw, DateTimeFormatter.RFC_1123_DATE_TIME);
      return Math.max(0, Duration.between(ZonedDateTime.now(when.getZone()), when).toNanos());
    } catch (RuntimeException e) {
      return -1;
    }
  }

  // ---------------------------------------------------------------- sequences

  /**
   * A handle serving {@code name}'s values from blocks leased from the server, with background
   * prefetch and a block size that follows the rate (see {@link KeysmithSequence}). No request is
   * made until the first value is asked for.
   */
  public KeysmithSequence sequence(String name) {
    return sequence(name, new KeysmithSequence.Options());
  }

  /** A handle with the given block sizes and target interval (see {@link KeysmithSequence.Options}). */
  public KeysmithSequence sequence(String name, KeysmithSequence.Options options) {
    ensureOpen();
    KeysmithSequence s = new KeysmithSequence(this, name, options);
    handles.add(s);
    return s;
  }

  /** What {@link #createSequence(String, CreateOptions)} takes; null fields are left to the server. */
  public static final class CreateOptions {
    Long start;
    Long max;
    Long block;
    boolean gapless;
    String period;
    String format;
    Long increment;
    Long offset;
    String order;
    boolean opaque;
    String encoding;
    String prefix;
    boolean jsSafe;

    /** The first value (default 1). */
    public CreateOptions start(long v) {
      start = v;
      return this;
    }

    /** The largest value (default 2^63 - 2). */
    public CreateOptions max(long v) {
      max = v;
      return this;
    }

    /** The default block size of handles. */
    public CreateOptions block(long v) {
      block = v;
      return this;
    }

    /** Gap-free numbers, taken with tickets. */
    public CreateOptions gapless(boolean v) {
      gapless = v;
      return this;
    }

    /** {@code day}, {@code month} or {@code year}: numbers restart every period. */
    public CreateOptions period(String v) {
      period = v;
      return this;
    }

    /** How numbers are printed, e.g. {@code INV-{period}-{n:04}}. */
    public CreateOptions format(String v) {
      format = v;
      return this;
    }

    /**
     * {@code leader}: one leased leader hands values out in arrival order (take them with {@code
     * next}, which follows a follower's 421 to the leader); {@code cached}: the default.
     */
    public CreateOptions order(String v) {
      order = v;
      return this;
    }

    /**
     * Opaque values: a keyed permutation of a plain counter (the key stays on the server); {@link
     * KeysmithClient#decode} maps a value back.
     */
    public CreateOptions opaque(boolean v) {
      opaque = v;
      return this;
    }

    /**
     * {@code base32} or {@code base62}: values are fixed-width strings that sort as the numbers
     * (read them with {@code nextNumbers}); {@code prefix} ({@code "ord"} gives {@code ord_...})
     * may be null.
     */
    public CreateOptions encoding(String encoding, String prefix) {
      this.encoding = encoding;
      this.prefix = prefix;
      return this;
    }

    /** The largest value 2^53-1, the largest integer JavaScript holds exactly. */
    public CreateOptions jsSafe(boolean v) {
      jsSafe = v;
      return this;
    }

    /** A residue class: every value is {@code offset} modulo {@code increment}. */
    public CreateOptions residue(long increment, long offset) {
      this.increment = increment;
      this.offset = offset;
      return this;
    }
  }

  /** Creates a sequence from 1 with the server's defaults. */
  public SequenceInfo createSequence(String name) {
    return createSequence(name, new CreateOptions());
  }

  /**
   * Creates a sequence; {@link KeysmithException.AlreadyExists} when the name is taken, {@link
   * KeysmithException.BadRequest} for a bad name or option.
   */
  public SequenceInfo createSequence(String name, CreateOptions o) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("name", name);
    if (o.start != null) {
      b.put("start", o.start);
    }
    if (o.max != null) {
      b.put("max", o.max);
    }
    if (o.block != null) {
      b.put("block", o.block);
    }
    if (o.gapless) {
      b.put("gapless", true);
    }
    if (o.order != null) {
      b.put("order", o.order);
    }
    if (o.period != null) {
      b.put("period", o.period);
    }
    if (o.format != null) {
      b.put("format", o.format);
    }
    if (o.increment != null) {
      b.put("increment", o.increment);
      b.put("offset", o.offset);
    }
    if (o.opaque) {
      b.put("opaque", true);
    }
    if (o.encoding != null) {
      b.put("encoding", o.encoding);
    }
    if (o.prefix != null) {
      b.put("prefix", o.prefix);
    }
    if (o.jsSafe) {
      b.put("js_safe", true);
    }
    return call(new Req<>("POST", "/v1/sequences", null, b, SequenceInfo::from, false));
  }

  /**
   * The plain counter behind a value an opaque, encoded or bit-reversed sequence handed out
   * ({@code value}: the integer, or the encoded string as printed). {@link
   * KeysmithException.BadRequest} for a value the sequence never hands out (a wrong prefix, width
   * or check character, outside its range).
   */
  public DecodedValue decode(String name, String value) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("value", value);
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/decode", null, b, DecodedValue::from, true));
  }

  /** {@link #decode(String, String)} of an integer value. */
  public DecodedValue decode(String name, long value) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("value", value);
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/decode", null, b, DecodedValue::from, true));
  }

  /** A sequence as the server holds it; {@link KeysmithException.NotFound} when there is none. */
  public SequenceInfo getSequence(String name) {
    return call(new Req<>("GET", "/v1/sequences/" + seg(name), null, null, SequenceInfo::from, true));
  }

  /** Every sequence. */
  public List<SequenceInfo> listSequences() {
    return call(
        new Req<>("GET", "/v1/sequences", null, null, j -> {
          List<SequenceInfo> out = new ArrayList<>();
          j.path("sequences").forEach(s -> out.add(SequenceInfo.from(s)));
          return out;
        }, true));
  }

  /** Drops a sequence; a later create of the name continues above the values it handed out. */
  public void dropSequence(String name) {
    call(new Req<>("DELETE", "/v1/sequences/" + seg(name), null, null, j -> null, false));
  }

  /**
   * Changes a sequence in use: {@code next} only forward, {@code max} never below what was
   * reserved, {@code block} for handles opened from now on (null: unchanged). {@link
   * KeysmithException.BadRequest} changes nothing.
   */
  public SequenceInfo alter(String name, Long next, Long max, Long block) {
    ObjectNode b = Json.MAPPER.createObjectNode();
    if (next != null) {
      b.put("next", next);
    }
    if (max != null) {
      b.put("max", max);
    }
    if (block != null) {
      b.put("block", block);
    }
    return call(new Req<>("PATCH", "/v1/sequences/" + seg(name), null, b, SequenceInfo::from, false));
  }

  /** {@code count} values from the server's own cache: one request, no local block. */
  public long[] next(String name, long count) {
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/next", count(count), null, j -> {
          try {
            return Json.longs(j, "values");
          } catch (KeysmithException e) {
            throw new KeysmithException.WrongKind(
                "sequence " + name + " answered printed numbers, not integers: it is periodic or"
                    + " formatted; read them with nextNumbers (these were taken)",
                200, "wrong_kind", List.of(), null);
          }
        }, true));
  }

  /** {@code count} numbers as text: a periodic or formatted sequence's printed numbers. */
  public List<String> nextNumbers(String name, long count) {
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/next", count(count), null, j -> {
          List<String> out = new ArrayList<>();
          j.path("values").forEach(v -> out.add(v.asText()));
          return out;
        }, true));
  }

  /** A lease of {@code count} values reserved durably for this caller only. */
  public Lease reserve(String name, long count) {
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/reserve", count(count), null,
            j -> Lease.from(name, j), true));
  }

  /**
   * Hands a lease's values from {@code from} on back ({@code from} is one of its values); the
   * range that went back, or null when someone reserved since (the values then stay a gap).
   */
  public Range release(Lease lease, long from) {
    return release(lease.sequence(), lease.token(), from, lease.step());
  }

  Range release(String name, String token, long from, long step) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("lease", token).put("from", from);
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/release", null, b, j -> {
          JsonNode r = j.get("released");
          return r == null || r.isNull() ? null : Range.from(r, step);
        }, false));
  }

  // ---------------------------------------------------------------- tickets

  /**
   * The lowest free number of a gap-free sequence, held by a ticket for {@code ttlSeconds} (null:
   * the server's default). Commit it or release it.
   */
  public Ticket takeTicket(String name, Long ttlSeconds) {
    Map<String, String> q = ttlSeconds == null ? null : Map.of("ttl", ttlSeconds.toString());
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/tickets", q, null,
            j -> Ticket.from(name, j), true));
  }

  /** Makes the ticket's number final; answers the number. {@link KeysmithException.TicketRefused} changes nothing. */
  public String commitTicket(String name, String ticket) {
    return settle(name, ticket, "commit", "committed");
  }

  /** Frees the ticket's number for the next taker; answers it. */
  public String releaseTicket(String name, String ticket) {
    return settle(name, ticket, "release", "released");
  }

  private String settle(String name, String ticket, String action, String key) {
    return call(
        new Req<>("POST", "/v1/sequences/" + seg(name) + "/tickets/" + action,
            null, Json.MAPPER.createObjectNode().put("ticket", ticket), j -> Json.text(j, key), false));
  }

  /** The body of a lease's renewal and release: the token travels there, never in a URL. */
  private static JsonNode tokenBody(String token) {
    return Json.MAPPER.createObjectNode().put("token", token);
  }

  /** Takes a printed number apart; {@link KeysmithException.BadRequest} for text that is not one. */
  public NumberParts parse(String name, String text) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("value", text);
    return call(new Req<>("POST", "/v1/sequences/" + seg(name) + "/parse", null, b, NumberParts::from, true));
  }

  // ---------------------------------------------------------------- pools, ids, health

  /** Creates a value pool of {@code size} numbers from {@code start} (null: 1). */
  public PoolInfo createPool(String name, long size, Long start) {
    ObjectNode b = Json.MAPPER.createObjectNode().put("name", name).put("size", size);
    if (start != null) {
      b.put("start", start);
    }
    return call(new Req<>("POST", "/v1/pools", null, b, PoolInfo::from, false));
  }

  /** A pool as the server holds it. */
  public PoolInfo getPool(String name) {
    return call(new Req<>("GET", "/v1/pools/" + seg(name), null, null, PoolInfo::from, true));
  }

  /** Every pool. */
  public List<PoolInfo> listPools() {
    return call(
        new Req<>("GET", "/v1/pools", null, null, j -> {
          List<PoolInfo> out = new ArrayList<>();
          j.path("pools").forEach(p -> out.add(PoolInfo.from(p)));
          return out;
        }, true));
  }

  /**
   * {@code count} names {@code HOST/N} from the server's host counter (its {@code names} field);
   * {@link KeysmithException.Unavailable} when the server has no counter directory.
   */
  public List<String> counterNext(long count) {
    return call(
        new Req<>("POST", "/v1/counters/next", count(count), null, j -> {
          List<String> out = new ArrayList<>();
          j.path("names").forEach(n -> out.add(n.asText()));
          return out;
        }, true));
  }

  /** {@code GET /v1/status}: what the status page shows, as JSON. */
  public JsonNode status() {
    return call(new Req<>("GET", "/v1/status", null, null, j -> j, true));
  }

  /** Drops a pool. */
  public void dropPool(String name) {
    call(new Req<>("DELETE", "/v1/pools/" + seg(name), null, null, j -> null, false));
  }

  /** Numbers taken from a pool: {@code count}, or fewer when the server's answer is partial. */
  public long[] poolNext(String name, long count) {
    return call(
        new Req<>("POST", "/v1/pools/" + seg(name) + "/next", count(count), null,
            j -> Json.longs(j, "values"), true));
  }

  /** {@code count} time-ordered ids made by the server, increasing. */
  public long[] nextIds(long count) {
    return call(new Req<>("POST", "/v1/ids/next", count(count), null, j -> Json.longs(j, "ids"), true));
  }

  /**
   * {@code count} RFC 9562 version-7 UUIDs ({@code format=uuidv7}) over the same time, worker id
   * and sequence as {@link #nextIds}: unique by construction across the servers of a store,
   * increasing per server (as strings and as unsigned bytes; note that {@link
   * java.util.UUID#compareTo} compares signed halves). Bits: 48 of unix_ts_ms, version 7, a 12-bit
   * counter (rand_a), variant 10, a 22-bit worker id, 40 random bits.
   */
  public java.util.UUID[] nextUuids(long count) {
    Map<String, String> q = count(count);
    q.put("format", "uuidv7");
    return call(new Req<>("POST", "/v1/ids/next", q, null, j -> Json.uuids(j, "ids"), true));
  }

  /** An id taken apart by the server's layout; {@link KeysmithException.BadRequest} for one that is not of it. */
  public DecodedId decodeId(long id) {
    return call(new Req<>("GET", "/v1/ids/" + id, null, null, DecodedId::from, true));
  }

  /** {@code GET /healthz}: the store is reachable (a principal only, when the server has tokens). */
  public JsonNode health() {
    return call(new Req<>("GET", "/healthz", null, null, j -> j, true));
  }

  // ---------------------------------------------------------------- worker leases

  /**
   * Leases the lowest free worker id of {@code group} in {@code 0..max-1} for {@code ttlMs} (null:
   * the server's defaults, 1024 and 10 s). {@link KeysmithException.Conflict} when all are held.
   * Not sent again after an unknown outcome (it would hold a worker id until it expired).
   */
  public WorkerLeaseInfo leaseWorker(String group, Long ttlMs, Long max) {
    Map<String, String> q = new LinkedHashMap<>();
    if (ttlMs != null) {
      q.put("ttl_ms", ttlMs.toString());
    }
    if (max != null) {
      q.put("max", max.toString());
    }
    return call(new Req<>("POST", "/v1/workers/" + seg(group) + "/lease", q, null, WorkerLeaseInfo::from, false));
  }

  /**
   * Renews a worker lease (use the new token from then on); {@link KeysmithException.Conflict}
   * when it expired or another holder took the worker id.
   */
  public WorkerLeaseInfo renewWorker(String group, String token) {
    return renewWorker(group, token, deadline);
  }

  WorkerLeaseInfo renewWorker(String group, String token, Duration budget) {
    return call(
        new Req<>("POST", "/v1/workers/" + seg(group) + "/lease/renew", null, tokenBody(token),
            WorkerLeaseInfo::from, true),
        budget);
  }

  /** Releases a worker lease; false when it was lost already. */
  public boolean releaseWorker(String group, String token) {
    return call(
        new Req<>("POST", "/v1/workers/" + seg(group) + "/lease/release", null, tokenBody(token),
            j -> j.path("released").asBoolean(false), true));
  }

  /** The worker ids of {@code group} ever leased, held or free (never a token). */
  public List<WorkerInfo> listWorkers(String group) {
    return call(
        new Req<>("GET", "/v1/workers/" + seg(group), null, null, j -> {
          List<WorkerInfo> out = new ArrayList<>();
          j.path("workers").forEach(w -> out.add(WorkerInfo.from(w)));
          return out;
        }, true));
  }

  /**
   * A worker id of {@code group} leased now and renewed in the background every third of its TTL
   * (see {@link WorkerLease}).
   */
  public WorkerLease workerLease(String group, WorkerLease.Options options) {
    ensureOpen();
    WorkerLease l = new WorkerLease(this, group, options);
    handles.add(l);
    return l;
  }

  /**
   * A generator of time-ordered ids made in this process under a worker lease of {@code group},
   * taken lazily at the first id (see {@link TimeIdGenerator}).
   */
  public TimeIdGenerator timeIds(String group, IdLayout layout, WorkerLease.Options options) {
    ensureOpen();
    TimeIdGenerator g = new TimeIdGenerator(this, group, layout, options);
    handles.add(g);
    return g;
  }

  /** {@link #timeIds(String, IdLayout, WorkerLease.Options)} with the snowflake layout. */
  public TimeIdGenerator timeIds(String group) {
    return timeIds(group, IdLayout.SNOWFLAKE, new WorkerLease.Options());
  }

  // ---------------------------------------------------------------- lifecycle

  ExecutorService fetchers() {
    return fetchers;
  }

  ScheduledExecutorService scheduler() {
    return scheduler;
  }

  void forget(AutoCloseable handle) {
    handles.remove(handle);
  }

  private void ensureOpen() {
    if (closed) {
      throw new KeysmithException.Closed("keysmith: this client is closed");
    }
  }

  /**
   * Closes every sequence (handing unused tails back), worker lease and id generator made by this
   * client, then its threads. Idempotent.
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    for (AutoCloseable h : new ArrayList<>(handles)) {
      try {
        h.close();
      } catch (Exception e) {
        // each handle reports its own failures; the others still close
      }
    }
    closed = true;
    scheduler.shutdownNow();
    fetchers.shutdownNow();
  }
}
