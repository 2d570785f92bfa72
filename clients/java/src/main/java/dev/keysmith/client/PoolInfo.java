package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A value pool; {@code taken} only from {@link KeysmithClient#getPool}; {@code increment} and
 * {@code offset} for a pool in a residue class, null otherwise.
 *
 * @param name the name
 * @param start the first number
 * @param size how many free numbers it holds
 * @param taken how many were taken, or null
 * @param increment a residue class's increment, or null
 * @param offset a residue class's offset, or null
 * @param raw the server's JSON
 */
public record PoolInfo(
    String name, long start, long size, Long taken, Long increment, Long offset, JsonNode raw) {
  static PoolInfo from(JsonNode j) {
    return new PoolInfo(
        Json.text(j, "name"),
        Json.longOf(j, "start"),
        Json.longOf(j, "size"),
        Json.optLong(j, "taken"),
        Json.optLong(j, "increment"),
        Json.optLong(j, "offset"),
        j);
  }
}
