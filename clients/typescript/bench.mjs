// TypeScript client benchmark, in the shape every client's benchmark has
// (issue #51). Against a running `keysmith serve` without a token, where the
// sequence NAME exists, measures each case for --seconds and prints only lines
// `<case>\t<per_second>` on stdout (`keysmith-bench clients` reads them):
//
//   bare        the bare counter: `counter += 1n` in a loop (one thread)
//   bare_8      the same: Node runs JavaScript in one thread
//   next        cached `seq.tryNext() ?? await seq.next()`, one caller
//   next_8      --threads concurrent async callers of `await seq.next()` on one Sequence
//   next_n100   values per second through `seq.nextRanges(100)`
//   worker_ids  `WorkerLease.nextId()` (ids made locally over a worker lease)
//   request     one HTTP request per value: `await client.next(name, 1)`
//   livez       a keep-alive loop of `GET /livez` over the same fetch
//
//   npm run build && node bench.mjs --url http://127.0.0.1:7878 --sequence bench --seconds 3 --threads 8

import { parseArgs } from "node:util";

import { Client } from "@keysmith/client";

const { values: opts } = parseArgs({
  options: {
    url: { type: "string" },
    sequence: { type: "string" },
    seconds: { type: "string", default: "3" },
    threads: { type: "string", default: "8" },
  },
});
const seconds = Number(opts.seconds);
const threads = Number(opts.threads);
if (opts.url === undefined || opts.sequence === undefined || !(seconds > 0) || !(Number.isInteger(threads) && threads >= 1)) {
  console.error("usage: node bench.mjs --url URL --sequence NAME [--seconds S (> 0)] [--threads N (>= 1)]");
  process.exit(2);
}
const out = (name, rate) => console.log(`${name}\t${Math.round(rate)}`);
const BATCH = 4096;

/** Calls `body(batch)` (which does `batch` operations) until `seconds` have passed; operations per second. */
async function measure(body, batch = BATCH) {
  const t0 = performance.now();
  const stopAt = t0 + seconds * 1000;
  let n = 0;
  for (;;) {
    await body(batch);
    n += batch;
    const now = performance.now();
    if (now >= stopAt) return n / ((now - t0) / 1000);
  }
}

// The bare counter, in the same loop shape as `next`.
let counter = 0n;
const bare = await measure((b) => {
  for (let i = 0; i < b; i++) counter += 1n;
});
if (counter < 0n) throw new Error("unreachable");
out("bare", bare);
out("bare_8", bare);

const client = new Client({ url: opts.url });
const name = opts.sequence;
const seq = client.sequence(name, { block: 100_000 }); // the largest lease the server gives by default
await seq.next(); // the first lease
let last = 0n;
out(
  "next",
  await measure(async (b) => {
    for (let i = 0; i < b; i++) {
      let v = seq.tryNext();
      if (v === undefined) v = await seq.next();
      last = v;
    }
  }),
);
{
  const t0 = performance.now();
  const stopAt = t0 + seconds * 1000;
  let n = 0;
  const caller = async () => {
    while (performance.now() < stopAt) {
      for (let i = 0; i < 256; i++) last = await seq.next();
      n += 256;
    }
  };
  await Promise.all(Array.from({ length: threads }, caller));
  out("next_8", n / ((performance.now() - t0) / 1000));
}
out(
  "next_n100",
  100 *
    (await measure(async (b) => {
      for (let i = 0; i < b; i++) await seq.nextRanges(100);
    }, 64)),
);
await seq.close();

const lease = await client.workerLease(`bench-typescript-${process.pid}`);
out(
  "worker_ids",
  await measure((b) => {
    for (let i = 0; i < b; i++) last = lease.nextId();
  }),
);
await lease.close();

out(
  "request",
  await measure(async (b) => {
    for (let i = 0; i < b; i++) last = (await client.next(name, 1))[0];
  }, 16),
);
const livez = `${opts.url.replace(/\/+$/, "")}/livez`;
out(
  "livez",
  await measure(async (b) => {
    for (let i = 0; i < b; i++) {
      const r = await fetch(livez);
      if (!r.ok) throw new Error(`GET /livez answered ${r.status}`);
      await r.arrayBuffer();
    }
  }, 16),
);
if (last < 0n) throw new Error("unreachable");
