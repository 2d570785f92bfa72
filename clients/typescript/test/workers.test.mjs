// Worker-id leases for other generators, against real `keysmith serve`s.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { startServer } from "./support.mjs";

const fails = (code, status) => (e) => {
  assert.ok(e instanceof KeysmithError, `not a KeysmithError: ${e}`);
  assert.equal(e.code, code, e.message);
  assert.equal(e.status, status, e.message);
  return true;
};

/** Polls `cond()` until it is true (a bound on a hang, not a timing). */
async function waitFor(cond, what, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  while (!(await cond())) {
    assert.ok(Date.now() < until, `never: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const group = () => `workers/${randomUUID().slice(0, 12)}`;

describe("worker leases", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("lease, renew, release, exhaustion, bad input", async () => {
    const g = group();
    const a = await client.leaseWorker(g, { ttlMs: 60_000, max: 2 });
    const b = await client.leaseWorker(g, { ttlMs: 60_000, max: 2 });
    assert.deepEqual(new Set([a.worker, b.worker]), new Set([0, 1]));
    assert.ok(a.notBeforeMs < a.untilMs);
    await assert.rejects(client.leaseWorker(g, { max: 2 }), (e) => {
      fails("lease_refused", 409)(e);
      assert.ok(e.message.includes(`all 2 worker ids of group "${g}"`), e.message);
      return true;
    });
    const r = await client.renewWorker(g, a.token);
    assert.deepEqual([r.worker, r.fence, r.notBeforeMs], [a.worker, a.fence, a.notBeforeMs]);
    assert.ok(r.untilMs >= a.untilMs);
    assert.equal(await client.releaseWorker(g, r.token), true);
    const c = await client.leaseWorker(g, { max: 2 });
    assert.deepEqual([c.worker, c.fence], [a.worker, a.fence + 1]);
    assert.ok(c.notBeforeMs >= r.untilMs);
    await assert.rejects(client.renewWorker(g, r.token), fails("lease_refused", 409));
    assert.equal(await client.releaseWorker(g, r.token), false);
    await assert.rejects(client.renewWorker(g, "forged.token"), fails("invalid_argument", 400));
    await assert.rejects(client.leaseWorker(g, { ttlMs: 0 }), fails("bad_request", 400));
    await assert.rejects(client.leaseWorker(g, { max: 0 }), fails("bad_request", 400));
  });

  test("listWorkers: held and free worker ids, no tokens", async () => {
    const g = group();
    assert.deepEqual(await client.listWorkers(g), []);
    const a = await client.leaseWorker(g, { ttlMs: 60_000, max: 4 });
    const b = await client.leaseWorker(g, { ttlMs: 60_000, max: 4 });
    assert.equal(await client.releaseWorker(g, a.token), true);
    const listed = await client.listWorkers(g);
    assert.deepEqual(listed.map((w) => w.worker), [0, 1]);
    const [free, held] = listed;
    assert.deepEqual(free, {
      worker: 0,
      held: false,
      holder: null,
      fence: a.fence,
      untilMs: a.untilMs,
      expiresMs: null,
      expiresInMs: null,
    });
    assert.deepEqual([held.held, held.fence, held.untilMs], [true, b.fence, b.untilMs]);
    assert.ok(held.holder.startsWith("lease/"), held.holder);
    assert.ok(held.expiresInMs > 0 && held.expiresInMs <= 60_000, String(held.expiresInMs));
    assert.equal(typeof held.expiresMs, "number");
    const text = JSON.stringify(listed);
    assert.ok(!text.includes(a.token) && !text.includes(b.token), text);
    await assert.rejects(client.listWorkers("a b"), fails("invalid_name", 400));
  });

  test("WorkerLeases renew in the background and never share a worker id", async () => {
    const g = group();
    const leases = await Promise.all(Array.from({ length: 6 }, () => client.workerLease(g, { ttlMs: 1500, max: 8 })));
    try {
      assert.equal(new Set(leases.map((l) => l.worker)).size, 6);
      const first = leases.map((l) => l.untilMs);
      // A TTL that a loaded machine's scheduling delays cannot outrun.
      await waitFor(() => {
        const lost = leases.filter((l) => l.lost).map((l) => String(l.lostReason));
        assert.deepEqual(lost, []);
        return leases.every((l) => l.renewals >= 3);
      }, "three renewals each");
      leases.forEach((l, i) => {
        assert.equal(l.lost, false, String(l.lostReason));
        assert.ok(l.untilMs > first[i]);
        assert.ok(l.usable());
      });
    } finally {
      await Promise.all(leases.map((l) => l.close()));
    }
    assert.equal(leases[0].usable(), false);
  });

  test("a lease lost while the server is down is reported", async () => {
    const s = await startServer();
    const c = new Client({ url: s.url, deadlineMs: 2_000 });
    const g = group();
    const seen = [];
    const lease = await c.workerLease(g, { ttlMs: 400, max: 1, onLost: (e) => seen.push(e) });
    let event;
    lease.addEventListener("lost", (e) => {
      event = e;
    });
    await s.kill();
    await waitFor(() => lease.lost, "the lease reported lost");
    assert.equal(seen.length, 1);
    assert.equal(seen[0], lease.lostReason);
    assert.equal(event.error, lease.lostReason);
    assert.equal(lease.usable(), false);
    await lease.close();
  });
});
