package dev.keysmith.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** One real {@code keysmith --store sqlite://DB serve} process on 127.0.0.1, stopped by its PID. */
final class KeysmithServer implements AutoCloseable {
  static final String LEASE_SECRET = "a lease secret shared by the servers of one store";
  private static final Pattern URL = Pattern.compile("(https?)://127\\.0\\.0\\.1:(\\d+)");

  final Path store;
  final String token;
  final List<String> args;
  final List<String> log = Collections.synchronizedList(new ArrayList<>());
  Process proc;
  /** Removed on close: the directory {@link #start(String, String...)} made. */
  Path ownDir;
  String url;
  int port;

  KeysmithServer(Path store, String token, List<String> args) {
    this.store = store;
    this.token = token;
    this.args = args;
  }

  /** The {@code keysmith} binary: {@code $KEYSMITH_BIN}, else the workspace's release build. */
  static String binary() {
    String bin = System.getenv("KEYSMITH_BIN");
    if (bin != null && !bin.isEmpty()) {
      return bin;
    }
    Path built = Path.of("../../target/release/keysmith").toAbsolutePath().normalize();
    if (Files.isExecutable(built)) {
      return built.toString();
    }
    throw new IllegalStateException(
        "set KEYSMITH_BIN to a keysmith binary (cargo build --release -p keysmith-cli)");
  }

  /** A server on a new SQLite store in a temporary directory. */
  static KeysmithServer start(String token, String... args) throws IOException {
    Path dir = Files.createTempDirectory("keysmith-java-");
    KeysmithServer s = new KeysmithServer(dir.resolve("k.db"), token, List.of(args));
    s.ownDir = dir;
    return s.start(0);
  }

  static String name() {
    return "test/" + UUID.randomUUID().toString().substring(0, 12);
  }

  KeysmithServer start(int onPort) throws IOException {
    if (proc != null) {
      throw new IllegalStateException("already running");
    }
    Path counters = store.getParent().resolve("counters");
    Files.createDirectories(counters);
    List<String> cmd = new ArrayList<>(List.of(
        binary(), "--store", "sqlite://" + store, "serve", "--listen", "127.0.0.1:" + onPort,
        "--counter-dir", counters.toString(), "--counter-host", "testhost"));
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    Map<String, String> env = pb.environment();
    env.keySet().removeIf(k -> k.startsWith("KEYSMITH_"));
    env.put("KEYSMITH_LEASE_SECRET", LEASE_SECRET);
    env.put("KEYSMITH_SHARD_KEY_SECRET", "a test secret of more than sixteen bytes");
    if (token != null) {
      env.put("KEYSMITH_TOKEN", token);
    }
    pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
    pb.redirectInput(ProcessBuilder.Redirect.PIPE);
    proc = pb.start();
    proc.getOutputStream().close();
    BufferedReader err =
        new BufferedReader(new InputStreamReader(proc.getErrorStream(), StandardCharsets.UTF_8));
    String first = err.readLine();
    Matcher m = first == null ? null : URL.matcher(first);
    if (m == null || !m.find()) {
      StringBuilder rest = new StringBuilder();
      String line;
      while ((line = err.readLine()) != null) {
        rest.append(line).append('\n');
      }
      proc.destroyForcibly();
      proc = null;
      throw new IllegalStateException("keysmith serve did not start: " + first + "\n" + rest);
    }
    log.add(first);
    port = Integer.parseInt(m.group(2));
    url = m.group(1) + "://127.0.0.1:" + port;
    Process p = proc;
    Thread drain = new Thread(() -> {
      try {
        String line;
        while ((line = err.readLine()) != null) {
          log.add(line);
        }
      } catch (IOException e) {
        // the process ended
      }
    }, "keysmith-server-log");
    drain.setDaemon(true);
    drain.start();
    return this;
  }

  /** SIGKILL: no graceful shutdown, no tail handed back. */
  void kill() throws InterruptedException {
    if (proc != null) {
      proc.destroyForcibly();
      proc.waitFor();
      proc = null;
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited within 10 s; removes the directory it made. */
  @Override
  public void close() throws InterruptedException {
    if (proc != null) {
      proc.destroy();
      if (!proc.waitFor(10, TimeUnit.SECONDS)) {
        proc.destroyForcibly();
        proc.waitFor();
      }
      proc = null;
    }
    if (ownDir != null) {
      try (java.util.stream.Stream<Path> all = Files.walk(ownDir)) {
        all.sorted(java.util.Comparator.reverseOrder()).map(Path::toFile).forEach(java.io.File::delete);
      } catch (IOException e) {
        // a temporary directory left behind
      }
      ownDir = null;
    }
  }
}
