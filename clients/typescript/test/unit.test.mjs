// The parts that need no server: the JSON codec, and Sequence's bookkeeping
// against an in-memory lease source that behaves as the reserve and release
// routes promise (so the same checks run against the real server in
// sequence.test.mjs).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { KeysmithError, Sequence, parseJson, stringifyJson } from "@keysmith/client";
import { duplicates, notIncreasing } from "./support.mjs";

describe("json", () => {
  test("integers above 2^53 come back exact, as bigints; small ones as numbers", () => {
    const v = parseJson('{"max":9223372036854775807,"min":-9223372036854775808,"block":100,"rate":1.5,"e":1e300,"s":"x\\"y\\u00e9","l":[true,false,null,[]],"o":{}}');
    assert.equal(v.max, 9223372036854775807n);
    assert.equal(v.min, -9223372036854775808n);
    assert.equal(v.block, 100);
    assert.equal(v.rate, 1.5);
    assert.equal(v.e, 1e300);
    assert.equal(v.s, 'x"y\u00e9');
    assert.deepEqual(v.l, [true, false, null, []]);
    assert.deepEqual(v.o, {});
  });

  test("bad JSON is a SyntaxError", () => {
    for (const bad of ["", "{", '{"a":}', "[1,]", "01", '"abc', "nul", "{} x"]) {
      assert.throws(() => parseJson(bad), SyntaxError, bad);
    }
  });

  test("a __proto__ key is data, not a prototype", () => {
    const v = parseJson('{"__proto__":{"polluted":1}}');
    assert.equal({}.polluted, undefined);
    assert.deepEqual(Object.keys(v), ["__proto__"]);
  });

  test("bigints are written as JSON integers", () => {
    assert.equal(stringifyJson({ a: 2n ** 63n - 1n, b: [1n, "1n"], c: 1 }), '{"a":9223372036854775807,"b":[1,"1n"],"c":1}');
    assert.equal(stringifyJson({ s: "plain" }), '{"s":"plain"}');
  });
});

/**
 * An in-memory sequence with the reserve/release contract; `hold()` parks
 * reservations until `go()`. With a `step`, a residue class: values `start,
 * start + step, ...`, leases answered with their step as the server does.
 */
class FakeSource {
  constructor(start = 1n, step = 1n) {
    this.next = start;
    this.step = step;
    this.version = 1;
    this.leases = new Map();
    this.counts = [];
    this.released = [];
    /** [n, error]: the n-th reservation (from 1) fails with error. */
    this.failAt = null;
    this.parked = [];
    this.holding = false;
    this.id = 0;
  }
  hold() {
    this.holding = true;
  }
  go() {
    this.holding = false;
    for (const f of this.parked.splice(0)) f();
  }
  reserve(name, count) {
    return new Promise((resolve, reject) => {
      const run = () => {
        this.counts.push(count);
        if (this.failAt !== null && this.failAt[0] === this.counts.length) {
          reject(this.failAt[1]);
          return;
        }
        const start = this.next;
        const end = start + BigInt(count - 1) * this.step + 1n;
        this.next = end - 1n + this.step;
        this.version++;
        const lease = `L${++this.id}`;
        this.leases.set(lease, { start, end, version: this.version });
        resolve({ ranges: [{ start, end }], step: Number(this.step), lease });
      };
      if (this.holding) this.parked.push(run);
      else queueMicrotask(run);
    });
  }
  async release(name, lease, from) {
    const l = this.leases.get(lease);
    if (!l || from < l.start || from >= l.end || (from - l.start) % this.step !== 0n) {
      throw new KeysmithError("invalid_argument", "bad lease", 400);
    }
    // The server's rule: only if the row is still at the version the lease left.
    if (this.version !== l.version) return null;
    this.next = from;
    this.version++;
    this.released.push({ start: from, end: l.end });
    return { start: from, end: l.end };
  }
}

describe("Sequence (in-memory lease source)", () => {
  test("tryNext answers values without a Promise while the block has them, undefined when a wait is needed", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    assert.equal(seq.tryNext(), undefined); // nothing leased yet
    assert.equal(await seq.next(), 1n);
    const got = [];
    for (let v = seq.tryNext(); v !== undefined; v = seq.tryNext()) got.push(v);
    // the prefetch started at 2 left, but its answer comes in a later task: the block ends at 10
    assert.deepEqual(got, [2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n]);
    assert.equal(await seq.next(), 11n);
    assert.equal(seq.tryNext(), 12n);
    await seq.close();
    assert.equal(seq.tryNext(), undefined); // closed
  });

  test("nextRanges answers n values as ranges, across leases, in order with next()", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    assert.equal(await seq.next(), 1n);
    assert.deepEqual(await seq.nextRanges(4), [{ start: 2n, end: 6n, step: 1n }]); // from the block, not listed
    const more = await seq.nextRanges(12); // 6..10 here, the rest from the next lease(s)
    const values = more.flatMap((r) => {
      const out = [];
      for (let v = r.start; v < r.end; v += r.step) out.push(v);
      return out;
    });
    assert.equal(values.length, 12);
    assert.equal(values[0], 6n);
    assert.equal(notIncreasing(values), "");
    assert.ok((await seq.next()) > values[11]);
    assert.deepEqual(await seq.nextRanges(0), []);
    await assert.rejects(seq.nextRanges(-1), RangeError);
    await seq.close();
  });

  test("concurrent calls get unique values that increase in call order", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    const ps = [];
    for (let i = 0; i < 95; i++) ps.push(i % 3 === 0 ? seq.nextN(3) : seq.next());
    const got = (await Promise.all(ps)).flat();
    assert.equal(duplicates(got), "");
    assert.equal(notIncreasing(got), "");
    assert.equal(got[0], 1n);
    // The first call reserved a block; the second reservation was sized to
    // everyone still waiting (32 nextN(3) and 63 next(), less the 10 of the
    // first); it left nothing, so the third is a prefetch of one block.
    assert.deepEqual(src.counts, [10, 32 * 3 + 63 - 10, 10]);
  });

  test("prefetch: the next lease is reserved when 20% of the current one is left", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    assert.equal(await seq.next(), 1n);
    assert.equal(src.counts.length, 1);
    for (let i = 0; i < 6; i++) await seq.next(); // 7 taken, 3 left: not yet
    assert.equal(src.counts.length, 1);
    await seq.next(); // 2 left = 20% of 10
    assert.equal(src.counts.length, 2);
    const rest = await seq.nextN(12);
    assert.deepEqual(rest, Array.from({ length: 12 }, (_, i) => BigInt(9 + i)));
  });

  test("a failed reservation fails the waiting calls and loses no value", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 4, adaptive: false, prefetch: false });
    src.failAt = [2, new KeysmithError("unavailable", "down", 503)];
    src.hold();
    const a = seq.nextN(3); // reserves 4 values, takes 3 of them
    const b = seq.nextN(5); // takes the 4th, then waits for a reservation that fails
    src.go();
    assert.deepEqual(await a, [1n, 2n, 3n]);
    await assert.rejects(b, (e) => e instanceof KeysmithError && e.code === "unavailable");
    // Value 4, set aside for b, is the next one handed out.
    assert.equal(await seq.next(), 4n);
    assert.equal(await seq.next(), 5n);
  });

  test("close hands back the unused tail, and later calls fail", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false, prefetch: false });
    assert.deepEqual(await seq.nextN(3), [1n, 2n, 3n]);
    assert.deepEqual(await seq.close(), [{ start: 4n, end: 11n }]);
    assert.equal(src.next, 4n);
    await assert.rejects(seq.next(), (e) => e instanceof KeysmithError && e.code === "closed");
    await assert.rejects(seq.nextN(2), (e) => e instanceof KeysmithError && e.code === "closed");
  });

  test("close with a prefetched lease hands back the newest one (the older one's tail is a gap)", async () => {
    const src = new FakeSource();
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    const got = await seq.nextN(9); // 1 left: the prefetch reserved 11..21
    assert.equal(got.at(-1), 9n);
    assert.deepEqual(await seq.close(), [{ start: 11n, end: 21n }]);
    assert.equal(src.next, 11n);
  });

  test("close never fails: a refused release leaves a gap, and the error is kept", async () => {
    const src = new FakeSource();
    src.release = async () => {
      throw new KeysmithError("invalid_argument", "invalid lease token", 400);
    };
    const seq = new Sequence(src, "s", { block: 10, adaptive: false, prefetch: false });
    await seq.next();
    assert.deepEqual(await seq.close(), []);
    assert.equal(seq.closeErrors.length, 1);
    assert.equal(seq.closeErrors[0].code, "invalid_argument");
  });

  test("block size doubles when leases last less than half the target, halves when more than twice, within bounds", async () => {
    const src = new FakeSource();
    let now = 0;
    const seq = new Sequence(src, "s", { block: 2, minBlock: 2, maxBlock: 16, targetMs: 1000, prefetch: false, clock: () => now });
    // Each lease lasts 400 ms: faster than half the target.
    const fast = async (n) => {
      for (let i = 0; i < n; i++) {
        if (seq.buffered === 0) now += 400;
        await seq.next();
      }
    };
    await fast(2 + 4 + 8 + 16 + 16);
    assert.deepEqual(src.counts, [2, 4, 8, 16, 16]);
    src.counts.length = 0;
    // From now on each lease lasts 2.5 s: slower than twice the target.
    const slow = async (n) => {
      for (let i = 0; i < n; i++) {
        if (seq.buffered === 0) now += 2500;
        await seq.next();
      }
    };
    await slow(8 + 4 + 2 + 2);
    assert.deepEqual(src.counts, [8, 4, 2, 2]);
    assert.equal(seq.block, 2);
  });

  test("ranges below what was received are skipped, so values still increase", async () => {
    let calls = 0;
    const src = {
      async reserve() {
        calls++;
        // A second server answering an older range first: 5..10, then 1..8 and 20..22.
        return calls === 1 ? { ranges: [{ start: 5n, end: 10n }], lease: "a" } : { ranges: [{ start: 20n, end: 22n }, { start: 1n, end: 8n }], lease: "b" };
      },
      async release() {
        throw new Error("not released: clipped leases are never handed back");
      },
    };
    const seq = new Sequence(src, "s", { block: 5, adaptive: false, prefetch: false });
    assert.deepEqual(await seq.nextN(7), [5n, 6n, 7n, 8n, 9n, 20n, 21n]);
    assert.deepEqual(await seq.close(), []);
  });

  test("a stepped lease (a residue class): values every step, counted as values, tail from the next one", async () => {
    const src = new FakeSource(2n, 3n); // 2 mod 3
    const seq = new Sequence(src, "s", { block: 10, adaptive: false });
    assert.equal(await seq.next(), 2n);
    assert.equal(seq.buffered, 9);
    assert.deepEqual(await seq.nextN(6), [5n, 8n, 11n, 14n, 17n, 20n]);
    assert.equal(src.counts.length, 1); // 3 left of 10: no prefetch yet
    assert.equal(await seq.next(), 23n); // 2 left: the prefetch of 32..59 starts
    assert.equal(src.counts.length, 2);
    assert.deepEqual(await seq.nextN(3), [26n, 29n, 32n]);
    assert.equal(seq.buffered, 9);
    // The newest lease goes back from its next value (35), a value of the lease.
    assert.deepEqual(await seq.close(), [{ start: 35n, end: 60n }]);
    assert.equal(src.next, 35n);
  });

  test("a stepped Sequence under concurrent calls: unique, increasing, all of the class", async () => {
    const src = new FakeSource(4n, 7n);
    const seq = new Sequence(src, "s", { block: 5, maxBlock: 40 });
    const ps = [];
    for (let i = 0; i < 300; i++) ps.push(i % 4 === 0 ? seq.nextN(5) : seq.next());
    const got = (await Promise.all(ps)).flat();
    assert.equal(got.length, 75 * 5 + 225);
    assert.equal(duplicates(got), "");
    assert.equal(notIncreasing(got), "");
    assert.deepEqual(got.filter((v) => v % 7n !== 4n), []);
    assert.deepEqual(got.slice(0, 3), [4n, 11n, 18n]);
    await seq.close();
  });

  test("a failed reservation with a step gives back the values set aside, on the step", async () => {
    const src = new FakeSource(1n, 5n);
    const seq = new Sequence(src, "s", { block: 4, adaptive: false, prefetch: false });
    src.failAt = [2, new KeysmithError("unavailable", "down", 503)];
    src.hold();
    const a = seq.nextN(2); // 1, 6 of 1, 6, 11, 16
    const b = seq.nextN(5); // takes 11 and 16, then waits for a reservation that fails
    src.go();
    assert.deepEqual(await a, [1n, 6n]);
    await assert.rejects(b, (e) => e instanceof KeysmithError && e.code === "unavailable");
    assert.equal(seq.buffered, 2);
    assert.deepEqual(await seq.nextN(3), [11n, 16n, 21n]);
  });

  test("stepped ranges below what was received are clipped onto the step", async () => {
    let calls = 0;
    const src = {
      async reserve() {
        calls++;
        // 3 mod 4: 31..43 first, then an older range and one that overlaps it.
        return calls === 1
          ? { ranges: [{ start: 31n, end: 44n }], step: 4, lease: "a" }
          : { ranges: [{ start: 3n, end: 20n }, { start: 39n, end: 56n }], step: 4, lease: "b" };
      },
      async release() {
        throw new Error("not released: clipped leases are never handed back");
      },
    };
    const seq = new Sequence(src, "s", { block: 4, adaptive: false, prefetch: false });
    assert.deepEqual(await seq.nextN(7), [31n, 35n, 39n, 43n, 47n, 51n, 55n]);
    assert.equal(seq.buffered, 0);
    assert.deepEqual(await seq.close(), []);
  });
});
