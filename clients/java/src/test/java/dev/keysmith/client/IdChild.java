package dev.keysmith.client;

import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;

/**
 * A child JVM of {@link WorkerTest}: {@code IdChild URL GROUP COUNT} makes COUNT time ids with its
 * own client, prints {@code worker W}, the ids one a line, then {@code end}; it keeps its lease
 * until its standard input closes, so that all children hold theirs at once.
 */
public final class IdChild {
  private IdChild() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String group = args[1];
    int count = Integer.parseInt(args[2]);
    BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.US_ASCII), 1 << 16);
    try (KeysmithClient c = KeysmithClient.of(url);
        TimeIdGenerator ids = c.timeIds(group)) {
      long first = ids.next();
      out.write("worker " + ids.lease().worker() + "\n");
      out.write(first + "\n");
      for (int i = 1; i < count; i++) {
        out.write(ids.next() + "\n");
      }
      out.write("end\n");
      out.flush();
      while (System.in.read() >= 0) {
        // hold the lease until the parent closes our stdin
      }
    }
  }
}
