package dev.keysmith.client;

import java.io.File;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * A throwaway PostgreSQL: initdb into a temporary directory, pg_ctl start on a free port of
 * 127.0.0.1, pg_ctl stop (immediate) and the directory removed on close. Binaries from
 * {@code $KEYSMITH_PG_BIN}, else the newest {@code /usr/lib/postgresql/*}{@code /bin}. PostgreSQL
 * refuses root: as root, every binary runs as the {@code postgres} user (or {@code
 * $KEYSMITH_PG_USER}) through {@code setpriv}.
 */
final class PostgresServer implements AutoCloseable {
  final Path dir;
  final Path data;
  final Path bin;
  final List<String> asUser;
  final int port;

  private PostgresServer(Path dir, Path bin, List<String> asUser, int port) {
    this.dir = dir;
    this.data = dir.resolve("data");
    this.bin = bin;
    this.asUser = asUser;
    this.port = port;
  }

  static Path binaries() throws IOException {
    String env = System.getenv("KEYSMITH_PG_BIN");
    if (env != null && !env.isEmpty()) {
      return Path.of(env);
    }
    Path root = Path.of("/usr/lib/postgresql");
    if (Files.isDirectory(root)) {
      try (Stream<Path> vs = Files.list(root)) {
        Path best = vs.map(v -> v.resolve("bin"))
            .filter(b -> Files.isExecutable(b.resolve("initdb")) && Files.isExecutable(b.resolve("pg_ctl")))
            .max(Comparator.comparingInt(b -> {
              try {
                return Integer.parseInt(b.getParent().getFileName().toString());
              } catch (NumberFormatException e) {
                return 0;
              }
            }))
            .orElse(null);
        if (best != null) {
          return best;
        }
      }
    }
    throw new IllegalStateException(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in $KEYSMITH_PG_BIN or /usr/lib/postgresql/*/bin"
            + " (apt-get install postgresql)");
  }

  static PostgresServer start() throws Exception {
    Path bin = binaries();
    Path dir = Files.createTempDirectory("keysmith-java-pg-");
    List<String> asUser = new ArrayList<>();
    if ("root".equals(System.getProperty("user.name"))) {
      String user = System.getenv().getOrDefault("KEYSMITH_PG_USER", "postgres");
      run(List.of("chown", "-R", user + ":", dir.toString()));
      asUser.addAll(List.of("setpriv", "--reuid=" + user, "--regid=" + user, "--clear-groups", "--"));
    }
    int port;
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      port = s.getLocalPort();
    }
    PostgresServer pg = new PostgresServer(dir, bin, asUser, port);
    pg.pg(bin.resolve("initdb").toString(), "-D", pg.data.toString(), "-U", "keysmith",
        "--auth=trust", "-E", "UTF8", "--no-sync");
    pg.pg(bin.resolve("pg_ctl").toString(), "-D", pg.data.toString(), "-l", dir.resolve("log").toString(),
        "-w", "-t", "90", "-o",
        "-c listen_addresses=127.0.0.1 -p " + port + " -k " + dir + " -c fsync=off -c max_connections=100",
        "start");
    return pg;
  }

  String jdbcUrl() {
    return "jdbc:postgresql://127.0.0.1:" + port + "/postgres?user=keysmith";
  }

  private void pg(String... cmd) throws Exception {
    List<String> full = new ArrayList<>(asUser);
    full.addAll(List.of(cmd));
    run(full);
  }

  private static void run(List<String> cmd) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
    pb.redirectOutput(ProcessBuilder.Redirect.PIPE);
    Process p = pb.start();
    String out = new String(p.getInputStream().readAllBytes());
    if (p.waitFor() != 0) {
      throw new IllegalStateException("failed: " + String.join(" ", cmd) + "\n" + out);
    }
  }

  @Override
  public void close() throws Exception {
    try {
      pg(bin.resolve("pg_ctl").toString(), "-D", data.toString(), "-m", "immediate", "-w", "stop");
    } finally {
      try (Stream<Path> all = Files.walk(dir)) {
        all.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
      }
    }
  }
}
