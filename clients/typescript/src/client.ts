import { KeysmithError, checkToken } from "./errors.js";
import {
  leaseWorker,
  listWorkers,
  releaseWorker,
  renewWorker,
  ProcessWorkerLease,
  WorkerLease,
  type WorkerInfo,
  type WorkerLeaseInfo,
  type WorkerLeaseOptions,
} from "./workers.js";
import { type Json, parse, stringify } from "./json.js";
import { type Lease, type LeaseSource, type Range, Sequence, type SequenceOptions } from "./sequence.js";
import { readText, tlsFetch } from "./tls.js";
import { Transport, redactPath, type TransportStats } from "./transport.js";

/** Options of `new Client`. */
export interface ClientOptions {
  /** A base URL (`http://127.0.0.1:7878`), or several: calls fail over to the next one. */
  url: string | readonly string[];
  /**
   * The server's bearer token, when it has one. One trailing newline is
   * stripped (as a file or an environment variable may leave it); any other
   * character that is not printable ASCII throws a TypeError when the client
   * is made, without showing the token.
   */
  token?: string | undefined;
  /** A file holding the token (Node.js; read when the client is made), instead of `token`. */
  tokenFile?: string | undefined;
  /** The most one attempt on one server may take, in ms (default 15000). */
  timeoutMs?: number;
  /**
   * How long one call keeps trying servers, retrying and waiting out
   * Retry-After, in ms (default 30000); then it fails with the last error.
   * No attempt starts after it, and one in flight gets at least a second.
   */
  deadlineMs?: number;
  /** A fetch to use instead of the global one (not with caFile, certFile or keyFile). */
  fetch?: typeof fetch;
  /**
   * For `https://` URLs: the PEM file of the CA that signed the server's
   * certificate, trusted instead of the system's CAs (Node.js; read when the
   * client is made).
   */
  caFile?: string;
  /**
   * A client certificate (PEM) for a server that requires one (`keysmith
   * serve --client-ca`); with `keyFile`, its key (or the key in this file).
   */
  certFile?: string;
  /** The private key (PEM) of `certFile`. */
  keyFile?: string;
}

/** A number for the server: a `bigint`, a safe integer, or its decimal string. */
export type IntLike = bigint | number | string;

/** What this server's handle of a sequence has done (null until it served a value). */
export interface SequenceServerView {
  block: number;
  served: number;
  last_served: bigint | null;
  rate: number;
  refills: number;
  conflicts: number;
}

/** How often a periodic sequence's numbers restart (by the store's clock, UTC). */
export type Period = "day" | "month" | "year";

/** How a numbered sequence hands out its numbers. */
export interface Numbering {
  /** Gap-free: numbers are taken with tickets (`takeTicket`), `next` is refused. */
  gapless: boolean;
  period: Period | null;
  /** How numbers are printed, e.g. `INV-{period}-{n:04}`. */
  template: string | null;
  /** Of a residue class: every value is `offset` modulo `increment`. */
  residue?: { increment: number; offset: number } | null;
}

/** A sequence as `GET /v1/sequences/{name}` shows it. */
export interface SequenceInfo {
  name: string;
  /** The next value nobody has reserved; `max + 1` once exhausted. */
  next: bigint;
  start: bigint;
  max: bigint;
  /** The sequence's default block. */
  block: number;
  version: number | bigint;
  /** Values not yet reserved by anyone. */
  remaining: bigint;
  server: SequenceServerView | null;
  /** Set for a gap-free, periodic, formatted or residue-class sequence (by `createSequence` and `getSequence`). */
  numbering?: Numbering;
  /**
   * Of a residue class (undefined for any other sequence): every value is
   * `offset` modulo `increment`, and `next`, `start` and `max` are values of it.
   */
  increment?: number;
  /** Of a residue class: every value's remainder modulo `increment`. */
  offset?: number;
  /** Reserved values no clean close accounted for (only from `getSequence`). */
  unaccounted?: bigint;
  /** Seconds until the maximum at the current rate, null without a rate (only from `getSequence`). */
  runway_seconds?: number | null;
}

/** A number of a numbered sequence: a `bigint`, or its text for a formatted one (`"INV-2026-0042"`). */
export type NumberValue = bigint | string;

/** A gap-free number held by a ticket (`takeTicket`): commit it or release it. */
export interface Ticket {
  sequence: string;
  /** The number: its text for a formatted sequence. */
  value: NumberValue;
  /** The ticket that commits or releases it. */
  ticket: string;
  /** The period key (`20261123`, `202611`, `2026`), or null. */
  period: number | null;
  /** The counter within the period. */
  n: bigint;
}

/** A printed number taken apart (`parse`). */
export interface NumberParts {
  period: number | null;
  n: bigint;
}

/** A value an opaque, encoded or bit-reversed sequence handed out, mapped back (`decode`). */
export interface DecodedValue {
  /** The value as an integer (an encoded string decoded). */
  value: bigint;
  /** The plain counter it was made from. */
  counter: bigint;
}

/** A time-ordered id taken apart by the server's layout (`decodeId`). */
export interface DecodedId {
  id: bigint;
  /** The start of its time unit, ms since the Unix epoch. */
  time_ms: number;
  /** The same, RFC 3339. */
  time: string;
  worker: number;
  sequence: number;
}

/** What this server's handle of a pool has done (null until it served a number). */
export interface PoolServerView {
  served: number;
  rate: number;
  attempts: number;
  conflicts: number;
  conflict_rate: number;
}

/** A pool as `GET /v1/pools` lists it. */
export interface PoolRow {
  name: string;
  /** The first number (for a pool in a residue class, a value of it). */
  start: bigint;
  size: number;
  server: PoolServerView | null;
  /**
   * Of a pool in a residue class (undefined for any other pool): every number
   * is `offset` modulo `increment`; `start`, `lowest`, `highest` and
   * `max_value` are values of it.
   */
  increment?: number;
  /** Of a pool in a residue class: every number's remainder modulo `increment`. */
  offset?: number;
}

/** A pool as `GET /v1/pools/{name}` shows it. */
export interface PoolInfo extends PoolRow {
  lowest: bigint;
  highest: bigint;
  taken: bigint;
  max_value: bigint;
}

/** Names from `POST /v1/counters/next`: `<host>/<n>`. */
export interface CounterNames {
  host: string;
  first: bigint;
  last: bigint;
  names: string[];
}

/** An id in a shard key: an integer (an i64), `"TYPE:VALUE"`, or `{type, value}`. */
export type ShardId = IntLike | { type: string; value: Json };

/** The parts of a shard key, for `encodeShardKey`. */
export interface ShardKeyParts {
  /** One character naming where the data comes from. */
  origin: string;
  /** 0..65535. */
  shard: number;
  record: ShardId;
  children?: ShardId[];
}

/** A shard key as the server shows it. */
export interface ShardKeyView {
  /** The URL-safe string, signed with the server's secret. */
  external: string;
  /** `{origin, shard, record: {type, value}, children: [...]}`; integers above 2^53 are bigints. */
  key: { [k: string]: Json };
  /** The compact list, `["c", 3, 42, 7]`. */
  list: Json[];
}

/** Checks for `decodeShardKey`. */
export interface DecodeOptions {
  /** Fail unless the key has this origin. */
  origin?: string;
  /** Fail unless the record id has this type (needs `origin`). */
  record_type?: string;
  /** With `record_type`: the type of each child id, outermost first. */
  child_types?: string[];
}

/** `GET /healthz`. */
export interface Health {
  status: string;
  store?: string;
}

const big = (v: Json | undefined, what: string): bigint => {
  if (typeof v === "bigint") return v;
  if (typeof v === "number" && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === "string" && /^-?\d+$/.test(v)) return BigInt(v);
  throw new KeysmithError("bad_response", `the server sent ${String(v)} for ${what}, not an integer`, 0);
};

const bigOrNull = (v: Json | undefined, what: string): bigint | null => (v === null || v === undefined ? null : big(v, what));

const int = (v: IntLike, what: string): string => {
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") {
    if (!Number.isSafeInteger(v)) throw new RangeError(`keysmith: ${what} must be a whole number (use a bigint above 2^53), got ${v}`);
    return String(v);
  }
  if (!/^-?\d+$/.test(v)) throw new RangeError(`keysmith: ${what} must be an integer, got ${JSON.stringify(v)}`);
  return v;
};

const count = (n: number): string => {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`keysmith: count must be a whole number >= 1, got ${n}`);
  return String(n);
};

type Obj = { [k: string]: Json };

const obj = (v: Json, what: string): Obj => {
  if (v === null || typeof v !== "object" || Array.isArray(v)) {
    throw new KeysmithError("bad_response", `the server's answer to ${what} is not a JSON object`, 0);
  }
  return v;
};

const numberValue = (v: Json | undefined, what: string): NumberValue => (typeof v === "string" ? v : big(v, what));

const smallOrNull = (v: Json | undefined, what: string): number | null => {
  if (v === null || v === undefined) return null;
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  throw new KeysmithError("bad_response", `the server sent ${String(v)} for ${what}, not a small integer`, 0);
};

const small = (v: Json | undefined, what: string): number => {
  const n = smallOrNull(v, what);
  if (n === null) throw new KeysmithError("bad_response", `the server sent no ${what}`, 0);
  return n;
};

function sequenceInfo(o: Obj): SequenceInfo {
  const s = o.server;
  let server: SequenceServerView | null = null;
  if (s !== null && s !== undefined && typeof s === "object" && !Array.isArray(s)) {
    server = { ...(s as object), last_served: bigOrNull(s.last_served, "last_served") } as SequenceServerView;
  }
  return {
    ...(o as object),
    name: String(o.name),
    next: big(o.next, "next"),
    start: big(o.start, "start"),
    max: big(o.max, "max"),
    remaining: big(o.remaining, "remaining"),
    server,
    ...(o.unaccounted === undefined ? {} : { unaccounted: big(o.unaccounted, "unaccounted") }),
    ...residueOf(o),
  } as SequenceInfo;
}

/** The `increment` and `offset` of a residue class's answer, or nothing. */
function residueOf(o: Obj): { increment?: number; offset?: number } {
  return o.increment === undefined || o.increment === null
    ? {}
    : { increment: small(o.increment, "increment"), offset: smallOrNull(o.offset, "offset") ?? 0 };
}

function poolInfo(o: Obj): PoolInfo {
  const r = { ...(o as object), name: String(o.name), start: big(o.start, "start"), ...residueOf(o) } as Obj & {
    [k: string]: unknown;
  };
  for (const k of ["lowest", "highest", "taken", "max_value"]) {
    if (o[k] !== undefined) r[k] = big(o[k], k) as unknown as Json;
  }
  return r as unknown as PoolInfo;
}

function strings(o: Obj, key: string, what: string): bigint[] {
  const vs = o[key];
  if (!Array.isArray(vs)) throw new KeysmithError("bad_response", `the server's answer to ${what} has no ${key} list`, 0);
  return vs.map((v) => big(v, key));
}

/**
 * A client of the keysmith HTTP service.
 *
 * ```ts
 * const client = new Client({ url: "http://127.0.0.1:7878" });
 * // or over TLS, with the server's CA and a client certificate:
 * // new Client({ url: "https://keys.internal:7878", caFile: "ca.pem", certFile: "client.pem", keyFile: "client-key.pem" })
 * const orders = client.sequence("orders");
 * const id: bigint = await orders.next();
 * ```
 */
export class Client implements LeaseSource {
  private readonly t: Transport;

  constructor(options: ClientOptions) {
    const urls = typeof options.url === "string" ? [options.url] : [...options.url];
    const { caFile, certFile, keyFile } = options;
    const tls = caFile !== undefined || certFile !== undefined || keyFile !== undefined;
    if (tls && options.fetch !== undefined) {
      throw new TypeError("keysmith: give either fetch or caFile/certFile/keyFile, not both");
    }
    if (options.token !== undefined && options.tokenFile !== undefined) {
      throw new TypeError("keysmith: give token or tokenFile, not both");
    }
    const token =
      options.tokenFile !== undefined
        ? checkToken(readText(options.tokenFile, "tokenFile"), `the token in tokenFile ${JSON.stringify(options.tokenFile)}`)
        : checkToken(options.token);
    this.t = new Transport({
      urls,
      token,
      timeoutMs: options.timeoutMs ?? 15_000,
      deadlineMs: options.deadlineMs ?? 30_000,
      fetch: tls ? tlsFetch({ caFile, certFile, keyFile }) : options.fetch,
    });
  }

  /** The servers' base URLs, as normalised. */
  get urls(): readonly string[] {
    return this.t.urls;
  }

  /** Calls, requests and failed attempts since this client was made (a live view). */
  get stats(): Readonly<TransportStats> {
    return this.t.stats;
  }

  /**
   * A handle that serves values of the sequence `name` from blocks leased
   * from the server (see `Sequence`). Nothing is sent before the first value
   * is asked for.
   */
  sequence(name: string, options: SequenceOptions = {}): Sequence {
    return new Sequence(this, name, options);
  }

  private async call(method: string, path: string, body?: unknown, once = false, deadlineMs?: number): Promise<Json> {
    const a = await this.t.request(method, path, body === undefined ? undefined : stringify(body), { once, deadlineMs });
    try {
      return parse(a.text);
    } catch (e) {
      throw new KeysmithError("bad_response", `${a.url}${redactPath(path)} answered something that is not JSON: ${(e as Error).message}`, a.status, {
        url: a.url,
        cause: e,
      });
    }
  }

  private async callObj(method: string, path: string, body?: unknown, once = false): Promise<Obj> {
    return obj(await this.call(method, path, body, once), `${method} ${redactPath(path)}`);
  }

  // ---- sequences

  /**
   * Creates a sequence; `409 already_exists` if there is one of that name.
   * `gapless`: gap-free numbers taken with tickets (`takeTicket`); `period`:
   * numbers restart every day, month or year; `format`: how numbers are
   * printed, e.g. `INV-{period}-{n:04}` (read them with `nextNumbers`).
   * `increment` (2 to 1000000) and `offset` (0 to `increment - 1`, default 0):
   * a residue class, every value is `offset` modulo `increment` (one per
   * region, each with its own store: no two ever hand out the same value);
   * the server checks them (a 400 `invalid_argument` or `bad_request`).
   * `opaque`: values are a keyed permutation of a plain counter (1 to max; the
   * key stays on the server); `encoding` (`"base32"`, `"base62"`) with an
   * optional `prefix` (`"ord"` gives `ord_...`): fixed-width strings that sort
   * as the numbers, read with `nextNumbers`; `decode` maps either back.
   * `jsSafe`: max 2^53-1.
   */
  async createSequence(
    name: string,
    o: {
      start?: IntLike;
      max?: IntLike;
      block?: number;
      gapless?: boolean;
      period?: Period;
      format?: string;
      increment?: number;
      offset?: number;
      opaque?: boolean;
      encoding?: "base32" | "base62";
      prefix?: string;
      jsSafe?: boolean;
      /** `"leader"`: one leased leader hands values out in arrival order (take them with `next`, which follows a follower's 421 to the leader). */
      order?: "cached" | "leader";
    } = {},
  ): Promise<SequenceInfo> {
    const body: Record<string, unknown> = { name };
    if (o.start !== undefined) body.start = BigInt(int(o.start, "start"));
    if (o.max !== undefined) body.max = BigInt(int(o.max, "max"));
    if (o.block !== undefined) body.block = o.block;
    if (o.gapless) body.gapless = true;
    if (o.period !== undefined) body.period = o.period;
    if (o.format !== undefined) body.format = o.format;
    if (o.increment !== undefined) body.increment = BigInt(int(o.increment, "increment"));
    if (o.offset !== undefined) body.offset = BigInt(int(o.offset, "offset"));
    if (o.opaque) body.opaque = true;
    if (o.jsSafe) body.js_safe = true;
    if (o.encoding !== undefined) body.encoding = o.encoding;
    if (o.prefix !== undefined) body.prefix = o.prefix;
    if (o.order !== undefined) body.order = o.order;
    return sequenceInfo(await this.callObj("POST", "/v1/sequences", body));
  }

  /**
   * Changes a sequence safely while it is in use (`PATCH /v1/sequences/{name}`):
   * `next` only forward (the values skipped are never handed out), `max` never
   * below what was reserved, `block` for handles opened from now on. A change
   * the sequence does not allow is a 400 `invalid_argument` and changes
   * nothing; a numbered sequence is a 409 `wrong_kind`. Sent once (not again
   * after it may have reached a server).
   */
  async alter(name: string, o: { next?: IntLike; max?: IntLike; block?: number }): Promise<SequenceInfo> {
    const body: Record<string, unknown> = {};
    if (o.next !== undefined) body.next = BigInt(int(o.next, "next"));
    if (o.max !== undefined) body.max = BigInt(int(o.max, "max"));
    if (o.block !== undefined) body.block = o.block;
    return sequenceInfo(await this.callObj("PATCH", `/v1/sequences/${enc(name)}`, body, true));
  }

  async getSequence(name: string): Promise<SequenceInfo> {
    return sequenceInfo(await this.callObj("GET", `/v1/sequences/${enc(name)}`));
  }

  async listSequences(): Promise<SequenceInfo[]> {
    const o = await this.callObj("GET", "/v1/sequences");
    const l = o.sequences;
    if (!Array.isArray(l)) throw new KeysmithError("bad_response", "the list of sequences has no sequences", 0);
    return l.map((s) => sequenceInfo(obj(s, "a sequence")));
  }

  /** Drops a sequence; answers its name. */
  async dropSequence(name: string): Promise<string> {
    const o = await this.callObj("DELETE", `/v1/sequences/${enc(name)}`);
    return String(o.dropped);
  }

  /**
   * `count` values in one request, from the server's block cache
   * (`POST /v1/sequences/{name}/next`). `Client.sequence` is the fast way.
   */
  async next(name: string, n = 1): Promise<bigint[]> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/next?count=${count(n)}&as=string`);
    const vs = o.values;
    if (Array.isArray(vs) && vs.some((v) => typeof v === "string" && !/^-?\d+$/.test(v))) {
      throw new KeysmithError(
        "wrong_kind",
        `sequence ${JSON.stringify(name)} answered printed numbers (${JSON.stringify(vs[0])}...), not integers: it is periodic or formatted; read them with nextNumbers (these were taken)`,
        200,
      );
    }
    return strings(o, "values", "next");
  }

  /**
   * `n` numbers as text: a periodic or formatted sequence's printed numbers
   * (`"INV-20261123-0042"`), an ordinary one's values in decimal.
   */
  async nextNumbers(name: string, n = 1): Promise<string[]> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/next?count=${count(n)}&as=string`);
    const vs = o.values;
    if (!Array.isArray(vs)) throw new KeysmithError("bad_response", "the server's answer to next has no values list", 0);
    return vs.map(String);
  }

  // ---- gap-free numbers: tickets

  /**
   * The lowest free number of a gap-free sequence, held by a ticket for `ttl`
   * seconds (1 to 86400; the server's default when omitted). Commit it or
   * release it; a holder that does neither loses it when the ticket expires.
   */
  async takeTicket(name: string, ttl?: number): Promise<Ticket> {
    let q = "";
    if (ttl !== undefined) {
      if (!Number.isSafeInteger(ttl) || ttl < 1) throw new RangeError(`keysmith: ttl must be a whole number of seconds >= 1, got ${ttl}`);
      q = `?ttl=${ttl}`;
    }
    // A ticket whose answer was lost holds its number only until its ttl: no gap; so it may be sent again.
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/tickets${q}`);
    if (typeof o.ticket !== "string") throw new KeysmithError("bad_response", "the answer to a ticket take has no ticket", 0);
    return {
      sequence: name,
      value: numberValue(o.value, "value"),
      ticket: o.ticket,
      period: smallOrNull(o.period, "period"),
      n: big(o.n, "n"),
    };
  }

  /**
   * Makes the ticket's number final; answers the number. A 409
   * `ticket_refused`, changing nothing, when the ticket no longer holds it.
   * Sent once: a repeat would be refused although the first took effect.
   */
  async commitTicket(name: string, ticket: string | Ticket): Promise<NumberValue> {
    return this.settle(name, ticket, "commit", "committed");
  }

  /**
   * Frees the ticket's number: it is the next one taken. Answers the number;
   * a 409 `ticket_refused`, changing nothing, when the ticket no longer holds it.
   */
  async releaseTicket(name: string, ticket: string | Ticket): Promise<NumberValue> {
    return this.settle(name, ticket, "release", "released");
  }

  private async settle(name: string, ticket: string | Ticket, action: string, key: string): Promise<NumberValue> {
    const t = typeof ticket === "string" ? ticket : ticket.ticket;
    // the ticket in the body, never in the URL
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/tickets/${action}`, { ticket: t }, true);
    return numberValue(o[key], key);
  }

  /**
   * The counter behind a value an opaque, encoded or bit-reversed sequence
   * handed out (an integer, or an encoded string). A 400 naming what is wrong
   * for a value it never hands out (prefix, character, width, check
   * character, range); needs the `use` grant.
   */
  async decode(name: string, value: IntLike): Promise<DecodedValue> {
    const v = typeof value === "string" ? value : BigInt(int(value, "value"));
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/decode`, { value: v });
    return { value: big(o.value, "value"), counter: big(o.counter, "counter") };
  }

  /**
   * Takes a number the sequence printed apart: its period key and counter. A
   * 400 `invalid_argument` for text that is not one of its numbers, 409
   * `wrong_kind` for an ordinary sequence.
   */
  async parse(name: string, text: string): Promise<NumberParts> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/parse`, { value: text });
    return { period: smallOrNull(o.period, "period"), n: big(o.n, "n") };
  }

  /**
   * Reserves `count` values for this caller alone (`POST .../reserve`):
   * half-open ranges whose values are `start, start + step, ...` below `end`
   * (`step` is 1 but for a residue class), and the lease token that hands a
   * tail back.
   */
  async reserve(name: string, n: number): Promise<Lease> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/reserve?count=${count(n)}&as=string`);
    const rs = o.ranges;
    if (!Array.isArray(rs) || typeof o.lease !== "string") {
      throw new KeysmithError("bad_response", "the answer to reserve has no ranges or no lease", 0);
    }
    const ranges: Range[] = rs.map((r) => {
      const x = obj(r, "reserve");
      return { start: big(x.start, "start"), end: big(x.end, "end") };
    });
    // A server from before residue classes sends no step: 1.
    const step = o.step === undefined ? 1 : small(o.step, "step");
    if (step < 1) throw new KeysmithError("bad_response", `the server sent the step ${step}, not 1 or more`, 0);
    return { ranges, step, lease: o.lease };
  }

  /**
   * Hands the tail `from..` of a lease back (`POST .../release`): `from` must
   * be a value of the lease (`start + i*step`). Answers the range that went
   * back (the lease's values from `from`), or null when someone reserved since.
   */
  async release(name: string, lease: string, from: IntLike): Promise<Range | null> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/release`, { lease, from: int(from, "from") });
    const r = o.released;
    if (r === null || r === undefined) return null;
    const x = obj(r, "release");
    return { start: big(x.start, "start"), end: big(x.end, "end") };
  }

  // ---- pools

  /**
   * Creates a pool of `size` numbers from `start` (default 1).
   * `increment` (2 to 1000000) and `offset` (0 to `increment - 1`, default 0):
   * a residue class, every number the pool hands out is `offset` modulo
   * `increment` (`start` rounded up into it); the class is kept with the pool,
   * so every server opening it hands out only numbers of the class. The server
   * checks them (a 400 `invalid_argument` or `bad_request`).
   */
  async createPool(
    name: string,
    o: { size: number; start?: IntLike; increment?: number; offset?: number },
  ): Promise<PoolRow> {
    const body: Record<string, unknown> = { name, size: o.size };
    if (o.start !== undefined) body.start = BigInt(int(o.start, "start"));
    if (o.increment !== undefined) body.increment = BigInt(int(o.increment, "increment"));
    if (o.offset !== undefined) body.offset = BigInt(int(o.offset, "offset"));
    return poolInfo(await this.callObj("POST", "/v1/pools", body));
  }

  async getPool(name: string): Promise<PoolInfo> {
    return poolInfo(await this.callObj("GET", `/v1/pools/${enc(name)}`));
  }

  async listPools(): Promise<PoolRow[]> {
    const o = await this.callObj("GET", "/v1/pools");
    const l = o.pools;
    if (!Array.isArray(l)) throw new KeysmithError("bad_response", "the list of pools has no pools", 0);
    return l.map((p) => poolInfo(obj(p, "a pool")));
  }

  async dropPool(name: string): Promise<string> {
    const o = await this.callObj("DELETE", `/v1/pools/${enc(name)}`);
    return String(o.dropped);
  }

  /**
   * Up to `n` numbers taken from a pool. Fewer when the server stopped
   * early (its time limit, or a take that failed after others succeeded:
   * it answers every number it took, marked partial); ask again for the rest.
   */
  async poolNext(name: string, n = 1): Promise<bigint[]> {
    const o = await this.callObj("POST", `/v1/pools/${enc(name)}/next?count=${count(n)}&as=string`);
    return strings(o, "values", "pool next");
  }

  // ---- the rest

  /** `n` names `<host>/<counter>` from the server host's counter. */
  async counterNext(n = 1): Promise<CounterNames> {
    const o = await this.callObj("POST", `/v1/counters/next?count=${count(n)}&as=string`);
    const names = o.names;
    if (!Array.isArray(names)) throw new KeysmithError("bad_response", "the answer to counters/next has no names", 0);
    return { host: String(o.host), first: big(o.first, "first"), last: big(o.last, "last"), names: names.map(String) };
  }

  /** A shard key's signed external string (and its parts as the server reads them). */
  async encodeShardKey(parts: ShardKeyParts): Promise<ShardKeyView> {
    const id = (v: ShardId) => (typeof v === "bigint" || typeof v === "number" ? BigInt(int(v, "id")) : v);
    const body: Record<string, unknown> = { origin: parts.origin, shard: parts.shard, record: id(parts.record) };
    if (parts.children !== undefined) body.children = parts.children.map(id);
    return (await this.callObj("POST", "/v1/shard-keys/encode", body)) as unknown as ShardKeyView;
  }

  /** Checks an external string's signature and answers the key's parts. */
  async decodeShardKey(external: string, checks: DecodeOptions = {}): Promise<ShardKeyView> {
    return (await this.callObj("POST", "/v1/shard-keys/decode", { external, ...checks })) as unknown as ShardKeyView;
  }

  /** `n` time-ordered 64-bit ids (time, worker and sequence bits), increasing. */
  async nextIds(n = 1): Promise<bigint[]> {
    const o = await this.callObj("POST", `/v1/ids/next?count=${count(n)}&as=string`);
    return strings(o, "ids", "ids/next");
  }

  /**
   * `n` RFC 9562 version-7 UUIDs (`format=uuidv7`) over the same time, worker id and
   * sequence as {@link nextIds}: unique by construction across the servers of a store,
   * increasing per server (as strings). Bits: 48 of unix_ts_ms, version 7, a 12-bit
   * counter (rand_a), variant 10, a 22-bit worker id, 40 random bits.
   */
  async nextUuids(n = 1): Promise<string[]> {
    const o = await this.callObj("POST", `/v1/ids/next?count=${count(n)}&format=uuidv7`);
    const vs = o["ids"];
    if (!Array.isArray(vs) || !vs.every((v) => typeof v === "string")) {
      throw new KeysmithError("bad_response", "the server's answer to ids/next?format=uuidv7 has no ids list of strings", 0);
    }
    return vs as string[];
  }

  /** An id taken apart by the server's layout; a 400 for one that is not an id of it. */
  async decodeId(id: IntLike): Promise<DecodedId> {
    const text = typeof id === "string" ? id : int(id, "id");
    const o = await this.callObj("GET", `/v1/ids/${enc(text)}`);
    return {
      id: big(o.id, "id"),
      time_ms: small(o.time_ms, "time_ms"),
      time: String(o.time),
      worker: small(o.worker, "worker"),
      sequence: small(o.sequence, "sequence"),
    };
  }

  // ---- worker-id leases (for other generators: see workers.ts)

  /** Leases the lowest free worker id of `group` in `0..max` (default 1024) for `ttlMs` (default 10 s); `409 lease_refused` when all are held. */
  async leaseWorker(group: string, o: { ttlMs?: number; max?: number } = {}): Promise<WorkerLeaseInfo> {
    return leaseWorker((m, p, d, b) => this.call(m, p, b, false, d), group, o);
  }

  /** Renews a worker lease (use the new token from now on); `409 lease_refused` when it expired or was taken over. */
  async renewWorker(group: string, token: string, o: { ttlMs?: number; deadlineMs?: number } = {}): Promise<WorkerLeaseInfo> {
    return renewWorker((m, p, d, b) => this.call(m, p, b, false, d), group, token, o);
  }

  /** Releases a worker lease; `false` when it was lost already. */
  async releaseWorker(group: string, token: string): Promise<boolean> {
    return releaseWorker((m, p, d, b) => this.call(m, p, b, false, d), group, token);
  }

  /** The worker ids of `group` ever leased, by worker id: held or free, by whom, until when, fence and time floor (never a token); `[]` for an unknown group. */
  async listWorkers(group: string): Promise<WorkerInfo[]> {
    return listWorkers((m, p, d, b) => this.call(m, p, b, false, d), group);
  }

  /** A worker id of `group` held and renewed in the background (see `WorkerLease`). */
  async workerLease(group: string, o: WorkerLeaseOptions = {}): Promise<WorkerLease> {
    return WorkerLease.start(this, group, o);
  }

  /** One worker id of `group` per process, taken on first use (see `ProcessWorkerLease`); sends nothing now. */
  processWorkerLease(group: string, o: WorkerLeaseOptions = {}): ProcessWorkerLease {
    return new ProcessWorkerLease(this, group, o);
  }

  /** `GET /healthz`: resolves when the server and its store answer; fails over like every call. */
  async health(): Promise<Health> {
    return (await this.callObj("GET", "/healthz")) as unknown as Health;
  }

  /** `GET /v1/status`: what the status page shows (integers that may pass 2^53 are strings). */
  async status(): Promise<{ [k: string]: Json }> {
    return this.callObj("GET", "/v1/status");
  }
}

/** A name as one path segment (`/` becomes `%2F`). */
function enc(name: string): string {
  return encodeURIComponent(name);
}
