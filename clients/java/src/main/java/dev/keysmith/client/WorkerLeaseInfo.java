package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A worker id held: what a lease or a renewal answers. Use the worker id only for ids whose time
 * lies in {@code notBeforeMs..untilMs}; renew before {@code expiresMs} with {@code token}.
 *
 * @param group the group
 * @param worker the worker id, in {@code 0..max-1}
 * @param fence grows with every new holder of the worker id
 * @param max the group's size
 * @param notBeforeMs ids use times at or above this (ms since 1970)
 * @param untilMs ids use times below this; renewals move it forward
 * @param expiresMs the lease expires then unless renewed (the server's clock)
 * @param ttlMs the lease's time to live
 * @param token renews and releases the lease (a secret: never log it)
 */
public record WorkerLeaseInfo(
    String group,
    long worker,
    long fence,
    long max,
    long notBeforeMs,
    long untilMs,
    long expiresMs,
    long ttlMs,
    String token) {
  static WorkerLeaseInfo from(JsonNode j) {
    return new WorkerLeaseInfo(
        Json.text(j, "group"),
        Json.longOf(j, "worker"),
        Json.longOf(j, "fence"),
        Json.longOf(j, "max"),
        Json.longOf(j, "not_before_ms"),
        Json.longOf(j, "until_ms"),
        Json.longOf(j, "expires_ms"),
        Json.longOf(j, "ttl_ms"),
        Json.text(j, "lease"));
  }

  @Override
  public String toString() {
    return "WorkerLeaseInfo[group=" + group + ", worker=" + worker + ", fence=" + fence
        + ", notBeforeMs=" + notBeforeMs + ", untilMs=" + untilMs + ", expiresMs=" + expiresMs
        + ", ttlMs=" + ttlMs + "]";
  }
}
