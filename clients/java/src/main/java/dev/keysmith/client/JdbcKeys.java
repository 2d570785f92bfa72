package dev.keysmith.client;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.util.List;
import java.util.Objects;
import java.util.function.LongSupplier;

/**
 * Primary keys from keysmith for plain JDBC inserts: the key is taken from a {@link LongSupplier}
 * (a {@link KeysmithSequence} or a {@link TimeIdGenerator}) before the row is written, so the
 * application knows it without a round trip and no database sequence is involved.
 *
 * <pre>{@code
 * JdbcKeys keys = new JdbcKeys(client.sequence("orders"));
 * long id = keys.insert(conn, "INSERT INTO orders (id, note) VALUES (?, ?)", "first");
 * }</pre>
 *
 * <p>The key is bound as the statement's first parameter, the given values after it. A key is
 * never handed out twice, so an insert that fails (and is retried) takes a new one; the failed
 * one stays a gap. Thread-safe when the supplier is (both keysmith ones are).
 */
public final class JdbcKeys {
  private final LongSupplier keys;

  /** Keys from {@code keys}. */
  public JdbcKeys(LongSupplier keys) {
    this.keys = Objects.requireNonNull(keys, "keys");
  }

  /** The next key, without inserting. */
  public long nextKey() {
    return keys.getAsLong();
  }

  /**
   * Inserts one row: {@code sql} with the key as parameter 1 and {@code values} as 2, 3, ...
   *
   * @return the key of the row
   * @throws SQLException from the driver (the key stays a gap)
   */
  public long insert(Connection conn, String sql, Object... values) throws SQLException {
    long key = keys.getAsLong();
    try (PreparedStatement ps = conn.prepareStatement(sql)) {
      bind(ps, key, values);
      ps.executeUpdate();
    }
    return key;
  }

  /**
   * Inserts rows in one JDBC batch, a key each.
   *
   * @return the keys, in the order of {@code rows}
   * @throws SQLException from the driver (the keys stay gaps)
   */
  public long[] insertBatch(Connection conn, String sql, List<Object[]> rows) throws SQLException {
    long[] out = new long[rows.size()];
    try (PreparedStatement ps = conn.prepareStatement(sql)) {
      for (int i = 0; i < out.length; i++) {
        out[i] = keys.getAsLong();
        bind(ps, out[i], rows.get(i));
        ps.addBatch();
      }
      ps.executeBatch();
    }
    return out;
  }

  private static void bind(PreparedStatement ps, long key, Object[] values) throws SQLException {
    ps.setLong(1, key);
    for (int i = 0; i < values.length; i++) {
      ps.setObject(i + 2, values[i]);
    }
  }
}
