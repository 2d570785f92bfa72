// HTTP with failover: every call goes to the server that answered last, and
// to the next one on a connection error or a 503 (502 and 504 too, the way a
// balancer says a server is down), honouring Retry-After, until a total
// deadline runs out.

import { KeysmithError, SetupError, UnavailableError, errorClassOf } from "./errors.js";

/** What `Transport` needs to know. */
export interface TransportOptions {
  urls: readonly string[];
  token?: string | undefined;
  /** The most one attempt (one server) may take, in ms. */
  timeoutMs: number;
  /** The most one call may take over all attempts and waits, in ms. */
  deadlineMs: number;
  fetch?: typeof fetch | undefined;
}

/** Counts since the client was made. */
export interface TransportStats {
  /** Calls made. */
  calls: number;
  /** Requests sent (more than calls when some were retried). */
  attempts: number;
  /** Attempts that reached no server (refused, reset, timed out). */
  unreachable: number;
  /** Attempts answered 502, 503 or 504 (then retried on the next server). */
  unavailable: number;
}

/** A 2xx answer. */
export interface Answer {
  status: number;
  text: string;
  url: string;
}

const RETRY_STATUSES = new Set([502, 503, 504]);
/** The longest Retry-After the client believes, in seconds (a bound, not a default). */
const MAX_RETRY_AFTER_S = 60;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// `path` with a worker lease's token replaced by three asterisks
// (`/v1/workers/GROUP/lease/TOKEN/renew` becomes `.../lease/[three asterisks]/renew`):
// what messages may say of a request path, since the token is a credential.
export function redactPath(path: string): string {
  return path.replace(/(\/v1\/workers\/[^/?#]+\/lease\/)[^/?#]+/, "$1***");
}

/** Seconds from a Retry-After header (delta-seconds or an HTTP date). */
export function parseRetryAfter(h: string | null, now = Date.now()): number | undefined {
  if (h === null) return undefined;
  const t = h.trim();
  if (/^\d+$/.test(t)) return Math.min(Number(t), MAX_RETRY_AFTER_S);
  const at = Date.parse(t);
  if (Number.isNaN(at)) return undefined;
  return Math.min(Math.max(0, (at - now) / 1000), MAX_RETRY_AFTER_S);
}

/** The error a non-2xx answer stands for. */
export function errorOf(status: number, text: string, url: string, retryAfter?: number): KeysmithError {
  let code = `http_${status}`;
  let message = text.length > 200 ? `${text.slice(0, 200)}...` : text;
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    if (body && typeof body.error === "object" && body.error !== null) {
      if (typeof body.error.code === "string") code = body.error.code;
      if (typeof body.error.message === "string") message = body.error.message;
    }
  } catch {
    // not JSON: keep the text
  }
  const Cls = errorClassOf(status);
  return new Cls(code, message || `HTTP ${status} from ${url}`, status, { retryAfter, url });
}

export class Transport {
  readonly urls: readonly string[];
  /** The headers of a request without and with a JSON body, built once (private: `inspect` never shows the token). */
  readonly #plain: Record<string, string>;
  readonly #json: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly deadlineMs: number;
  private readonly fetchFn: typeof fetch;
  readonly stats: TransportStats = { calls: 0, attempts: 0, unreachable: 0, unavailable: 0 };
  /** The server that answered last: calls start there. */
  private current = 0;
  /** Per server: not before this time (ms since the epoch). */
  private readonly notBefore: number[];
  /** Per server: connection failures in a row. */
  private readonly failures: number[];

  constructor(o: TransportOptions) {
    if (o.urls.length === 0) throw new TypeError("keysmith: give at least one server URL");
    this.urls = o.urls.map((u) => {
      const parsed = new URL(u); // throws on a bad URL, early
      return parsed.href.replace(/\/+$/, "");
    });
    this.#plain = { accept: "application/json" };
    if (o.token !== undefined) this.#plain.authorization = `Bearer ${o.token}`;
    this.#json = { ...this.#plain, "content-type": "application/json" };
    this.timeoutMs = o.timeoutMs;
    this.deadlineMs = o.deadlineMs;
    this.fetchFn = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.notBefore = this.urls.map(() => 0);
    this.failures = this.urls.map(() => 0);
  }

  /**
   * Sends a request and answers its 2xx answer; throws a KeysmithError for
   * any other answer, or when no server answered before the deadline.
   *
   * `once`: the request must not be sent again after it may have reached a
   * server (a repeated ticket commit would be refused although the first one
   * took effect). It then fails over only when it surely was not sent (the
   * connection was refused) or after a 503 that changed nothing (any but
   * `timeout`); otherwise it throws at once, saying so.
   */
  async request(
    method: string,
    path: string,
    body?: string,
    options: { once?: boolean; deadlineMs?: number } = {},
  ): Promise<Answer> {
    const started = Date.now();
    const deadline = started + (options.deadlineMs ?? this.deadlineMs);
    const headers = body === undefined ? this.#plain : this.#json;
    const n = this.urls.length;
    let last: KeysmithError | undefined;
    let attempts = 0;
    this.stats.calls++;

    for (;;) {
      const now = Date.now();
      let pick = -1;
      for (let k = 0; k < n; k++) {
        const i = (this.current + k) % n;
        if ((this.notBefore[i] ?? 0) <= now) {
          pick = i;
          break;
        }
      }
      if (last !== undefined && now >= deadline) throw this.gaveUp(last, started, attempts);
      if (pick < 0) {
        const wake = Math.min(...this.notBefore);
        if (wake < deadline) {
          await sleep(Math.max(1, wake - now));
          continue;
        }
        if (last !== undefined) throw this.gaveUp(last, started, attempts);
        // Every server is still waiting out an earlier call's failure past this
        // call's deadline: try the one that is free first, once.
        pick = this.notBefore.indexOf(wake);
      }

      const base = this.urls[pick] as string;
      attempts++;
      this.stats.attempts++;
      let res: Response;
      let text: string;
      const init = (): RequestInit => ({
        method,
        headers,
        body,
        // Within what is left of the deadline, but never under a second
        // (or timeoutMs): an attempt started must have a chance to finish.
        signal: AbortSignal.timeout(Math.min(this.timeoutMs, Math.max(deadline - now, 1000))),
      });
      try {
        res = await this.fetchFn(base + path, init());
        text = await res.text();
        // A leader-ordered sequence that another server leads: the 421 names
        // the leader; the same request goes there, once, with this client's
        // token and TLS settings.
        const leader = res.status === 421 ? leaderOf(res.headers.get("keysmith-leader"), base) : undefined;
        if (leader !== undefined) {
          res = await this.fetchFn(leader + path, init());
          text = await res.text();
        }
      } catch (e) {
        // Refused, reset, timed out, or the answer broke off: try the next server.
        // (A request whose answer was lost only leaves a gap: the values it
        // may have taken are never handed out again.)
        this.stats.unreachable++;
        if (tlsRefusal(e)) {
          // a setup mistake (caFile, client certificate): no other try can succeed
          throw new SetupError(
            "tls",
            `${base}: the TLS connection was refused (${describe(e)}); check caFile (the CA that signed the server's certificate) and certFile/keyFile`,
            0,
            { url: base, cause: e },
          );
        }
        const f = (this.failures[pick] = (this.failures[pick] ?? 0) + 1);
        this.notBefore[pick] = Date.now() + Math.min(25 * 2 ** Math.min(f, 10), 1000);
        if (options.once && !notSent(e)) {
          throw new UnavailableError(
            "unreachable",
            `${base}${redactPath(path)}: ${describe(e)}; the request may or may not have taken effect, so it was not sent again`,
            0,
            { url: base, cause: e },
          );
        }
        last = new UnavailableError("unreachable", `cannot reach ${base}: ${describe(e)}`, 0, { url: base, cause: e });
        continue;
      }

      if (RETRY_STATUSES.has(res.status)) {
        this.stats.unavailable++;
        const ra = parseRetryAfter(res.headers.get("retry-after"));
        this.notBefore[pick] = Date.now() + (ra ?? 1) * 1000;
        last = errorOf(res.status, text, base, ra);
        if (options.once && (res.status !== 503 || last.code === "timeout")) {
          // the server gave up waiting (or a balancer gave up on it), but the store may still carry the change out
          throw new (errorClassOf(last.status))(last.code, `${last.message}; the request may still take effect, so it was not sent again`, last.status, {
            retryAfter: ra,
            url: base,
          });
        }
        continue;
      }
      if (res.status === 429) {
        // not taken: sent again after Retry-After when that fits in the deadline
        const ra = parseRetryAfter(res.headers.get("retry-after"));
        const limited = errorOf(429, text, base, ra);
        if (ra === undefined || Date.now() + ra * 1000 > deadline) throw limited;
        last = limited;
        this.notBefore[pick] = Date.now() + ra * 1000;
        continue;
      }
      this.failures[pick] = 0;
      this.notBefore[pick] = 0;
      this.current = pick;
      if (res.status >= 200 && res.status < 300) return { status: res.status, text, url: base };
      throw errorOf(res.status, text, base, parseRetryAfter(res.headers.get("retry-after")));
    }
  }

  private gaveUp(last: KeysmithError, started: number, attempts: number): KeysmithError {
    const n = this.urls.length;
    return new (errorClassOf(last.status))(
      last.code,
      `${last.message} (no server answered in ${Date.now() - started} ms: ${attempts} attempt${attempts === 1 ? "" : "s"} on ${n} server${n === 1 ? "" : "s"})`,
      last.status,
      { retryAfter: last.retryAfter, url: last.url, cause: last },
    );
  }
}

/**
 * The leader's address a 421 `not_leader` names (its `Keysmith-Leader` header), if it is one;
 * never an `http` leader for a request that went over `https` (the token is not sent in clear
 * text: the 421 reaches the caller as an error naming the leader).
 */
function leaderOf(header: string | null, base: string): string | undefined {
  if (header === null || !/^https?:\/\//.test(header)) return undefined;
  if (base.startsWith("https://") && !header.startsWith("https://")) return undefined;
  return header.replace(/\/+$/, "");
}

/** TLS error codes of Node.js (its own and OpenSSL's) that say the connection can never be made secure as set up. */
const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|UNABLE_TO_|SELF_SIGNED_CERT|DEPTH_ZERO_SELF_SIGNED_CERT|CERT_|ERR_OSSL_)/;

/** Whether a failed fetch is a TLS refusal (the server's certificate not trusted, the client certificate refused). */
function tlsRefusal(e: unknown): boolean {
  let cur: unknown = e;
  for (let depth = 0; depth < 6 && cur !== null && typeof cur === "object"; depth++) {
    const code = (cur as { code?: unknown }).code;
    if (typeof code === "string" && TLS_CODES.test(code)) return true;
    const message = (cur as { message?: unknown }).message;
    if (typeof message === "string" && /certificate required|alert (bad|unknown) certificate|SSL routines/i.test(message)) return true;
    cur = (cur as { cause?: unknown }).cause;
  }
  return false;
}

/** Whether a failed fetch surely never reached the server (the connection was refused or never made). */
function notSent(e: unknown): boolean {
  const cause = e instanceof Error ? (e as { cause?: unknown }).cause : undefined;
  const code = cause !== null && typeof cause === "object" ? (cause as { code?: unknown }).code : undefined;
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "UND_ERR_CONNECT_TIMEOUT";
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const cause = (e as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message) return `${e.message} (${cause.message})`;
    if (e.name === "TimeoutError") return "timed out";
    return e.message;
  }
  return String(e);
}
