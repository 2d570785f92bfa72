package dev.keysmith.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Rows inserted into a real PostgreSQL with primary keys from keysmith, from several JVMs and
 * threads at once (each its own client and connection): no duplicate key, every row there.
 */
class JdbcKeysTest {
  @Test
  void manyProcessesAndThreadsInsertWithKeysmithKeys() throws Exception {
    int processes = 3;
    int threads = 4;
    int rows = 300;
    try (KeysmithServer server = KeysmithServer.start(null);
        PostgresServer pg = PostgresServer.start();
        KeysmithClient client = KeysmithClient.of(server.url)) {
      String seq = KeysmithServer.name();
      client.createSequence(seq, new KeysmithClient.CreateOptions().block(20));
      try (Connection conn = DriverManager.getConnection(pg.jdbcUrl()); Statement st = conn.createStatement()) {
        st.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text NOT NULL)");
        st.execute("CREATE TABLE events (id bigint PRIMARY KEY, what text NOT NULL)");
      }
      String java = ProcessHandle.current().info().command().orElse("java");
      List<Process> procs = new ArrayList<>();
      for (int i = 0; i < processes; i++) {
        ProcessBuilder pb = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
            JdbcChild.class.getName(), server.url, seq, pg.jdbcUrl(), Integer.toString(threads),
            Integer.toString(rows));
        pb.inheritIO();
        procs.add(pb.start());
      }
      // this JVM inserts too, beside its children
      JdbcChild.insertFromThreads(client, seq, pg.jdbcUrl(), threads, rows, 0);
      for (Process p : procs) {
        assertEquals(0, p.waitFor(), "a child failed (a duplicate key fails its insert)");
      }
      int writers = (processes + 1) * threads;
      try (Connection conn = DriverManager.getConnection(pg.jdbcUrl()); Statement st = conn.createStatement()) {
        assertEquals(writers * rows, count(st, "SELECT count(*) FROM orders"));
        assertEquals(writers * rows, count(st, "SELECT count(DISTINCT id) FROM orders"));
        assertEquals(writers * rows, count(st, "SELECT count(*) FROM events"));
        assertEquals(writers * rows, count(st, "SELECT count(DISTINCT id) FROM events"));
      }
    }
  }

  private static long count(Statement st, String sql) throws Exception {
    try (ResultSet rs = st.executeQuery(sql)) {
      rs.next();
      return rs.getLong(1);
    }
  }
}
