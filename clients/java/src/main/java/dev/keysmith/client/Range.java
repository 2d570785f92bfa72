package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * The values {@code start, start + step, ...} strictly below {@code end}; {@code step} is 1 but
 * for a residue class (its increment).
 *
 * @param start the first value
 * @param end the first value past the range (exclusive)
 * @param step the distance between two values, at least 1
 */
public record Range(long start, long end, long step) {
  /** How many values the range holds. */
  public long size() {
    return end <= start ? 0 : (end - start + step - 1) / step;
  }

  static Range from(JsonNode j, long step) {
    return new Range(Json.longOf(j, "start"), Json.longOf(j, "end"), step);
  }
}
