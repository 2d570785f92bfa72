// One worker id per process: Node cluster workers forked from a primary that
// holds a worker lease never use its worker id, and no id repeats.

import assert from "node:assert/strict";
import cluster from "node:cluster";
import { randomUUID } from "node:crypto";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { startServer } from "./support.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const WORKERS = 4;
const IDS = 3000;

let server;
before(async () => {
  server = await startServer();
});
after(() => server.stop());

test("cluster workers each take their own worker id; no id twice", async () => {
  const group = `fork/${randomUUID().slice(0, 12)}`;
  const client = new Client({ url: server.url });
  const mine = client.processWorkerLease(group, { ttlMs: 60_000, max: 16 });
  assert.equal(mine.taken, false, "taken before first use");
  const parentIds = [];
  for (let i = 0; i < 100; i++) parentIds.push(await mine.nextId());
  const parentWorker = (await mine.lease()).worker;

  cluster.setupPrimary({ exec: join(here, "fork-worker.mjs"), args: [server.url, group, String(IDS)], silent: false });
  const forked = Array.from({ length: WORKERS }, () => cluster.fork());
  const exited = forked.map((w) => new Promise((resolve) => w.on("exit", (code) => resolve(code))));
  const results = await Promise.all(
    forked.map(
      (w) =>
        new Promise((resolve, reject) => {
          w.on("message", (m) => (m.error ? reject(new Error(m.error)) : resolve(m)));
          w.on("exit", (code) => reject(new Error(`worker exited ${code} before it answered`)));
        }),
    ),
  );
  // every worker held its lease until here: now they release it and exit
  for (const w of forked) w.send("close");
  assert.deepEqual(await Promise.all(exited), forked.map(() => 0));
  for (let i = 0; i < 100; i++) parentIds.push(await mine.nextId());

  for (const r of results) assert.equal(r.takenBefore, false);
  const workers = [parentWorker, ...results.map((r) => r.worker)];
  assert.equal(new Set(workers).size, WORKERS + 1, `a worker id used by two processes: ${workers}`);
  const all = [...parentIds.map(String), ...results.flatMap((r) => r.ids)];
  assert.equal(new Set(all).size, all.length, "an id was made twice");
  for (const r of results) {
    for (const id of r.ids) assert.equal(Number((BigInt(id) >> 12n) & 1023n), r.worker);
  }
  const decoded = await client.decodeId(results[0].ids[0]);
  assert.equal(decoded.worker, results[0].worker);
  // each worker released its own lease; the primary's is still held
  const held = (await client.listWorkers(group)).filter((w) => w.held).map((w) => w.worker);
  assert.deepEqual(held, [parentWorker]);
  await mine.close();
  await assert.rejects(mine.nextId(), (e) => e instanceof KeysmithError && e.code === "closed");
});

test("a lease past its expiry refuses ids at once", async () => {
  const own = await startServer();
  try {
    const client = new Client({ url: own.url, deadlineMs: 1000 });
    const lease = await client.workerLease(`exp/${randomUUID().slice(0, 8)}`, { ttlMs: 500, max: 1 });
    lease.nextId();
    await own.kill();
    const until = Date.now() + 30_000; // a bound on a hang, not a timing
    for (;;) {
      assert.ok(Date.now() < until, "nextId never refused");
      try {
        lease.nextId();
      } catch (e) {
        if (e.code === "lease_lost") break;
        throw e;
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    assert.equal(lease.usable(), false);
    await lease.close();
  } finally {
    await own.stop();
  }
});
