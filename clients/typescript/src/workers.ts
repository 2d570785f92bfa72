// Worker-id leases for other generators (sonyflake, bwmarrin/snowflake).
//
// `client.leaseWorker(group)` leases the lowest free worker id of a group;
// `renewWorker` and `releaseWorker` take its token; `listWorkers` shows the
// group's worker ids (held or free, never a token). A `WorkerLease`
// (`await client.workerLease(group)`) holds one: it renews every third of the
// TTL and tells its owner when the lease is lost (a renewal refused, or no
// renewal succeeded before the lease expired): the `lost` property, the
// `onLost` callback and a "lost" event, each once.
//
// Use the worker id only for ids whose time lies in notBeforeMs..untilMs
// (`usable()`), and stop issuing ids when the lease is lost.

import { KeysmithError } from "./errors.js";
import type { Json } from "./json.js";

/** A worker id held: what a lease or renewal answers. */
export interface WorkerLeaseInfo {
  group: string;
  worker: number;
  fence: number;
  max: number;
  /** Ids made with the worker id use times at or above this (ms since 1970). */
  notBeforeMs: number;
  /** Ids made with the worker id use times below this; renewals move it forward. */
  untilMs: number;
  /** The lease expires then unless renewed. */
  expiresMs: number;
  ttlMs: number;
  /** The token that renews and releases the lease. */
  token: string;
}

/** One worker id of a group, as `Client.listWorkers` lists it (no token). */
export interface WorkerInfo {
  worker: number;
  /** A live lease holds it (by the store's clock): a lease of the group passes it over. */
  held: boolean;
  /** While held: HOST/PID of a keysmith id generator, or lease/HOST/PID of the server that leased it. */
  holder: string | null;
  /** The fence of its last acquisition. */
  fence: number;
  /** Its time floor (ms since 1970): ids made with it lie below; the next holder starts at or above it. */
  untilMs: number;
  /** While held: when the lease expires unless renewed (the server's clock). */
  expiresMs: number | null;
  /** While held: the time the lease has left by the store's clock, ms. */
  expiresInMs: number | null;
}

/** Options of `Client.workerLease`. */
export interface WorkerLeaseOptions {
  /** The lease's time to live, ms (default 10 000). */
  ttlMs?: number;
  /** Worker ids are 0..max (default 1024); every holder of a group uses the same. */
  max?: number;
  /** Called once when the lease is lost, with why. */
  onLost?: (e: KeysmithError) => void;
}

/** Sends a request without a body and answers its JSON. */
/** Sends one request; `body` is sent as JSON (lease tokens travel there, never in a URL). */
export type Caller = (method: string, path: string, deadlineMs?: number, body?: unknown) => Promise<Json>;

const num = (o: { [k: string]: Json }, k: string): number => {
  const v = o[k];
  if (typeof v === "number" && Number.isSafeInteger(v)) return v;
  if (typeof v === "bigint" || (typeof v === "string" && /^-?\d+$/.test(v))) return Number(v);
  throw new KeysmithError("bad_response", `the server sent ${String(v)} for ${k}, not an integer`, 0);
};

function info(j: Json): WorkerLeaseInfo {
  if (j === null || typeof j !== "object" || Array.isArray(j)) {
    throw new KeysmithError("bad_response", "the server's answer to a worker lease is not a JSON object", 0);
  }
  return {
    group: String(j.group),
    worker: num(j, "worker"),
    fence: num(j, "fence"),
    max: num(j, "max"),
    notBeforeMs: num(j, "not_before_ms"),
    untilMs: num(j, "until_ms"),
    expiresMs: num(j, "expires_ms"),
    ttlMs: num(j, "ttl_ms"),
    token: String(j.lease),
  };
}

const whole = (v: number | undefined, what: string): string | undefined => {
  if (v === undefined) return undefined;
  if (!Number.isSafeInteger(v)) throw new RangeError(`keysmith: ${what} must be a whole number, got ${v}`);
  return String(v);
};

const query = (q: Record<string, string | undefined>): string => {
  const p = Object.entries(q).filter((e): e is [string, string] => e[1] !== undefined);
  return p.length === 0 ? "" : `?${new URLSearchParams(p).toString()}`;
};

const seg = encodeURIComponent;

export async function leaseWorker(call: Caller, group: string, o: { ttlMs?: number; max?: number } = {}): Promise<WorkerLeaseInfo> {
  const q = query({ ttl_ms: whole(o.ttlMs, "ttlMs"), max: whole(o.max, "max") });
  return info(await call("POST", `/v1/workers/${seg(group)}/lease${q}`));
}

export async function renewWorker(
  call: Caller,
  group: string,
  token: string,
  o: { ttlMs?: number; deadlineMs?: number } = {},
): Promise<WorkerLeaseInfo> {
  const q = query({ ttl_ms: whole(o.ttlMs, "ttlMs") });
  return info(await call("POST", `/v1/workers/${seg(group)}/lease/renew${q}`, o.deadlineMs, { token }));
}

export async function releaseWorker(call: Caller, group: string, token: string): Promise<boolean> {
  const j = await call("POST", `/v1/workers/${seg(group)}/lease/release`, undefined, { token });
  return j !== null && typeof j === "object" && !Array.isArray(j) && j.released === true;
}

const optNum = (o: { [k: string]: Json }, k: string): number | null => (o[k] === null ? null : num(o, k));

function workerInfo(j: Json): WorkerInfo {
  if (j === null || typeof j !== "object" || Array.isArray(j)) {
    throw new KeysmithError("bad_response", "a worker id in the server's list is not a JSON object", 0);
  }
  return {
    worker: num(j, "worker"),
    held: j.held === true,
    holder: j.holder === null || j.holder === undefined ? null : String(j.holder),
    fence: num(j, "fence"),
    untilMs: num(j, "until_ms"),
    expiresMs: optNum(j, "expires_ms"),
    expiresInMs: optNum(j, "expires_in_ms"),
  };
}

export async function listWorkers(call: Caller, group: string): Promise<WorkerInfo[]> {
  const j = await call("GET", `/v1/workers/${seg(group)}`);
  const ws = j !== null && typeof j === "object" && !Array.isArray(j) ? j.workers : undefined;
  if (!Array.isArray(ws)) {
    throw new KeysmithError("bad_response", "the server's list of worker ids has no workers array", 0);
  }
  return ws.map(workerInfo);
}

/** What `WorkerLease` needs of a client. */
export interface WorkerApi {
  leaseWorker(group: string, o: { ttlMs?: number; max?: number }): Promise<WorkerLeaseInfo>;
  renewWorker(group: string, token: string, o: { ttlMs?: number; deadlineMs?: number }): Promise<WorkerLeaseInfo>;
  releaseWorker(group: string, token: string): Promise<boolean>;
}

/**
 * A worker id held and renewed in the background. Make it with
 * `await client.workerLease(group, { ttlMs, max, onLost })`. Emits "lost"
 * (an `Event` with `error`) once; `close()` releases the worker id.
 */
export class WorkerLease extends EventTarget {
  private current: WorkerLeaseInfo;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;
  private lostWith: KeysmithError | undefined;
  private renewing: Promise<void> | undefined;
  /** Successful renewals so far. */
  renewals = 0;

  private constructor(
    private readonly api: WorkerApi,
    first: WorkerLeaseInfo,
    private readonly onLost: ((e: KeysmithError) => void) | undefined,
  ) {
    super();
    this.current = first;
    this.schedule(first.ttlMs / 3);
  }

  /** Leases a worker id and starts renewing it. */
  static async start(api: WorkerApi, group: string, o: WorkerLeaseOptions = {}): Promise<WorkerLease> {
    const first = await api.leaseWorker(group, { ttlMs: o.ttlMs ?? 10_000, max: o.max ?? 1024 });
    return new WorkerLease(api, first, o.onLost);
  }

  /** What `util.inspect` and `console.log` show: never the lease token. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    const c = this.current;
    return `WorkerLease { group: ${JSON.stringify(c.group)}, worker: ${c.worker}, fence: ${c.fence}, lost: ${this.lost}, closed: ${this.closed} }`;
  }

  /** The lease as last renewed (its `token` is a credential: keep it out of logs). */
  get info(): WorkerLeaseInfo {
    return this.current;
  }
  get worker(): number {
    return this.current.worker;
  }
  get fence(): number {
    return this.current.fence;
  }
  get notBeforeMs(): number {
    return this.current.notBeforeMs;
  }
  get untilMs(): number {
    return this.current.untilMs;
  }
  /** True once the lease is lost: issue no more ids with this worker id. */
  get lost(): boolean {
    return this.lostWith !== undefined;
  }
  /** Why it was lost. */
  get lostReason(): KeysmithError | undefined {
    return this.lostWith;
  }

  /**
   * Whether an id with time `timeMs` (default now) may use the worker id: not
   * lost or closed, not past its expiry without a renewal, and `timeMs` in
   * notBeforeMs..untilMs.
   */
  usable(timeMs: number = Date.now()): boolean {
    const c = this.current;
    return !this.lost && !this.closed && Date.now() < c.expiresMs && c.notBeforeMs <= timeMs && timeMs < c.untilMs;
  }

  private lastMs = -1;
  private seq = 0;

  /**
   * A time-ordered 64-bit id made with this lease's worker id, in the
   * server's "snowflake" layout (`time << 22n | worker << 12n | sequence`,
   * ms since `ID_EPOCH_MS`); increasing within one WorkerLease. Throws at
   * once (a `KeysmithError`, code "lease_lost") once the lease is lost or its
   * expiry passed without a renewal, "closed" after `close()`, and
   * "unavailable" when the clock lies outside notBeforeMs..untilMs. When this
   * millisecond's 4096 ids are made it waits for the next one (at most 1 ms,
   * synchronously). Needs `max` <= 1024.
   */
  nextId(): bigint {
    const c = this.current;
    if (c.max > 1 << WORKER_BITS) {
      throw new RangeError(`keysmith: nextId needs max <= ${1 << WORKER_BITS} (10 worker bits), this lease has max ${c.max}`);
    }
    let now = Date.now();
    let t = Math.max(now, this.lastMs); // a clock that went back stays on the last ms
    let seq = t === this.lastMs ? this.seq + 1 : 0;
    if (seq >= 1 << SEQUENCE_BITS) {
      // this ms's 4096 ids are made: the next ms, waited for (at most one)
      // unless the clock went back (then not blocking the event loop for it)
      while (now >= t && (now = Date.now()) <= t) {
        // spin
      }
      t += 1;
      seq = 0;
    }
    if (this.closed) throw new KeysmithError("closed", `worker lease of group "${c.group}": closed`, 0);
    if (this.lostWith !== undefined) {
      throw new KeysmithError("lease_lost", `worker lease lost, issue no more ids with worker ${c.worker}: ${this.lostWith.message}`, 0, {
        cause: this.lostWith,
      });
    }
    if (now >= c.expiresMs) {
      throw new KeysmithError("lease_lost", `worker ${c.worker} of group "${c.group}": the lease expired at ${c.expiresMs} ms without a renewal`, 0);
    }
    if (t < c.notBeforeMs || t >= c.untilMs) {
      throw new KeysmithError("unavailable", `worker ${c.worker} of group "${c.group}" may make ids with times in ${c.notBeforeMs}..${c.untilMs} ms, not ${t}`, 0);
    }
    this.lastMs = t;
    this.seq = seq;
    return (BigInt(t - ID_EPOCH_MS) << BigInt(WORKER_BITS + SEQUENCE_BITS)) | (BigInt(c.worker) << BigInt(SEQUENCE_BITS)) | BigInt(seq);
  }

  private schedule(ms: number): void {
    if (this.closed || this.lost) return;
    this.timer = setTimeout(() => {
      this.renewing = this.tick();
    }, ms);
  }

  private async tick(): Promise<void> {
    const c = this.current;
    try {
      const left = Math.max(50, c.expiresMs - Date.now());
      const n = await this.api.renewWorker(c.group, c.token, { deadlineMs: left });
      if (this.closed) return;
      this.current = n;
      this.renewals++;
      this.schedule(n.ttlMs / 3);
    } catch (e) {
      const err = e instanceof KeysmithError ? e : new KeysmithError("unreachable", String(e), 0, { cause: e });
      if (err.status === 409 || Date.now() >= c.expiresMs) {
        this.lose(err);
      } else {
        // Try again soon: the lease expires unless a renewal succeeds.
        this.schedule(c.ttlMs / 10);
      }
    }
  }

  private lose(e: KeysmithError): void {
    if (this.lostWith !== undefined) return;
    this.lostWith = e;
    this.onLost?.(e);
    const ev = new Event("lost") as Event & { error?: KeysmithError };
    ev.error = e;
    this.dispatchEvent(ev);
  }

  /** Stops renewing and releases the worker id (its time floor stays). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.renewing;
    if (this.lost) return;
    try {
      await this.api.releaseWorker(this.current.group, this.current.token);
    } catch {
      // it expires after its TTL
    }
  }
}

/** This process's id (0 outside Node.js, where there is one process). */
const currentPid = (): number => (globalThis as { process?: { pid?: number } }).process?.pid ?? 0;

/** The epoch of `WorkerLease.nextId`'s ids: 2024-01-01T00:00:00Z, ms since 1970. */
export const ID_EPOCH_MS = 1_704_067_200_000;
const WORKER_BITS = 10;
const SEQUENCE_BITS = 12;

/**
 * One worker id per process, taken on first use: `client.processWorkerLease(group)`
 * sends nothing until `lease()` or `nextId()` is called, then takes a
 * `WorkerLease` in the process that calls (remembering the pid), renews it,
 * and hands the same one to every later call of that process. Node cluster
 * workers and child processes each run their own copy of the module, so each
 * takes its own worker id; a `WorkerLease` made by another pid is never used.
 */
export class ProcessWorkerLease {
  private taking: Promise<WorkerLease> | undefined;
  private pid = 0;
  private closed = false;

  constructor(
    private readonly api: WorkerApi,
    /** The group the worker id is taken in. */
    readonly group: string,
    private readonly options: WorkerLeaseOptions = {},
  ) {}

  /** This process's WorkerLease, taken on the first call. Rejects with the lease's error (then the next call tries again). */
  async lease(): Promise<WorkerLease> {
    if (this.closed) throw new KeysmithError("closed", `worker lease of group "${this.group}": closed`, 0);
    if (this.taking === undefined || this.pid !== currentPid()) {
      this.pid = currentPid();
      const taking = WorkerLease.start(this.api, this.group, this.options);
      this.taking = taking;
      taking.catch(() => {
        if (this.taking === taking) this.taking = undefined;
      });
    }
    return this.taking;
  }

  /** Whether this process has asked for its lease yet. */
  get taken(): boolean {
    return this.taking !== undefined && this.pid === currentPid();
  }

  /** A time-ordered id made with this process's worker id (see `WorkerLease.nextId`). */
  async nextId(): Promise<bigint> {
    return (await this.lease()).nextId();
  }

  /** Releases this process's worker id, if it took one. */
  async close(): Promise<void> {
    this.closed = true;
    const taking = this.taking;
    this.taking = undefined;
    if (taking !== undefined && this.pid === currentPid()) {
      try {
        await (await taking).close();
      } catch {
        // never taken: nothing to release
      }
    }
  }
}
