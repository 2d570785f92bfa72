// Residue classes (every value is offset modulo increment) against a real
// `keysmith serve`: create, the reserve answer's step, Sequence and close().

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { duplicates, notIncreasing, startServer } from "./support.mjs";

/** "" when every value is `offset` mod `increment`, else the first few that are not. */
function outsideClass(values, increment, offset) {
  const bad = values.filter((v) => v % BigInt(increment) !== BigInt(offset));
  return bad.length === 0 ? "" : `${bad.length} values not ${offset} mod ${increment}, e.g. ${bad.slice(0, 5).join(", ")}`;
}

describe("residue classes", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("create, show and list give increment and offset; an ordinary sequence has neither", async () => {
    const info = await client.createSequence("r32", { increment: 3, offset: 2, block: 4 });
    assert.equal(info.increment, 3);
    assert.equal(info.offset, 2);
    assert.equal(info.next, 2n);
    assert.equal(info.start, 2n);
    assert.equal(info.max % 3n, 2n);
    const shown = await client.getSequence("r32");
    assert.deepEqual([shown.increment, shown.offset], [3, 2]);
    const listed = (await client.listSequences()).find((s) => s.name === "r32");
    assert.deepEqual([listed.increment, listed.offset], [3, 2]);
    const plain = await client.createSequence("plain-r");
    assert.equal(plain.increment, undefined);
    assert.equal(plain.offset, undefined);
    const zero = await client.createSequence("r50", { increment: 5, start: 7 }); // offset 0 by default
    assert.deepEqual([zero.increment, zero.offset, zero.start], [5, 0, 10n]);
  });

  test("a Sequence of 2 mod 3: only values of the class, increasing, unique, across refills and close()", async () => {
    await client.createSequence("r-seq", { increment: 3, offset: 2, block: 4 });
    const seq = client.sequence("r-seq", { block: 4, minBlock: 4, maxBlock: 4 });
    const got = [];
    for (let i = 0; i < 5; i++) got.push(await seq.next());
    got.push(...(await seq.nextN(7)));
    got.push(...(await Promise.all([seq.next(), seq.nextN(2), seq.next()])).flat());
    assert.deepEqual(got.slice(0, 4), [2n, 5n, 8n, 11n]);
    assert.equal(got.length, 16);
    assert.ok(seq.reservations >= 4, `${seq.reservations} reservations`);
    assert.equal(notIncreasing(got), "");
    assert.equal(duplicates(got), "");
    assert.equal(outsideClass(got, 3, 2), "");
    const released = await seq.close();
    assert.deepEqual(seq.closeErrors, []);
    assert.equal(released.length, 1);
    const back = released[0];
    assert.ok(back.start > got.at(-1) && back.start % 3n === 2n, `released from ${back.start}`);
    // The next reservation starts where the closed Sequence stopped.
    const lease = await client.reserve("r-seq", 2);
    assert.equal(lease.step, 3);
    assert.deepEqual(lease.ranges, [{ start: back.start, end: back.start + 4n }]);
    const more = await client.next("r-seq", 5);
    assert.equal(outsideClass(more, 3, 2), "");
    assert.equal(duplicates([...got, back.start, back.start + 3n, ...more]), "");
  });

  test("close() right after the first value hands the rest of the lease back", async () => {
    await client.createSequence("r74", { increment: 7, offset: 4, block: 1 });
    const seq = client.sequence("r74", { block: 10, adaptive: false, prefetch: false });
    assert.equal(await seq.next(), 4n);
    assert.equal(seq.buffered, 9);
    assert.deepEqual(await seq.close(), [{ start: 11n, end: 4n + 9n * 7n + 1n }]);
    assert.equal((await client.getSequence("r74")).next, 11n);
  });

  test("release from a value of the lease; another from is a 400", async () => {
    await client.createSequence("r41", { increment: 4, offset: 1 });
    const lease = await client.reserve("r41", 5);
    assert.equal(lease.step, 4);
    assert.deepEqual(lease.ranges, [{ start: 1n, end: 18n }]); // 1, 5, 9, 13, 17
    await assert.rejects(client.release("r41", lease.lease, 6n), (e) => e instanceof KeysmithError && e.status === 400);
    assert.deepEqual(await client.release("r41", lease.lease, 9n), { start: 9n, end: 18n });
    assert.deepEqual(await client.next("r41", 1), [9n]);
  });

  test("an offset at or above the increment is the server's 400", async () => {
    await assert.rejects(
      client.createSequence("bad-r", { increment: 3, offset: 3 }),
      (e) => e instanceof KeysmithError && e.status === 400 && e.code === "invalid_argument" && /offset/.test(e.message),
    );
    // An offset without an increment, and an increment of 1.
    await assert.rejects(client.createSequence("bad-r", { offset: 1 }), (e) => e instanceof KeysmithError && e.status === 400);
    await assert.rejects(client.createSequence("bad-r", { increment: 1 }), (e) => e instanceof KeysmithError && e.status === 400);
    await assert.rejects(client.createSequence("bad-r", { increment: 2.5 }), RangeError);
    await assert.rejects(client.getSequence("bad-r"), (e) => e instanceof KeysmithError && e.code === "not_found");
  });

  test("two regions, increment 2 with offsets 0 and 1, never share a value", async () => {
    await client.createSequence("even", { increment: 2, offset: 0, block: 3 });
    await client.createSequence("odd", { increment: 2, offset: 1, block: 5 });
    const even = client.sequence("even", { block: 3, maxBlock: 8 });
    const odd = client.sequence("odd", { block: 5, maxBlock: 8 });
    const burst = (seq) => Promise.all(Array.from({ length: 60 }, (_, i) => (i % 5 === 0 ? seq.nextN(3) : seq.next())));
    const [evens, odds] = (await Promise.all([burst(even), burst(odd)])).map((vs) => vs.flat());
    evens.push(...(await client.next("even", 3)));
    odds.push(...(await client.next("odd", 3)));
    await Promise.all([even.close(), odd.close()]);
    assert.equal(notIncreasing(evens.slice(0, -3)), "");
    assert.equal(notIncreasing(odds.slice(0, -3)), "");
    assert.equal(outsideClass(evens, 2, 0), "");
    assert.equal(outsideClass(odds, 2, 1), "");
    assert.equal(duplicates([...evens, ...odds]), "");
  });

  test("an ordinary sequence still steps by one", async () => {
    await client.createSequence("plain-step", { block: 5 });
    const lease = await client.reserve("plain-step", 3);
    assert.equal(lease.step, 1);
    assert.deepEqual(lease.ranges, [{ start: 1n, end: 4n }]);
    const seq = client.sequence("plain-step", { block: 5, adaptive: false, prefetch: false });
    assert.deepEqual(await seq.nextN(3), [4n, 5n, 6n]);
    assert.equal(seq.buffered, 2);
    assert.deepEqual(await seq.close(), [{ start: 7n, end: 9n }]);
  });

  test("a pool in a class hands out only its values; show and list give the class", async () => {
    const info = await client.createPool("pool-41", { size: 5, start: 10, increment: 4, offset: 1 });
    assert.deepEqual([info.start, info.size, info.increment, info.offset], [13n, 5, 4, 1]);
    const got = [...(await client.poolNext("pool-41", 20)), ...(await client.poolNext("pool-41", 7))];
    assert.equal(got.length, 27);
    assert.equal(duplicates(got), "");
    assert.equal(outsideClass(got, 4, 1), "");
    assert.ok(got.every((v) => v >= 13n), `below the start: ${got}`);
    const shown = await client.getPool("pool-41");
    assert.deepEqual([shown.increment, shown.offset, shown.taken], [4, 1, 27n]);
    assert.equal(outsideClass([shown.start, shown.lowest, shown.highest, shown.max_value], 4, 1), "");
    const listed = (await client.listPools()).find((p) => p.name === "pool-41");
    assert.deepEqual([listed.increment, listed.offset], [4, 1]);
    const plain = await client.createPool("pool-plain", { size: 3 });
    assert.deepEqual([plain.increment, plain.offset, plain.start], [undefined, undefined, 1n]);
    const zero = await client.createPool("pool-50", { size: 2, start: 7, increment: 5 }); // offset 0 by default
    assert.deepEqual([zero.increment, zero.offset, zero.start], [5, 0, 10n]);
  });

  test("two pools of increment 2 never share a number", async () => {
    await client.createPool("pool-even", { size: 8, start: 0, increment: 2 });
    await client.createPool("pool-odd", { size: 8, start: 0, increment: 2, offset: 1 });
    const take = async (name) => (await Promise.all(Array.from({ length: 5 }, () => client.poolNext(name, 9)))).flat();
    const [evens, odds] = await Promise.all([take("pool-even"), take("pool-odd")]);
    assert.equal(evens.length + odds.length, 90);
    assert.equal(outsideClass(evens, 2, 0), "");
    assert.equal(outsideClass(odds, 2, 1), "");
    assert.equal(duplicates([...evens, ...odds]), "");
  });

  test("a bad pool class is the server's 400 and creates nothing", async () => {
    for (const o of [
      { increment: 3, offset: 3 },
      { offset: 1 }, // an offset without an increment
      { increment: 1 },
      { increment: 0 },
      { start: 2n ** 63n - 30n, increment: 2 }, // fits without a class, not in values of one
    ]) {
      await assert.rejects(
        client.createPool("pool-bad", { size: 10, ...o }),
        (e) => e instanceof KeysmithError && e.status === 400,
        JSON.stringify(o, (_, v) => (typeof v === "bigint" ? String(v) : v)),
      );
    }
    await assert.rejects(client.createPool("pool-bad", { size: 3, increment: 2.5 }), RangeError);
    await assert.rejects(client.getPool("pool-bad"), (e) => e instanceof KeysmithError && e.code === "not_found");
  });
});
