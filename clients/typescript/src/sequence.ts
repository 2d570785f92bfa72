// A Sequence serves values from blocks leased from the server: next() takes a
// value from the local block without a request; when 20% of the current lease
// is left the next one is reserved in the background; lease sizes follow the
// caller's rate.

import { KeysmithError } from "./errors.js";

/**
 * A half-open range of values: `start, start + step, start + 2*step, ...`
 * strictly below `end`, with the `step` of the lease it belongs to (1, so
 * every `start <= v < end`, but in a residue class).
 */
export interface Range {
  start: bigint;
  end: bigint;
}

/** What `POST /v1/sequences/{name}/reserve` answers. */
export interface Lease {
  ranges: Range[];
  /**
   * The distance between two values of a range: 1, or a residue class's
   * increment. A lease source that leaves it out (a server from before
   * residue classes) means 1.
   */
  step: number;
  /** The token that hands an unused tail back (`release`). */
  lease: string;
}

/** Values `start, start + step, ...` strictly below `end` (what `nextRanges` answers). */
export interface ValueRange {
  start: bigint;
  end: bigint;
  step: bigint;
}

/** Options of `Client.sequence`. */
export interface SequenceOptions {
  /** Values to lease first (default 100); adapts to the rate unless `adaptive` is false. */
  block?: number;
  /** Smallest lease (default 1). */
  minBlock?: number;
  /** Largest lease (default 100000, the server's default `--max-count`). */
  maxBlock?: number;
  /**
   * The wanted time between two leases, in ms (default 1000): the block
   * doubles when a lease lasts less than half of it, halves when it lasts more
   * than twice it.
   */
  targetMs?: number;
  /** Adapt the block size to the rate (default true). */
  adaptive?: boolean;
  /**
   * Reserve the next lease in the background when this fraction of the
   * current one is left (default 0.2); `false` reserves only when empty.
   */
  prefetch?: number | false;
  /** The clock the block size follows, in ms (default `Date.now`; tests set their own). */
  clock?: () => number;
}

/** How a Sequence reaches the server (the Client's reserve and release calls). */
export interface LeaseSource {
  reserve(name: string, count: number): Promise<Lease>;
  release(name: string, lease: string, from: bigint): Promise<Range | null>;
}

interface LocalLease {
  /** null: not to be released (it was clipped, or holds values given back by a failed call). */
  token: string | null;
  /** Non-empty, increasing, disjoint; each starts on a value and holds `start, start + step, ...` below `end`. */
  ranges: Range[];
  /** The distance between two values of a range (>= 1). */
  step: bigint;
  /** Index of the range being served (of the head lease). */
  ri: number;
}

interface Waiter {
  n: number;
  got: bigint[];
  resolve: (v: bigint[]) => void;
  reject: (e: unknown) => void;
}

export class Sequence {
  readonly name: string;
  private readonly src: LeaseSource;
  private blockSize: number;
  private readonly minBlock: number;
  private readonly maxBlock: number;
  private readonly targetMs: number;
  private readonly adaptive: boolean;
  private readonly prefetchAt: number;
  private readonly clock: () => number;

  /** The leases not yet used up, oldest (being served) first. */
  private leases: LocalLease[] = [];
  /** The next value of the head range, its end and its step: cur < end iff a value is here. */
  private cur = 0n;
  private end = 0n;
  private step = 1n;
  /** Values left in the head range (`cur` up to `end`), as a number: the hot path compares no bigint. */
  private left = 0;
  /** The step of the newest lease (values given back by failed calls are grouped by it). */
  private lastStep = 1n;
  /** Values here, in all leases. */
  private available = 0;
  /** The size of the newest lease (prefetch starts at prefetchAt of it). */
  private lastLeaseSize = 0;
  /** `available` at or below which the next lease is reserved (from lastLeaseSize and prefetchAt). */
  private prefetchBelow = 0;
  /** The greatest value ever received: later ranges are clipped above it, so values increase. */
  private highWater: bigint | null = null;

  /** Callers waiting for values, in the order of their calls; from `head` on. */
  private waiters: Waiter[] = [];
  private head = 0;
  /** Values the waiters still need. */
  private outstanding = 0;

  private inflight: Promise<void> | null = null;
  private lastReserveAt: number | undefined;
  private closed = false;
  private closing: Promise<Range[]> | null = null;
  /** The error of the last background reservation, if it failed (the next demand retries). */
  lastPrefetchError: unknown = undefined;
  /** Leases reserved. */
  reservations = 0;
  /** Why releases in `close()` failed, if they did (the values stay a gap). */
  readonly closeErrors: unknown[] = [];

  constructor(src: LeaseSource, name: string, o: SequenceOptions = {}) {
    this.src = src;
    this.name = name;
    const int = (v: number | undefined, d: number, what: string) => {
      const x = v ?? d;
      if (!Number.isSafeInteger(x) || x < 1) throw new RangeError(`keysmith: ${what} must be a whole number >= 1, got ${x}`);
      return x;
    };
    this.minBlock = int(o.minBlock, 1, "minBlock");
    this.maxBlock = int(o.maxBlock, 100_000, "maxBlock");
    if (this.maxBlock < this.minBlock) throw new RangeError("keysmith: maxBlock is below minBlock");
    this.blockSize = Math.min(Math.max(int(o.block, 100, "block"), this.minBlock), this.maxBlock);
    this.targetMs = o.targetMs ?? 1000;
    if (!(this.targetMs > 0)) throw new RangeError("keysmith: targetMs must be above 0");
    this.adaptive = o.adaptive ?? true;
    const p = o.prefetch ?? 0.2;
    if (p !== false && !(p >= 0 && p < 1)) throw new RangeError("keysmith: prefetch must be a fraction in [0, 1) or false");
    this.prefetchAt = p === false ? -1 : p;
    this.clock = o.clock ?? Date.now;
  }

  /** What `util.inspect` and `console.log` show: never a lease token. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return `Sequence { name: ${JSON.stringify(this.name)}, block: ${this.blockSize}, buffered: ${this.available}, closed: ${this.closed} }`;
  }

  /** The size of the next lease. */
  get block(): number {
    return this.blockSize;
  }

  /** Values held locally, ready to be handed out without a request. */
  get buffered(): number {
    return this.available;
  }

  /**
   * The next value. Values from one Sequence increase in the order of the
   * calls, and no value is handed out twice, by this or any other client.
   */
  next(): Promise<bigint> {
    const v = this.tryNext();
    return v !== undefined ? Promise.resolve(v) : this.wait(1).then((vs) => vs[0] as bigint);
  }

  /**
   * The next value synchronously, when one is in the local block: a bigint
   * add in Node's single thread, no Promise. `undefined` when the caller must
   * wait for a lease instead (`await next()`): the block is used up, earlier
   * calls are waiting, or the Sequence is closed. The same guarantees as
   * `next()`: `seq.tryNext() ?? (await seq.next())` is the fastest loop.
   */
  tryNext(): bigint | undefined {
    if (this.left <= 0 || this.head !== this.waiters.length || this.closed) return undefined;
    const v = this.cur;
    this.cur = v + this.step;
    if (--this.left === 0) this.advance();
    if (--this.available <= this.prefetchBelow) this.maybePrefetch();
    return v;
  }

  /**
   * The next `n` values as ranges (`start, start + step, ...` below `end`,
   * increasing), made without listing the values: one range unless they
   * span leases. The same guarantees as `nextN`.
   */
  async nextRanges(n: number): Promise<ValueRange[]> {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`keysmith: nextRanges needs a whole number >= 0, got ${n}`);
    if (n === 0) return [];
    if (this.head === this.waiters.length && this.available >= n && !this.closed) {
      const out: ValueRange[] = [];
      let left = n;
      while (left > 0) {
        const room = valuesIn(this.cur, this.end, this.step);
        const k = BigInt(left) < room ? left : Number(room);
        const start = this.cur;
        this.cur += BigInt(k) * this.step;
        out.push({ start, end: this.cur, step: this.step });
        left -= k;
        if (this.cur >= this.end) this.advance();
      }
      this.available -= n;
      this.syncLeft();
      this.maybePrefetch();
      return out;
    }
    const vs = await this.wait(n);
    const out: ValueRange[] = [];
    const step = this.lastStep;
    for (const v of vs) {
      const r = out[out.length - 1];
      if (r !== undefined && r.end - 1n + r.step === v) r.end = v + 1n;
      else out.push({ start: v, end: v + 1n, step });
    }
    return out;
  }

  /** The next `n` values, increasing. */
  nextN(n: number): Promise<bigint[]> {
    if (!Number.isSafeInteger(n) || n < 0) return Promise.reject(new RangeError(`keysmith: nextN needs a whole number >= 0, got ${n}`));
    if (n === 0) return Promise.resolve([]);
    if (this.head === this.waiters.length && this.available >= n && !this.closed) {
      const out: bigint[] = [];
      this.take(out, n);
      this.maybePrefetch();
      return Promise.resolve(out);
    }
    return this.wait(n);
  }

  /**
   * Stops the Sequence: waits for a reservation in flight, then hands the
   * unused values back to the server. A lease's tail goes back only when no
   * one reserved since (so of a current and a prefetched lease, only the
   * prefetched one); what does not go back stays a gap, never handed out.
   * Calls waiting for values that are not here get a `closed` error; later
   * calls too. Never fails: answers the ranges handed back, and keeps the
   * errors of refused or failed releases in `closeErrors` (a lease token
   * opens only on the server that made it, or on servers that share its
   * lease secret).
   */
  close(): Promise<Range[]> {
    if (this.closing === null) {
      this.closed = true;
      this.closing = this.shutdown();
    }
    return this.closing;
  }

  private async shutdown(): Promise<Range[]> {
    while (this.inflight !== null) await this.inflight;
    this.rejectWaiters(new KeysmithError("closed", `sequence ${JSON.stringify(this.name)}: closed`, 0));
    const released: Range[] = [];
    // Newest first: handing back the newest lease may make the older one the
    // last reservation again.
    for (let i = this.leases.length - 1; i >= 0; i--) {
      const l = this.leases[i] as LocalLease;
      if (l.token === null) continue;
      const last = l.ranges[l.ranges.length - 1] as Range;
      let from = i === 0 ? this.cur : (l.ranges[0] as Range).start;
      // Only the last range runs to the lease's end: the tail of an earlier one
      // is not contiguous with it.
      if (from < last.start) from = last.start;
      if (from >= last.end) continue;
      try {
        const r = await this.src.release(this.name, l.token, from);
        if (r !== null) released.push(r);
      } catch (e) {
        this.closeErrors.push(e);
      }
    }
    this.leases = [];
    this.cur = this.end = 0n;
    this.left = 0;
    this.step = 1n;
    this.available = 0;
    return released;
  }

  private wait(n: number): Promise<bigint[]> {
    if (this.closed) return Promise.reject(new KeysmithError("closed", `sequence ${JSON.stringify(this.name)}: closed`, 0));
    return new Promise<bigint[]>((resolve, reject) => {
      this.waiters.push({ n, got: [], resolve, reject });
      this.outstanding += n;
      this.serve();
      if (this.head < this.waiters.length) this.demand();
      else this.maybePrefetch();
    });
  }

  /** Moves up to `n` local values into `out`. */
  private take(out: bigint[], n: number): number {
    let taken = 0;
    while (taken < n && this.cur < this.end) {
      const room = valuesIn(this.cur, this.end, this.step);
      const k = BigInt(n - taken) < room ? n - taken : Number(room);
      for (let j = 0; j < k; j++) {
        out.push(this.cur);
        this.cur += this.step;
      }
      taken += k;
      if (this.cur >= this.end) this.advance();
    }
    this.available -= taken;
    this.syncLeft();
    return taken;
  }

  /** Sets `left` from `cur`, `end` and `step` (after any change of them but tryNext's). */
  private syncLeft(): void {
    this.left = Number(valuesIn(this.cur, this.end, this.step));
  }

  /** The head range is used up: moves to the next range, or the next lease. */
  private advance(): void {
    for (;;) {
      const l = this.leases[0];
      if (l === undefined) {
        this.cur = this.end = 0n;
        this.left = 0;
        return;
      }
      l.ri++;
      const r = l.ranges[l.ri];
      if (r !== undefined) {
        this.cur = r.start;
        this.end = r.end;
        this.step = l.step;
        this.syncLeft();
        return;
      }
      this.leases.shift();
      const h = this.leases[0];
      if (h !== undefined) h.ri = -1;
    }
  }

  /** Gives local values to the waiters, in order. */
  private serve(): void {
    while (this.head < this.waiters.length && this.cur < this.end) {
      const w = this.waiters[this.head] as Waiter;
      const got = this.take(w.got, w.n - w.got.length);
      this.outstanding -= got;
      if (w.got.length === w.n) {
        this.waiters[this.head++] = undefined as unknown as Waiter;
        w.resolve(w.got);
      }
    }
    if (this.head === this.waiters.length) {
      this.waiters = [];
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.waiters.length) {
      this.waiters = this.waiters.slice(this.head);
      this.head = 0;
    }
  }

  /** Waiters need values that are not here: reserve, unless a reservation is on its way. */
  private demand(): void {
    if (this.inflight !== null || this.closed) return;
    this.reserve(this.outstanding);
  }

  private maybePrefetch(): void {
    if (this.inflight !== null || this.closed || this.prefetchAt < 0) return;
    if (this.available > Math.floor(this.lastLeaseSize * this.prefetchAt)) return;
    this.reserve(0);
  }

  /** Reserves a lease of the block size, or of `wanted` values if more (up to maxBlock). */
  private reserve(wanted: number): void {
    const now = this.clock();
    if (this.adaptive && this.lastReserveAt !== undefined) {
      const dt = now - this.lastReserveAt;
      if (dt < this.targetMs / 2) this.blockSize = Math.min(this.blockSize * 2, this.maxBlock);
      else if (dt > this.targetMs * 2) this.blockSize = Math.max(Math.floor(this.blockSize / 2), this.minBlock);
    }
    this.lastReserveAt = now;
    this.reservations++;
    const count = Math.min(Math.max(this.blockSize, wanted), this.maxBlock);
    this.inflight = this.src.reserve(this.name, count).then(
      (lease) => {
        this.inflight = null;
        this.lastPrefetchError = undefined;
        this.ingest(lease);
        this.serve();
        if (this.closed) return;
        if (this.head < this.waiters.length) this.demand();
        else this.maybePrefetch();
      },
      (e: unknown) => {
        this.inflight = null;
        if (this.head < this.waiters.length) this.rejectWaiters(e);
        else this.lastPrefetchError = e;
      },
    );
  }

  /**
   * Adds a lease's ranges, clipped above every value received before (onto
   * the next value of the range: `start + i*step`).
   */
  private ingest(lease: Lease): void {
    // A source from before residue classes sends no step: 1.
    const step = BigInt(lease.step ?? 1);
    if (step < 1n) throw new KeysmithError("bad_response", `a lease's step must be 1 or more, got ${step}`, 0);
    const sorted = [...lease.ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
    const ranges: Range[] = [];
    let clipped = false;
    let size = 0;
    for (const r of sorted) {
      let start = r.start;
      if (this.highWater !== null && start <= this.highWater) {
        start += ((this.highWater - start) / step) * step + step;
        clipped = true;
      }
      if (start >= r.end) continue;
      const n = valuesIn(start, r.end, step);
      ranges.push({ start, end: r.end });
      size += Number(n);
      this.highWater = start + (n - 1n) * step;
    }
    this.lastStep = step;
    if (ranges.length === 0) return;
    this.push({ token: clipped ? null : lease.lease, ranges, step, ri: 0 });
    this.lastLeaseSize = size;
    this.prefetchBelow = this.prefetchAt < 0 ? -1 : Math.floor(size * this.prefetchAt);
    this.available += size;
  }

  private push(l: LocalLease): void {
    this.leases.push(l);
    if (this.leases.length === 1) {
      const r = l.ranges[0] as Range;
      l.ri = 0;
      this.cur = r.start;
      this.end = r.end;
      this.step = l.step;
      this.syncLeft();
    }
  }

  /**
   * Fails every waiting call. Values already set aside for them go back to
   * the local block (while anyone waits nothing else is here, so they are
   * the next values), so a failed call loses nothing.
   */
  private rejectWaiters(e: unknown): void {
    const ws = this.waiters.slice(this.head);
    this.waiters = [];
    this.head = 0;
    this.outstanding = 0;
    // Runs of values one step apart (the step of the newest lease); any other
    // value is a range of its own, which holds it whatever the step.
    const step = this.lastStep;
    const ranges: Range[] = [];
    for (const w of ws) {
      for (const v of w.got) {
        const r = ranges[ranges.length - 1];
        if (r !== undefined && r.end - 1n + step === v) r.end = v + 1n;
        else ranges.push({ start: v, end: v + 1n });
      }
    }
    if (ranges.length > 0 && !this.closed && this.available === 0) {
      this.leases = [];
      this.push({ token: null, ranges, step, ri: 0 });
      for (const r of ranges) this.available += Number(valuesIn(r.start, r.end, step));
    }
    for (const w of ws) w.reject(e);
  }
}

/** How many of `start, start + step, ...` are below `end`. */
function valuesIn(start: bigint, end: bigint, step: bigint): bigint {
  return end > start ? (end - start + step - 1n) / step : 0n;
}
