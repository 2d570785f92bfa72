// The plain calls, against a real `keysmith serve`, and the errors they map.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { startServer } from "./support.mjs";

/** A predicate for assert.rejects: a KeysmithError with this code and status. */
const fails = (code, status) => (e) => {
  assert.ok(e instanceof KeysmithError, `not a KeysmithError: ${e}`);
  assert.equal(e.code, code, e.message);
  assert.equal(e.status, status, e.message);
  return true;
};

describe("routes", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("health", async () => {
    assert.deepEqual(await client.health(), { status: "ok", store: "ok" });
  });

  test("sequences: create, get, list, next, drop; a name with / and values above 2^53 exact", async () => {
    const start = 2n ** 62n;
    const info = await client.createSequence("team/orders", { start, block: 10 });
    assert.equal(info.name, "team/orders");
    assert.equal(info.start, start);
    assert.equal(info.next, start);
    assert.equal(info.max, 2n ** 63n - 2n); // the store's largest value, i64::MAX - 1: exact, not rounded
    assert.equal(info.remaining, info.max + 1n - start);
    assert.equal(info.block, 10);

    assert.deepEqual(await client.next("team/orders", 3), [start, start + 1n, start + 2n]);
    const got = await client.getSequence("team/orders");
    assert.equal(got.name, "team/orders");
    assert.ok(got.next > start + 2n);
    assert.equal(got.server.last_served, start + 2n);

    const names = (await client.listSequences()).map((s) => s.name);
    assert.ok(names.includes("team/orders"), names.join(", "));

    assert.equal(await client.dropSequence("team/orders"), "team/orders");
    await assert.rejects(client.getSequence("team/orders"), fails("not_found", 404));
  });

  test("a name with / is one path segment in every route (%2F), never the route of its first segment", async () => {
    const base = `slash${process.pid}`;
    const name = `${base}/x/y`;
    await client.createSequence(base); // named like the first segment: must stay untouched
    await client.createSequence(name, { start: 100 });
    assert.equal((await client.getSequence(name)).name, name);
    assert.deepEqual(await client.next(name, 2), [100n, 101n]);
    const lease = await client.reserve(name, 3);
    const first = lease.ranges[0].start;
    assert.deepEqual(lease.ranges, [{ start: first, end: first + 3n }]);
    assert.ok(first >= 102n);
    assert.equal((await client.release(name, lease.lease, first + 1n)).start, first + 1n);
    const seq = client.sequence(name);
    assert.equal(await seq.next(), first + 1n); // the tail that went back is the next reserved
    await seq.close();
    assert.equal((await client.nextNumbers(name, 1)).length, 1);
    assert.equal((await client.getSequence(base)).next, 1n); // nothing above was taken from `base`
    await client.dropSequence(name);
    const pool = `${base}/pool/z`;
    await client.createPool(pool, { size: 5 });
    const got = await client.poolNext(pool, 2);
    // a pool of 5 holds 1..5; taking v puts v + 5 in its place, which the second take may draw
    assert.ok(
      got.length === 2 && got[0] !== got[1] && got.every((g) => (g >= 1n && g <= 5n) || got.includes(g - 5n)),
      String(got),
    );
    assert.equal((await client.getPool(pool)).name, pool);
    await client.dropPool(pool);
    const info = await client.leaseWorker(name);
    assert.equal(info.group, name);
    assert.deepEqual((await client.listWorkers(name)).map((w) => w.worker), [info.worker]);
    assert.equal(await client.releaseWorker(name, info.token), true);
  });

  test("pools: create, next, get, list, drop", async () => {
    const row = await client.createPool("tickets", { size: 10, start: 100 });
    assert.equal(row.name, "tickets");
    assert.equal(row.start, 100n);
    const vs = await client.poolNext("tickets", 4);
    assert.equal(new Set(vs).size, 4);
    for (const v of vs) assert.ok(typeof v === "bigint" && v >= 100n, String(v));
    const info = await client.getPool("tickets");
    assert.equal(info.taken, 4n);
    assert.equal(info.size, 10);
    assert.ok((await client.listPools()).some((p) => p.name === "tickets"));
    assert.equal(await client.dropPool("tickets"), "tickets");
    await assert.rejects(client.poolNext("tickets"), fails("not_found", 404));
  });

  test("counter names", async () => {
    const a = await client.counterNext(3);
    assert.equal(a.host, "testhost");
    assert.equal(a.names.length, 3);
    assert.equal(a.last - a.first, 2n);
    assert.deepEqual(a.names, [0n, 1n, 2n].map((i) => `testhost/${a.first + i}`));
    const b = await client.counterNext();
    assert.equal(b.first, a.last + 1n);
  });

  test("shard keys: encode and decode round trip, a u64 record id exact", async () => {
    const k = await client.encodeShardKey({ origin: "c", shard: 3, record: 42, children: [7n] });
    assert.equal(typeof k.external, "string");
    assert.deepEqual(k.list, ["c", 3, 42, 7]);
    const d = await client.decodeShardKey(k.external, { origin: "c" });
    assert.deepEqual(d.list, ["c", 3, 42, 7]);
    assert.equal(d.external, k.external);

    const big = await client.encodeShardKey({ origin: "u", shard: 65535, record: "u64:18446744073709551615" });
    const back = await client.decodeShardKey(big.external);
    assert.equal(back.key.record.value, 18446744073709551615n);

    const tampered = (k.external.at(-1) === "A" ? k.external.slice(0, -1) + "B" : k.external.slice(0, -1) + "A");
    await assert.rejects(client.decodeShardKey(tampered), (e) => e instanceof KeysmithError && e.status === 400);
  });

  test("errors: 404 unknown sequence, 409 exists and exhausted, 413 count over the limit", async () => {
    await assert.rejects(client.next("no-such-sequence"), fails("not_found", 404));
    await assert.rejects(client.sequence("no-such-sequence").next(), fails("not_found", 404));
    await assert.rejects(client.reserve("no-such-sequence", 10), fails("not_found", 404));

    await client.createSequence("small", { max: 5, block: 1 });
    await assert.rejects(client.createSequence("small"), fails("already_exists", 409));
    assert.deepEqual(await client.next("small", 5), [1n, 2n, 3n, 4n, 5n]);
    await assert.rejects(client.next("small"), fails("exhausted", 409));
    await assert.rejects(client.sequence("small").next(), fails("exhausted", 409));

    await assert.rejects(client.next("small", 1_000_000), fails("too_large", 413));
    await assert.rejects(client.next("small", 0), RangeError);
  });
});

describe("a server with a token", () => {
  let server;
  before(async () => {
    server = await startServer({ token: "s3cret-token" });
  });
  after(() => server.stop());

  test("401 without the token or with a wrong one; the right one works; health needs it too", async () => {
    const none = new Client({ url: server.url });
    const wrong = new Client({ url: server.url, token: "nope" });
    const right = new Client({ url: server.url, token: "s3cret-token" });
    await assert.rejects(none.createSequence("t"), fails("unauthorized", 401));
    await assert.rejects(wrong.createSequence("t"), fails("unauthorized", 401));
    await right.createSequence("t");
    await assert.rejects(none.next("t"), fails("unauthorized", 401));
    await assert.rejects(wrong.sequence("t").next(), fails("unauthorized", 401));
    await assert.rejects(wrong.listSequences(), fails("unauthorized", 401));
    assert.deepEqual(await right.next("t", 2), [1n, 2n]);
    const seq = right.sequence("t");
    assert.ok((await seq.next()) > 2n);
    await seq.close();
    // /healthz pings the store: a principal only, on a server with tokens.
    await assert.rejects(none.health(), fails("unauthorized", 401));
    assert.equal((await right.health()).status, "ok");
  });
});
