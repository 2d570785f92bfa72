package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A value an opaque, encoded or bit-reversed sequence handed out, mapped back ({@link
 * KeysmithClient#decode}).
 *
 * @param value the value as an integer (an encoded string's number)
 * @param counter the plain counter the store keeps behind it
 */
public record DecodedValue(long value, long counter) {
  static DecodedValue from(JsonNode j) {
    return new DecodedValue(Json.longOf(j, "value"), Json.longOf(j, "counter"));
  }
}
