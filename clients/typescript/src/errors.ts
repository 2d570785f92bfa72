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
