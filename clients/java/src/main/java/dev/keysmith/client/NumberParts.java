package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A printed number taken apart ({@link KeysmithClient#parse}).
 *
 * @param period its period key, or null
 * @param n its counter
 */
public record NumberParts(Long period, long n) {
  static NumberParts from(JsonNode j) {
    return new NumberParts(Json.optLong(j, "period"), Json.longOf(j, "n"));
  }
}
