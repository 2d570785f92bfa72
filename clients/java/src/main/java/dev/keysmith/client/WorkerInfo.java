package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * One worker id of a group as {@link KeysmithClient#listWorkers} lists it (never a token).
 *
 * @param worker the worker id
 * @param held a live lease holds it
 * @param holder who holds it, or null
 * @param fence the fence of its last acquisition
 * @param untilMs its time floor: the next holder starts at or above it
 * @param expiresMs when the lease expires unless renewed, or null
 */
public record WorkerInfo(
    long worker, boolean held, String holder, long fence, long untilMs, Long expiresMs) {
  static WorkerInfo from(JsonNode j) {
    return new WorkerInfo(
        Json.longOf(j, "worker"),
        j.path("held").asBoolean(false),
        Json.optText(j, "holder"),
        Json.longOf(j, "fence"),
        Json.longOf(j, "until_ms"),
        Json.optLong(j, "expires_ms"));
  }
}
