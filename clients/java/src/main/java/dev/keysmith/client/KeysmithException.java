package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;

/**
 * Any error of the keysmith client (unchecked, so that a {@link KeysmithSequence} can be a
 * {@link java.util.function.LongSupplier}).
 *
 * <p>{@link #status()} is the HTTP status (0 when no server answered), {@link #code()} the server's
 * stable error code ({@code not_found}, {@code exhausted}, ...) or {@code null}, {@link #similar()}
 * the existing names that look like an unknown one (404s), {@link #url()} the server that answered
 * or failed. The nested subclasses say what the caller can do about it. It never holds a token:
 * neither the client's (sent only in a header; URLs with a user or password are refused) nor a
 * worker lease's (a path segment, said as {@code /v1/workers/GROUP/lease/***}{@code /renew}).
 */
public class KeysmithException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final int status;
  private final String code;
  private final List<String> similar;
  private final String url;

  /** An error with a message only (status 0, no code). */
  public KeysmithException(String message) {
    this(message, 0, null, List.of(), null, null);
  }

  /**
   * An error as the server or the client reports it.
   *
   * @param message what went wrong and what to do
   * @param status the HTTP status, 0 when no server answered
   * @param code the server's error code, or null
   * @param similar names like an unknown one (may be empty)
   * @param url the server, or null
   * @param cause the underlying error, or null
   */
  public KeysmithException(
      String message, int status, String code, List<String> similar, String url, Throwable cause) {
    super(message, cause);
    this.status = status;
    this.code = code;
    this.similar = List.copyOf(similar);
    this.url = url;
  }

  /** The HTTP status; 0 when no server answered. */
  public int status() {
    return status;
  }

  /** The server's error code ({@code not_found}, {@code exhausted}, ...), or null. */
  public String code() {
    return code;
  }

  /** Existing names that look like an unknown one (404s); empty otherwise. */
  public List<String> similar() {
    return similar;
  }

  /** The server that answered or failed, or null. */
  public String url() {
    return url;
  }

  @Override
  public String getMessage() {
    String head = status != 0 ? status + " " + (code == null ? "" : code) + ": " : "";
    String tail = similar.isEmpty() ? "" : " (similar: " + String.join(", ", similar) + ")";
    return head + super.getMessage() + tail;
  }

  /** 400: the request was malformed (bad name, bad count, bad body, a backward alter...). */
  public static class BadRequest extends KeysmithException {
    private static final long serialVersionUID = 1L;

    BadRequest(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** 413: the body or the count is over the server's limit. */
  public static class TooLarge extends BadRequest {
    private static final long serialVersionUID = 1L;

    TooLarge(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u);
    }
  }

  /** 401: no token, or the wrong one. Give the client the server's token. */
  public static class Unauthorized extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Unauthorized(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** 403: the token is known but lacks the grant this call needs; nothing changed. */
  public static class Forbidden extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Forbidden(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /**
   * 429: too many requests (or failed authentications) from this caller. The client waits for
   * {@link #retryAfter()} and sends the request again only when that fits in the call's deadline;
   * otherwise this is thrown at once.
   */
  public static class RateLimited extends KeysmithException {
    private static final long serialVersionUID = 1L;
    private final java.time.Duration retryAfter;

    RateLimited(String m, int s, String c, List<String> sim, String u, java.time.Duration retryAfter) {
      super(m, s, c, sim, u, null);
      this.retryAfter = retryAfter;
    }

    /** The wait the server asked for ({@code Retry-After}); zero when it named none. */
    public java.time.Duration retryAfter() {
      return retryAfter;
    }
  }

  /**
   * 410: the lease, ticket or handle belongs to an earlier life of the name (it was dropped and
   * made again); nothing was written. Take a new one.
   */
  public static class Gone extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Gone(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /**
   * The client's own settings are refused: a server certificate the CA file does not vouch for, a
   * client certificate the server refuses (or none), an https URL of an http server. Thrown at once,
   * never retried: no retry can help.
   */
  public static class Setup extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Setup(String m, String u, Throwable cause) {
      super(m, 0, null, List.of(), u, cause);
    }
  }

  /** 404: no sequence or pool of that name (or no such route on that server). */
  public static class NotFound extends KeysmithException {
    private static final long serialVersionUID = 1L;

    NotFound(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** 409: the request conflicts with what the store holds. */
  public static class Conflict extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Conflict(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** 409 {@code already_exists}: a sequence or pool of that name exists already. */
  public static class AlreadyExists extends Conflict {
    private static final long serialVersionUID = 1L;

    AlreadyExists(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u);
    }
  }

  /** 409 {@code exhausted}: no value left below the sequence's or pool's maximum. */
  public static class Exhausted extends Conflict {
    private static final long serialVersionUID = 1L;

    Exhausted(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u);
    }
  }

  /** 409 {@code ticket_refused}: the ticket no longer holds its number; nothing changed. */
  public static class TicketRefused extends Conflict {
    private static final long serialVersionUID = 1L;

    TicketRefused(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u);
    }
  }

  /** 409 {@code wrong_kind}: the call does not fit the sequence's kind. */
  public static class WrongKind extends Conflict {
    private static final long serialVersionUID = 1L;

    WrongKind(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u);
    }
  }

  /**
   * 503 from every server (contention, store down, timeout), or no server reachable, until the
   * client's deadline ran out.
   */
  public static class Unavailable extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Unavailable(String m, int s, String c, List<String> sim, String u, Throwable cause) {
      super(m, s, c, sim, u, cause);
    }
  }

  /** 501: the server cannot do this as configured (e.g. no shard key secret). */
  public static class NotImplementedByServer extends KeysmithException {
    private static final long serialVersionUID = 1L;

    NotImplementedByServer(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** 500, another status the client does not know, or an answer it cannot read. */
  public static class ServerError extends KeysmithException {
    private static final long serialVersionUID = 1L;

    ServerError(String m, int s, String c, List<String> sim, String u) {
      super(m, s, c, sim, u, null);
    }
  }

  /** The sequence, lease, generator or client was closed. */
  public static class Closed extends KeysmithException {
    private static final long serialVersionUID = 1L;

    Closed(String m) {
      super(m);
    }
  }

  /**
   * A worker lease was lost (a renewal refused, or none succeeded before it expired): no id was
   * issued with its worker id from then on. {@link #getCause()} says why.
   */
  public static class LeaseLost extends KeysmithException {
    private static final long serialVersionUID = 1L;

    LeaseLost(String m, Throwable cause) {
      super(m, 0, "lease_lost", List.of(), null, cause);
    }
  }

  /** Unavailable with no answer (connection refused, reset, timed out). */
  static Unavailable unreachable(String message, String url, Throwable cause) {
    return new Unavailable(message, 0, null, List.of(), url, cause);
  }

  /** The exception for an error response: by the body's code, else by the status. */
  static KeysmithException fromResponse(int status, JsonNode body, String url) {
    String code = null;
    String message = "HTTP " + status;
    List<String> similar = new ArrayList<>();
    JsonNode err = body == null ? null : body.get("error");
    if (err != null && err.isObject()) {
      if (err.path("code").isTextual()) {
        code = err.get("code").asText();
      }
      if (err.path("message").isTextual()) {
        // a server (or a proxy) that names the path it was sent names a worker lease's token too
        message = KeysmithClient.redact(err.get("message").asText());
      }
      if (err.path("similar").isArray()) {
        err.get("similar").forEach(s -> similar.add(s.asText()));
      }
    }
    String c = code == null ? "" : code;
    switch (c) {
      case "bad_request":
      case "invalid_name":
      case "invalid_argument":
        return new BadRequest(message, status, code, similar, url);
      case "too_large":
        return new TooLarge(message, status, code, similar, url);
      case "unauthorized":
        return new Unauthorized(message, status, code, similar, url);
      case "forbidden":
        return new Forbidden(message, status, code, similar, url);
      case "rate_limited":
        return new RateLimited(message, status, code, similar, url, java.time.Duration.ZERO);
      case "dropped":
        return new Gone(message, status, code, similar, url);
      case "not_found":
      case "no_route":
        return new NotFound(message, status, code, similar, url);
      case "already_exists":
        return new AlreadyExists(message, status, code, similar, url);
      case "exhausted":
        return new Exhausted(message, status, code, similar, url);
      case "ticket_refused":
        return new TicketRefused(message, status, code, similar, url);
      case "wrong_kind":
        return new WrongKind(message, status, code, similar, url);
      case "ids_unavailable":
      case "contention":
      case "unavailable":
      case "timeout":
      case "closed":
      case "no_counter":
        return new Unavailable(message, status, code, similar, url, null);
      case "no_secret":
        return new NotImplementedByServer(message, status, code, similar, url);
      default:
        break;
    }
    switch (status) {
      case 400:
        return new BadRequest(message, status, code, similar, url);
      case 401:
        return new Unauthorized(message, status, code, similar, url);
      case 403:
        return new Forbidden(message, status, code, similar, url);
      case 404:
        return new NotFound(message, status, code, similar, url);
      case 409:
        return new Conflict(message, status, code, similar, url);
      case 410:
        return new Gone(message, status, code, similar, url);
      case 429:
        return new RateLimited(message, status, code, similar, url, java.time.Duration.ZERO);
      case 413:
        return new TooLarge(message, status, code, similar, url);
      case 501:
        return new NotImplementedByServer(message, status, code, similar, url);
      case 503:
        return new Unavailable(message, status, code, similar, url, null);
      default:
        return new ServerError(message, status, code, similar, url);
    }
  }
}
