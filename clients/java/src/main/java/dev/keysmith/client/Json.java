package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.List;

/** Reading the server's JSON: integers exact as {@code long}, sent as numbers or strings. */
final class Json {
  static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  /** A bad answer: names the field and what came. */
  static KeysmithException bad(String what, JsonNode got) {
    return new KeysmithException.ServerError(
        "the server sent " + got + " for " + what + ", not what the client expects",
        0,
        "bad_response",
        List.of(),
        null);
  }

  /** The integer {@code field} of {@code j} (a JSON number or a decimal string). */
  static long longOf(JsonNode j, String field) {
    return asLong(j == null ? null : j.get(field), field);
  }

  static long asLong(JsonNode v, String what) {
    if (v != null) {
      if (v.isIntegralNumber() && v.canConvertToLong()) {
        return v.longValue();
      }
      if (v.isTextual()) {
        try {
          return Long.parseLong(v.asText());
        } catch (NumberFormatException e) {
          throw bad(what, v);
        }
      }
    }
    throw bad(what, v);
  }

  /** The integer {@code field}, or null when absent or JSON null. */
  static Long optLong(JsonNode j, String field) {
    JsonNode v = j.get(field);
    return v == null || v.isNull() ? null : asLong(v, field);
  }

  static String text(JsonNode j, String field) {
    JsonNode v = j.get(field);
    if (v == null || v.isNull()) {
      throw bad(field, v);
    }
    return v.asText();
  }

  static String optText(JsonNode j, String field) {
    JsonNode v = j.get(field);
    return v == null || v.isNull() ? null : v.asText();
  }

  /** The array {@code field} as UUIDs (JSON strings). */
  static java.util.UUID[] uuids(JsonNode j, String field) {
    JsonNode a = j.get(field);
    if (a == null || !a.isArray()) {
      throw bad(field, a);
    }
    java.util.UUID[] out = new java.util.UUID[a.size()];
    for (int i = 0; i < out.length; i++) {
      JsonNode v = a.get(i);
      if (!v.isTextual()) {
        throw bad(field, v);
      }
      try {
        out[i] = java.util.UUID.fromString(v.asText());
      } catch (IllegalArgumentException e) {
        throw bad(field, v);
      }
    }
    return out;
  }

  /** The array {@code field} as longs. */
  static long[] longs(JsonNode j, String field) {
    JsonNode a = j.get(field);
    if (a == null || !a.isArray()) {
      throw bad(field, a);
    }
    long[] out = new long[a.size()];
    for (int i = 0; i < out.length; i++) {
      out[i] = asLong(a.get(i), field);
    }
    return out;
  }
}
