// Servers that die: a dead URL in the list, a server SIGKILLed and restarted
// on the same port and store mid-run, one of two servers over one store
// SIGKILLed. No value twice, and no call fails.

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client } from "@keysmith/client";
import { deadUrl, duplicates, notIncreasing, startServer, tempDir } from "./support.mjs";

/** Resolves when `count()` reaches `n`; `check()` is called after every value. */
function milestones(count) {
  const waiting = [];
  return {
    at(n) {
      return new Promise((res) => waiting.push({ n, res }));
    },
    check() {
      const c = count();
      for (let i = waiting.length - 1; i >= 0; i--) {
        if (c >= waiting[i].n) waiting.splice(i, 1)[0].res();
      }
    },
  };
}

/**
 * Workers until `stop` resolves: per client, a Sequence with a small block
 * fired at with bursts of concurrent calls, and a loop of plain next calls.
 * Answers { perHandle: bigint[][], all: bigint[], m: milestones }.
 */
function workload(clients, name) {
  const perHandle = [];
  const all = [];
  const m = milestones(() => all.length);
  let stopped = false;
  const handles = [];
  const runs = [];
  for (const c of clients) {
    const seq = c.sequence(name, { block: 20, maxBlock: 200 });
    handles.push(seq);
    const mine = [];
    perHandle.push(mine);
    runs.push(
      (async () => {
        while (!stopped) {
          const ps = [];
          for (let i = 0; i < 10; i++) ps.push(seq.next());
          for (const v of await Promise.all(ps)) {
            mine.push(v);
            all.push(v);
          }
          m.check();
        }
      })(),
    );
    const plain = [];
    perHandle.push(plain);
    runs.push(
      (async () => {
        while (!stopped) {
          for (const v of await c.next(name, 2)) {
            plain.push(v);
            all.push(v);
          }
          m.check();
        }
      })(),
    );
  }
  return {
    perHandle,
    all,
    m,
    handles,
    async stop() {
      stopped = true;
      await Promise.all(runs);
      await Promise.all(handles.map((h) => h.close()));
    },
  };
}

test("a dead URL first in the list: every call goes to the live server", async () => {
  const server = await startServer();
  try {
    const c = new Client({ url: [await deadUrl(), server.url] });
    await c.createSequence("f");
    const seq = c.sequence("f", { block: 10 });
    const vs = [...(await seq.nextN(25)), ...(await c.next("f", 5))];
    assert.equal(duplicates(vs), "");
    // Only the first call tried the dead URL; the rest started at the live one.
    assert.equal(c.stats.unreachable, 1);
    assert.equal((await c.getSequence("f")).name, "f");
    await seq.close();
  } finally {
    await server.stop();
  }
});

test("a server SIGKILLed and restarted on the same port and store mid-run: no value twice, no call failed", async () => {
  const dir = tempDir();
  let server = await startServer({ dir });
  const port = server.port;
  try {
    const setup = new Client({ url: server.url });
    await setup.createSequence("restart", { block: 10 });
    const clients = [new Client({ url: server.url }), new Client({ url: server.url })];
    const w = workload(clients, "restart");
    await w.m.at(3000);
    await server.kill();
    const before = w.all.length;
    server = await startServer({ dir, listen: `127.0.0.1:${port}` });
    // The workers go on once the server is back: wait for plenty of values after the restart.
    await w.m.at(before + 3000);
    await w.stop();
    assert.equal(duplicates(w.all), "");
    for (const vs of w.perHandle) assert.equal(notIncreasing(vs), "");
    // The outage was seen (and retried through), not slept through.
    assert.ok(clients.some((c) => c.stats.unreachable > 0), JSON.stringify(clients.map((c) => c.stats)));
  } finally {
    await server.stop();
  }
});

test("two servers over one store, the first SIGKILLed mid-run: clients fail over, no value twice", async () => {
  const dir = tempDir();
  // One lease secret: a lease made by one server is released through the other.
  const leaseSecret = "a lease secret shared by both servers";
  const a = await startServer({ dir, leaseSecret });
  const b = await startServer({ dir, leaseSecret });
  try {
    const urls = [a.url, b.url];
    await new Client({ url: urls }).createSequence("two", { block: 10 });
    const clients = [new Client({ url: urls }), new Client({ url: urls })];
    const w = workload(clients, "two");
    await w.m.at(3000);
    await a.kill();
    const before = w.all.length;
    await w.m.at(before + 3000);
    await w.stop();
    assert.equal(duplicates(w.all), "");
    // Each Sequence's values increase; the plain calls' values increase per server only.
    for (let i = 0; i < w.perHandle.length; i += 2) assert.equal(notIncreasing(w.perHandle[i]), "");
    assert.ok(clients.every((c) => c.stats.unreachable > 0), JSON.stringify(clients.map((c) => c.stats)));
    for (const h of w.handles) assert.deepEqual(h.closeErrors, []);
  } finally {
    await Promise.all([a.kill(), b.stop()]);
  }
});
