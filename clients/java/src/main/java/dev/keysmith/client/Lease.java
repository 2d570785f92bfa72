package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * Values reserved durably for this caller only ({@code POST /v1/sequences/{name}/reserve}): no one
 * else is ever handed them. Hand an unused tail back with {@link KeysmithClient#release}.
 *
 * @param sequence the sequence's name
 * @param ranges increasing, disjoint ranges
 * @param token the token that hands a tail back
 * @param step the distance between two values (1 but for a residue class)
 */
public record Lease(String sequence, List<Range> ranges, String token, long step) {
  /** The lease without its token (a secret: it releases the values). */
  @Override
  public String toString() {
    return "Lease[sequence=" + sequence + ", ranges=" + ranges + ", step=" + step + ", token=***]";
  }

  /** How many values the lease holds. */
  public long size() {
    long n = 0;
    for (Range r : ranges) {
      n += r.size();
    }
    return n;
  }

  static Lease from(String sequence, JsonNode j) {
    JsonNode s = j.get("step");
    long step = s == null || s.isNull() ? 1 : Json.asLong(s, "step");
    if (step < 1) {
      throw Json.bad("step", s);
    }
    List<Range> ranges = new ArrayList<>();
    JsonNode rs = j.get("ranges");
    if (rs == null || !rs.isArray()) {
      throw Json.bad("ranges", rs);
    }
    for (JsonNode r : rs) {
      ranges.add(Range.from(r, step));
    }
    return new Lease(sequence, List.copyOf(ranges), Json.text(j, "lease"), step);
  }
}
