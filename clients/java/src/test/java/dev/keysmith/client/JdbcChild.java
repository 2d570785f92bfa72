package dev.keysmith.client;

import java.sql.Connection;
import java.sql.DriverManager;
import java.util.ArrayList;
import java.util.List;

/**
 * A child JVM of {@link JdbcKeysTest}: {@code JdbcChild KEYSMITH_URL SEQUENCE JDBC_URL THREADS
 * ROWS} inserts ROWS rows per thread into {@code orders} (keys from a cached sequence) and into
 * {@code events} (keys from time ids), each thread on its own connection; exits non-zero on any
 * error (a duplicate key is one).
 */
public final class JdbcChild {
  private JdbcChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String sequence = args[1];
    String jdbc = args[2];
    int threads = Integer.parseInt(args[3]);
    int rows = Integer.parseInt(args[4]);
    try (KeysmithClient c = KeysmithClient.of(url)) {
      insertFromThreads(c, sequence, jdbc, threads, rows, ProcessHandle.current().pid());
    }
  }

  /** The work of one process: THREADS threads sharing one sequence and one id generator. */
  static void insertFromThreads(KeysmithClient c, String sequence, String jdbc, int threads, int rows, long who)
      throws Exception {
    JdbcKeys orders = new JdbcKeys(c.sequence(sequence, new KeysmithSequence.Options().block(20).maxBlock(100)));
    JdbcKeys events = new JdbcKeys(c.timeIds("jdbc-events"));
    List<Object[]> batch = new ArrayList<>();
    for (int k = 0; k < 10; k++) {
      batch.add(new Object[] {"batch " + who + "/" + k});
    }
    Checks.threads(threads, i -> {
      try (Connection conn = DriverManager.getConnection(jdbc)) {
        for (int k = 0; k < rows; k += 10) {
          for (int j = 0; j < 9; j++) {
            orders.insert(conn, "INSERT INTO orders (id, note) VALUES (?, ?)", "p" + who + " t" + i);
          }
          events.insertBatch(conn, "INSERT INTO events (id, what) VALUES (?, ?)", batch);
          orders.insert(conn, "INSERT INTO orders (id, note) VALUES (?, ?)", "p" + who + " t" + i);
        }
      }
      return List.of();
    });
  }
}
