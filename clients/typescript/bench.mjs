// Values per second from a local `keysmith serve` (SQLite store in a
// temporary directory), in one run: the client's cached Sequence.next()
// against one HTTP request per value (POST /v1/sequences/{name}/next?count=1).
//
//   npm run build && node bench.mjs [--seconds S] [--callers C]
//
// Uses $KEYSMITH_BIN, else target/release/keysmith, else target/debug/keysmith
// of this workspace. Prints a markdown table.

import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { Client } from "@keysmith/client";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
if (process.env.KEYSMITH_BIN === undefined) {
  for (const profile of ["release", "debug"]) {
    const bin = join(process.env.CARGO_TARGET_DIR ?? join(root, "target"), profile, "keysmith");
    if (existsSync(bin)) {
      process.env.KEYSMITH_BIN = bin;
      break;
    }
  }
}
const { startServer } = await import("./test/support.mjs");

const { values: opts } = parseArgs({
  options: {
    seconds: { type: "string", default: "3" },
    callers: { type: "string", default: "16" },
  },
});
const seconds = Number(opts.seconds);
const callers = Number(opts.callers);

/**
 * Runs `nCallers` loops of `one()` for `seconds`; answers values per second.
 * (Uniqueness is what the tests prove; here each caller only checks that its
 * values increase, which costs a comparison.)
 */
async function measure(one, nCallers) {
  const stopAt = performance.now() + seconds * 1000;
  let n = 0;
  const loop = async () => {
    let last = -1n;
    while (performance.now() < stopAt) {
      for (let i = 0; i < 64; i++) {
        const v = await one();
        if (v <= last) throw new Error(`values went back: ${v} after ${last}`);
        last = v;
      }
      n += 64;
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: nCallers }, loop));
  return n / ((performance.now() - t0) / 1000);
}

const server = await startServer();
try {
  const client = new Client({ url: server.url });
  const rows = [];
  for (const c of [1, callers]) {
    const name = `bench-cached-${c}`;
    await client.createSequence(name);
    const seq = client.sequence(name);
    await seq.next(); // the first lease
    rows.push([`Sequence.next() (cached block)`, c, await measure(() => seq.next(), c), `${seq.reservations} leases, last block ${seq.block}`]);
    await seq.close();

    const plain = `bench-plain-${c}`;
    await client.createSequence(plain);
    rows.push([`POST /next?count=1 per value`, c, await measure(async () => (await client.next(plain, 1))[0], c), ""]);
  }
  // Over a worker lease: time-ordered ids made locally under a leased worker id.
  const lease = client.processWorkerLease(`bench-${process.pid}`);
  await lease.nextId(); // takes the lease
  rows.push([`ProcessWorkerLease.nextId() (local ids over a worker lease)`, 1, await measure(() => lease.nextId(), 1), ""]);
  await lease.close();
  // The language's own floor: a bare bigint counter, no client at all.
  let counter = 0n;
  rows.push([`bare loop: counter += 1n`, 1, await measure(() => (counter += 1n), 1), ""]);
  const f = (x) => Math.round(x).toLocaleString("en-US");
  console.log(`keysmith TypeScript client, node ${process.version}, ${cpus().length} cores, ${seconds} s each, server ${process.env.KEYSMITH_BIN} (SQLite)\n`);
  console.log("| how | concurrent callers | values/s | note |");
  console.log("| --- | ---: | ---: | --- |");
  for (const [how, c, rate, note] of rows) console.log(`| ${how} | ${c} | ${f(rate)} | ${note} |`);
  const speedup = rows[0][2] / rows[1][2];
  console.log(`\ncached next() is ${speedup.toFixed(0)}x one request per value (1 caller)`);
} finally {
  await server.stop();
}
