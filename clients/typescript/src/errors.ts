/**
 * An error from the keysmith service, or from reaching it.
 *
 * `code` is the server's stable code (`not_found`, `exhausted`,
 * `already_exists`, `bad_request`, `unauthorized`, `contention`,
 * `unavailable`, ...), or one of the client's own:
 * `unreachable` (no server answered: `status` is 0), `closed` (the
 * `Sequence` was closed), `bad_response` (the server answered something
 * this client does not understand).
 */
export class KeysmithError extends Error {
  /** A stable, machine-readable code. */
  readonly code: string;
  /** The HTTP status; 0 when no server answered. */
  readonly status: number;
  /** The server's `Retry-After`, in seconds, when it sent one. */
  readonly retryAfter: number | undefined;
  /** The base URL of the server that answered (or failed last). */
  readonly url: string | undefined;

  constructor(
    code: string,
    message: string,
    status: number,
    options: { retryAfter?: number | undefined; url?: string | undefined; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "KeysmithError";
    this.code = code;
    this.status = status;
    this.retryAfter = options.retryAfter;
    this.url = options.url;
  }
}

/** 401: no token, or the wrong one. Thrown at once, never retried. */
export class UnauthorizedError extends KeysmithError {}
/** 403: the token lacks the grant the call needs (or is over a quota). Thrown at once, never retried. */
export class ForbiddenError extends KeysmithError {}
/** 404: no sequence, pool or route of that name. */
export class NotFoundError extends KeysmithError {}
/** 409: the call conflicts with what the store holds (exists already, exhausted, ticket refused, wrong kind). */
export class ConflictError extends KeysmithError {}
/** 410: the sequence was dropped while the server had it open. */
export class GoneError extends KeysmithError {}
/**
 * 429: over the principal's rate. The client waits out `Retry-After` and
 * sends the call again when that fits in the call's deadline; otherwise this
 * is thrown, with `retryAfter` (seconds) when the server sent one.
 */
export class RateLimitedError extends KeysmithError {}
/** 503 from every server, or no server reachable, until the call's deadline ran out (`status` 0 then). */
export class UnavailableError extends KeysmithError {}
/**
 * A local mistake in how the client was set up, found on the first call: the
 * server's certificate not trusted by `caFile`, or the client certificate
 * refused. Thrown at once, never retried: trying again cannot fix it.
 */
export class SetupError extends KeysmithError {}

type ErrorClass = new (
  code: string,
  message: string,
  status: number,
  options?: { retryAfter?: number | undefined; url?: string | undefined; cause?: unknown },
) => KeysmithError;

const BY_STATUS: ReadonlyMap<number, ErrorClass> = new Map<number, ErrorClass>([
  [401, UnauthorizedError],
  [403, ForbiddenError],
  [404, NotFoundError],
  [409, ConflictError],
  [410, GoneError],
  [429, RateLimitedError],
  [502, UnavailableError],
  [503, UnavailableError],
  [504, UnavailableError],
]);

/** The error class of an HTTP status (0: no server answered): a typed one, else `KeysmithError`. */
export function errorClassOf(status: number): ErrorClass {
  return status === 0 ? UnavailableError : (BY_STATUS.get(status) ?? KeysmithError);
}

/**
 * The bearer token to send: one trailing line ending (`\n` or `\r\n`, as a
 * file or `$(cat ...)` leaves it) stripped. Throws a TypeError, saying where
 * the bad character is and never what the token is, for an empty token or one
 * with any other character than printable ASCII without spaces.
 */
export function checkToken(token: string | undefined, where = "token"): string | undefined {
  if (token === undefined) return undefined;
  if (typeof token !== "string") throw new TypeError(`keysmith: ${where} must be a string`);
  let t = token;
  if (t.endsWith("\r\n")) t = t.slice(0, -2);
  else if (t.endsWith("\n")) t = t.slice(0, -1);
  if (t.length === 0) throw new TypeError(`keysmith: ${where} is empty`);
  for (let i = 0; i < t.length; i++) {
    const c = t.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) {
      const what = c === 0x20 ? "a space" : c < 0x20 || c === 0x7f ? "a control character" : "a non-ASCII character";
      throw new TypeError(
        `keysmith: ${where} has ${what} at position ${i} (of ${t.length}); a token is printable ASCII without spaces (check the file or variable it came from; the token is not shown)`,
      );
    }
  }
  return t;
}
