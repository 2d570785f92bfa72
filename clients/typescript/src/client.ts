import { KeysmithError } from "./errors.js";
import { leaseWorker, releaseWorker, renewWorker, WorkerLease, type WorkerLeaseInfo, type WorkerLeaseOptions } from "./workers.js";
import { type Json, parse, stringify } from "./json.js";
import { type Lease, type LeaseSource, type Range, Sequence, type SequenceOptions } from "./sequence.js";
import { Transport, type TransportStats } from "./transport.js";

/** Options of `new Client`. */
export interface ClientOptions {
  /** A base URL (`http://127.0.0.1:7878`), or several: calls fail over to the next one. */
  url: string | readonly string[];
  /** The server's bearer token, when it has one. */
  token?: string | undefined;
  /** The most one attempt on one server may take, in ms (default 15000). */
  timeoutMs?: number;
  /**
   * How long one call keeps trying servers, retrying and waiting out
   * Retry-After, in ms (default 30000); then it fails with the last error.
   * No attempt starts after it, and one in flight gets at least a second.
   */
  deadlineMs?: number;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
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
  start: bigint;
  size: number;
  server: PoolServerView | null;
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
  } as SequenceInfo;
}

function poolInfo(o: Obj): PoolInfo {
  const r = { ...(o as object), name: String(o.name), start: big(o.start, "start") } as Obj & { [k: string]: unknown };
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
 * const orders = client.sequence("orders");
 * const id: bigint = await orders.next();
 * ```
 */
export class Client implements LeaseSource {
  private readonly t: Transport;

  constructor(options: ClientOptions) {
    const urls = typeof options.url === "string" ? [options.url] : [...options.url];
    this.t = new Transport({
      urls,
      token: options.token,
      timeoutMs: options.timeoutMs ?? 15_000,
      deadlineMs: options.deadlineMs ?? 30_000,
      fetch: options.fetch,
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

  private async call(method: string, path: string, body?: unknown, deadlineMs?: number): Promise<Json> {
    const a = await this.t.request(method, path, body === undefined ? undefined : stringify(body), deadlineMs);
    try {
      return parse(a.text);
    } catch (e) {
      throw new KeysmithError("bad_response", `${a.url}${path} answered something that is not JSON: ${(e as Error).message}`, a.status, {
        url: a.url,
        cause: e,
      });
    }
  }

  private async callObj(method: string, path: string, body?: unknown): Promise<Obj> {
    return obj(await this.call(method, path, body), `${method} ${path}`);
  }

  // ---- sequences

  /** Creates a sequence; `409 already_exists` if there is one of that name. */
  async createSequence(name: string, o: { start?: IntLike; max?: IntLike; block?: number } = {}): Promise<SequenceInfo> {
    const body: Record<string, unknown> = { name };
    if (o.start !== undefined) body.start = BigInt(int(o.start, "start"));
    if (o.max !== undefined) body.max = BigInt(int(o.max, "max"));
    if (o.block !== undefined) body.block = o.block;
    return sequenceInfo(await this.callObj("POST", "/v1/sequences", body));
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
    return strings(o, "values", "next");
  }

  /**
   * Reserves `count` values for this caller alone (`POST .../reserve`):
   * half-open ranges, and the lease token that hands a tail back.
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
    return { ranges, lease: o.lease };
  }

  /**
   * Hands the tail `from..` of a lease back (`POST .../release`): answers the
   * range that went back, or null when someone reserved since.
   */
  async release(name: string, lease: string, from: IntLike): Promise<Range | null> {
    const o = await this.callObj("POST", `/v1/sequences/${enc(name)}/release`, { lease, from: int(from, "from") });
    const r = o.released;
    if (r === null || r === undefined) return null;
    const x = obj(r, "release");
    return { start: big(x.start, "start"), end: big(x.end, "end") };
  }

  // ---- pools

  /** Creates a pool of `size` numbers from `start` (default 1). */
  async createPool(name: string, o: { size: number; start?: IntLike }): Promise<PoolRow> {
    const body: Record<string, unknown> = { name, size: o.size };
    if (o.start !== undefined) body.start = BigInt(int(o.start, "start"));
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

  // ---- worker-id leases (for other generators: see workers.ts)

  /** Leases the lowest free worker id of `group` in `0..max` (default 1024) for `ttlMs` (default 10 s); `409 lease_refused` when all are held. */
  async leaseWorker(group: string, o: { ttlMs?: number; max?: number } = {}): Promise<WorkerLeaseInfo> {
    return leaseWorker((m, p, d) => this.call(m, p, undefined, d), group, o);
  }

  /** Renews a worker lease (use the new token from now on); `409 lease_refused` when it expired or was taken over. */
  async renewWorker(group: string, token: string, o: { ttlMs?: number; deadlineMs?: number } = {}): Promise<WorkerLeaseInfo> {
    return renewWorker((m, p, d) => this.call(m, p, undefined, d), group, token, o);
  }

  /** Releases a worker lease; `false` when it was lost already. */
  async releaseWorker(group: string, token: string): Promise<boolean> {
    return releaseWorker((m, p, d) => this.call(m, p, undefined, d), group, token);
  }

  /** A worker id of `group` held and renewed in the background (see `WorkerLease`). */
  async workerLease(group: string, o: WorkerLeaseOptions = {}): Promise<WorkerLease> {
    return WorkerLease.start(this, group, o);
  }

  /** `GET /healthz`: resolves when the server and its store answer; fails over like every call. */
  async health(): Promise<Health> {
    return (await this.callObj("GET", "/healthz")) as unknown as Health;
  }
}

/** A name as one path segment (`/` becomes `%2F`). */
function enc(name: string): string {
  return encodeURIComponent(name);
}
