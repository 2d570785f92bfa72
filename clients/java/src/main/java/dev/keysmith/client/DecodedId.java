package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A time-ordered id taken apart by the server's layout ({@link KeysmithClient#decodeId}).
 *
 * @param id the id
 * @param timeMs the start of its time unit, ms since 1970
 * @param time the same, RFC 3339
 * @param worker the worker id that made it
 * @param sequence its sequence within the time unit
 */
public record DecodedId(long id, long timeMs, String time, long worker, long sequence) {
  static DecodedId from(JsonNode j) {
    return new DecodedId(
        Json.longOf(j, "id"),
        Json.longOf(j, "time_ms"),
        Json.text(j, "time"),
        Json.longOf(j, "worker"),
        Json.longOf(j, "sequence"));
  }
}
