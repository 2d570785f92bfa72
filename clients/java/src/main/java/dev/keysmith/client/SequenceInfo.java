package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A sequence as the server shows it. {@code increment} and {@code offset} are set for a residue
 * class and null otherwise; {@code unaccounted} and {@code runwaySeconds} only from {@link
 * KeysmithClient#getSequence}; {@code raw} is the whole answer.
 *
 * @param name the name
 * @param next the next value not reserved yet
 * @param start the first value
 * @param max the largest value
 * @param block the default block size
 * @param increment a residue class's increment, or null
 * @param offset a residue class's offset, or null
 * @param unaccounted values reserved and not accounted for, or null
 * @param runwaySeconds seconds until exhaustion at the recent rate, or null
 * @param raw the server's JSON
 */
public record SequenceInfo(
    String name,
    long next,
    long start,
    long max,
    long block,
    Long increment,
    Long offset,
    Long unaccounted,
    Double runwaySeconds,
    JsonNode raw) {
  static SequenceInfo from(JsonNode j) {
    JsonNode rw = j.get("runway_seconds");
    return new SequenceInfo(
        Json.text(j, "name"),
        Json.longOf(j, "next"),
        Json.longOf(j, "start"),
        Json.longOf(j, "max"),
        Json.longOf(j, "block"),
        Json.optLong(j, "increment"),
        Json.optLong(j, "offset"),
        Json.optLong(j, "unaccounted"),
        rw == null || !rw.isNumber() ? null : rw.doubleValue(),
        j);
  }
}
