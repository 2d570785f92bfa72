// Gap-free tickets, parse, time-ordered ids and alter, against a real
// `keysmith serve` (the same cases as the Python client's test_numbers.py).

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

describe("numbers, ids and alter", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("gap-free: take, commit, release; a released number is the next one taken", async () => {
    const info = await client.createSequence("inv/plain", { gapless: true });
    assert.deepEqual(info.numbering, { gapless: true, period: null, template: null });
    assert.deepEqual((await client.getSequence("inv/plain")).numbering, info.numbering);

    const t1 = await client.takeTicket("inv/plain");
    const t2 = await client.takeTicket("inv/plain", 60);
    assert.deepEqual([t1.sequence, t1.value, t1.n, t1.period], ["inv/plain", 1n, 1n, null]);
    assert.deepEqual([t2.value, t2.n], [2n, 2n]);
    assert.notEqual(t1.ticket, t2.ticket);

    assert.equal(await client.releaseTicket("inv/plain", t1), 1n);
    const t3 = await client.takeTicket("inv/plain");
    assert.equal(t3.value, 1n);
    assert.notEqual(t3.ticket, t1.ticket);
    assert.equal(await client.commitTicket("inv/plain", t2.ticket), 2n);
    assert.equal(await client.commitTicket("inv/plain", t3), 1n);
    assert.equal((await client.takeTicket("inv/plain")).value, 3n);
  });

  test("a wrong ticket is refused with ticket_refused and changes nothing", async () => {
    await client.createSequence("inv/wrong", { gapless: true });
    const held = await client.takeTicket("inv/wrong");
    assert.equal(held.value, 1n);
    const forged = `0-${held.value}-${"0".repeat(32)}`; // the same number, a token it was never given
    await assert.rejects(client.commitTicket("inv/wrong", forged), fails("ticket_refused", 409));
    await assert.rejects(client.releaseTicket("inv/wrong", forged), fails("ticket_refused", 409));
    await assert.rejects(client.commitTicket("inv/wrong", "not a ticket/at all"), fails("invalid_argument", 400));

    // nothing changed: the number is still held (not freed, not committed), the next one follows it
    assert.equal((await client.takeTicket("inv/wrong")).value, 2n);
    assert.equal(await client.commitTicket("inv/wrong", held), 1n);
    // a settled ticket is refused from then on
    await assert.rejects(client.commitTicket("inv/wrong", held), fails("ticket_refused", 409));
    await assert.rejects(client.releaseTicket("inv/wrong", held), fails("ticket_refused", 409));
    assert.equal((await client.takeTicket("inv/wrong")).value, 3n);
  });

  test("tickets and next refuse the wrong kind of sequence", async () => {
    await client.createSequence("kind/ordinary");
    await assert.rejects(client.takeTicket("kind/ordinary"), fails("wrong_kind", 409));
    await client.createSequence("kind/gapless", { gapless: true });
    await assert.rejects(client.next("kind/gapless"), fails("wrong_kind", 409));
    await assert.rejects(client.sequence("kind/gapless").next(), fails("wrong_kind", 409));
    await assert.rejects(client.takeTicket("kind/missing"), fails("not_found", 404));
    await assert.rejects(client.takeTicket("kind/gapless", 0), RangeError);
  });

  test("parse: a formatted number and garbage", async () => {
    await client.createSequence("inv/daily", { gapless: true, period: "day", format: "INV-{period}-{n:04}" });
    const t = await client.takeTicket("inv/daily");
    assert.equal(typeof t.period, "number");
    assert.equal(t.value, `INV-${t.period}-0001`);
    assert.deepEqual(await client.parse("inv/daily", t.value), { period: t.period, n: 1n });
    assert.equal(await client.commitTicket("inv/daily", t), t.value);
    await assert.rejects(client.parse("inv/daily", "garbage"), (e) => fails("invalid_argument", 400)(e) && e.message.includes("garbage"));

    // a formatted sequence without tickets: nextNumbers answers its printed numbers
    await client.createSequence("ord", { format: "ORD-{n:06}" });
    assert.deepEqual(await client.nextNumbers("ord", 2), ["ORD-000001", "ORD-000002"]);
    assert.deepEqual(await client.parse("ord", "ORD-000042"), { period: null, n: 42n });
    await assert.rejects(client.next("ord"), fails("wrong_kind", 200)); // printed numbers are not integers

    // a plain gap-free sequence prints plain integers; an ordinary one has nothing to parse
    await client.createSequence("inv/ints", { gapless: true });
    assert.deepEqual(await client.parse("inv/ints", "7"), { period: null, n: 7n });
    await assert.rejects(client.parse("inv/ints", "x7"), fails("invalid_argument", 400));
    await client.createSequence("plain");
    await assert.rejects(client.parse("plain", "7"), fails("wrong_kind", 409));
    assert.deepEqual(await client.nextNumbers("plain", 2), ["1", "2"]);
  });

  test("ids: next and decode round trip, bigints exact above 2^53", async () => {
    const ids = [...(await client.nextIds(5)), ...(await client.nextIds())];
    assert.equal(ids.length, 6);
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids[i]} after ${ids[i - 1]}`);
    assert.ok(ids.every((i) => typeof i === "bigint"));
    const parts = [];
    for (const id of ids) parts.push(await client.decodeId(id));
    const now = Date.now();
    for (const [k, d] of parts.entries()) {
      assert.equal(d.id, ids[k]);
      assert.ok(Math.abs(d.time_ms - now) < 60_000, JSON.stringify({ ...d, id: String(d.id) }));
      assert.equal(Date.parse(d.time), d.time_ms);
    }
    assert.equal(new Set(parts.map((d) => d.worker)).size, 1);
    assert.deepEqual(await client.decodeId(String(ids[0])), parts[0]);
    const top = await client.decodeId(2n ** 63n - 1n); // exact, though a JavaScript number would round it
    assert.equal(top.id, 2n ** 63n - 1n);
    for (const bad of ["abc", -1, "99999999999999999999"]) {
      await assert.rejects(client.decodeId(bad), fails("invalid_argument", 400));
    }
    await assert.rejects(client.nextIds(0), RangeError);
  });

  test("ids: UUIDv7s increase, carry version 7 and the RFC variant, and the server's worker id", async () => {
    const [before] = await client.nextIds();
    const last = await client.decodeId(before);
    const uuids = [...(await client.nextUuids(300)), ...(await client.nextUuids())];
    assert.equal(uuids.length, 301);
    assert.equal(new Set(uuids).size, 301);
    for (let i = 1; i < uuids.length; i++) assert.ok(uuids[i] > uuids[i - 1], `${uuids[i]} after ${uuids[i - 1]}`);
    for (const u of uuids) {
      assert.match(u, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      const n = BigInt("0x" + u.replaceAll("-", ""));
      const ms = Number(n >> 80n);
      const counter = Number((n >> 64n) & 0xfffn);
      const worker = Number((n >> 40n) & 0x3fffffn);
      assert.equal(worker, last.worker);
      assert.ok(ms > last.time_ms || (ms === last.time_ms && counter > last.sequence), u);
    }
    await assert.rejects(client.nextUuids(0), RangeError);
  });

  test("alter: next forward; backwards, max below the reserved and nothing to change are refused and change nothing", async () => {
    await client.createSequence("altered", { block: 5 });
    const lease = await client.reserve("altered", 10);
    assert.deepEqual(lease.ranges, [{ start: 1n, end: 11n }]);
    const info = await client.alter("altered", { next: 100 });
    assert.deepEqual([info.name, info.next, info.block], ["altered", 100n, 5]);
    assert.deepEqual((await client.reserve("altered", 3)).ranges, [{ start: 100n, end: 103n }]);

    await assert.rejects(client.alter("altered", { next: 50 }), (e) => fails("invalid_argument", 400)(e) && e.message.includes("forward"));
    await assert.rejects(client.alter("altered", { max: 50 }), fails("invalid_argument", 400));
    await assert.rejects(client.alter("altered", {}), fails("invalid_argument", 400));
    const got = await client.getSequence("altered");
    assert.deepEqual([got.next, got.block], [103n, 5]); // the refused changes changed nothing
    assert.equal(got.skipped, 89);
    assert.equal(typeof got.unaccounted, "bigint");

    const more = await client.alter("altered", { max: 1000n, block: 7 });
    assert.deepEqual([more.next, more.max, more.block], [103n, 1000n, 7]);
    await assert.rejects(client.alter("altered-missing", { next: 5 }), fails("not_found", 404));
    await client.createSequence("altered/gapless", { gapless: true });
    await assert.rejects(client.alter("altered/gapless", { next: 5 }), fails("wrong_kind", 409));
  });

  test("status", async () => {
    const s = await client.status();
    assert.ok(Array.isArray(s.sequences) && s.sequences.length > 0);
  });
});
