// Sequence against a real `keysmith serve`: leases from the reserve route,
// values served locally, no value twice.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client } from "@keysmith/client";
import { duplicates, notIncreasing, startServer } from "./support.mjs";

/** Fires `calls` calls at once (every third one a nextN(3)); answers the values in call order. */
async function burst(seq, calls) {
  const ps = [];
  for (let i = 0; i < calls; i++) ps.push(i % 3 === 2 ? seq.nextN(3) : seq.next());
  return (await Promise.all(ps)).flat();
}

describe("Sequence", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("many concurrent calls on one Sequence and on several at once: no value twice, each Sequence in call order", async () => {
    await client.createSequence("burst", { block: 10 });
    await client.createSequence("other", { block: 10 });
    const handles = [
      client.sequence("burst", { block: 5 }),
      client.sequence("burst", { block: 50 }),
      client.sequence("burst", { block: 1, maxBlock: 8 }),
      client.sequence("other"),
    ];
    const all = new Map([["burst", []], ["other", []]]);
    // Three bursts of concurrent calls, each burst on all handles at once.
    for (let round = 0; round < 3; round++) {
      const got = await Promise.all(handles.map((h) => burst(h, 1500)));
      got.forEach((vs, i) => {
        assert.equal(vs.length, 2500); // 1000 next() and 500 nextN(3)
        assert.equal(notIncreasing(vs), "", `handle ${i}, round ${round}`);
        all.get(handles[i].name).push(...vs);
      });
    }
    for (const [name, vs] of all) assert.equal(duplicates(vs), "", name);
    // Values of one handle also increase from one burst to the next.
    for (const h of handles) await h.close();
  });

  test("a sequential caller: next() from the local block, leases growing with the rate", async () => {
    await client.createSequence("steady", { block: 1 });
    // A clock that stands still: every lease was used up "at once", so each doubles.
    const seq = client.sequence("steady", { block: 1, maxBlock: 4096, clock: () => 0 });
    const got = [];
    for (let i = 0; i < 3000; i++) got.push(await seq.next());
    assert.equal(notIncreasing(got), "");
    assert.equal(duplicates(got), "");
    // 1 + 2 + ... + 2048 >= 3000: twelve requests for 3000 values.
    assert.equal(seq.reservations, 12);
    assert.equal(seq.block, 2048);
    await seq.close();
  });

  test("two clients at once, and the plain next route beside them: no value twice", async () => {
    await client.createSequence("shared", { block: 20 });
    const a = new Client({ url: server.url });
    const b = new Client({ url: server.url });
    const sa = a.sequence("shared", { block: 7 });
    const sb = b.sequence("shared", { block: 13 });
    const plain = async () => {
      const out = [];
      for (let i = 0; i < 50; i++) out.push(...(await b.next("shared", 3)));
      return out;
    };
    const loop = async (s) => {
      const out = [];
      for (let i = 0; i < 300; i++) out.push(...(await burst(s, 5)));
      return out;
    };
    const [va, vb, vp] = await Promise.all([loop(sa), loop(sb), plain()]);
    assert.equal(notIncreasing(va), "");
    assert.equal(notIncreasing(vb), "");
    assert.equal(notIncreasing(vp), "");
    assert.equal(duplicates([...va, ...vb, ...vp]), "");
    await Promise.all([sa.close(), sb.close()]);
  });

  test("close() hands the unused tail back when no one reserved since", async () => {
    await client.createSequence("tail", { block: 1 });
    const seq = client.sequence("tail", { block: 100, adaptive: false, prefetch: false });
    assert.equal(await seq.next(), 1n);
    assert.equal((await client.getSequence("tail")).next, 101n);
    assert.deepEqual(await seq.close(), [{ start: 2n, end: 101n }]);
    assert.equal((await client.getSequence("tail")).next, 2n);
    // The next handle starts where the closed one stopped.
    const again = client.sequence("tail", { block: 10, prefetch: false });
    assert.equal(await again.next(), 2n);
    await again.close();
  });

  test("close() with a prefetched lease hands back the newest one", async () => {
    await client.createSequence("tail2", { block: 1 });
    const seq = client.sequence("tail2", { block: 10, adaptive: false });
    assert.deepEqual(await seq.nextN(8), [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n]); // 2 left: prefetch of 11..21 started
    // Handing 11..21 back moves the row on, so 9..11 (reserved before it) stays a gap.
    assert.deepEqual(await seq.close(), [{ start: 11n, end: 21n }]);
    assert.equal((await client.getSequence("tail2")).next, 11n);
  });

  test("close() gives nothing back when someone reserved since, and the values stay unique", async () => {
    await client.createSequence("tail3", { block: 1 });
    const first = client.sequence("tail3", { block: 10, adaptive: false, prefetch: false });
    const second = client.sequence("tail3", { block: 10, adaptive: false, prefetch: false });
    assert.equal(await first.next(), 1n);
    assert.equal(await second.next(), 11n);
    assert.deepEqual(await first.close(), []);
    assert.equal((await client.getSequence("tail3")).next, 21n);
    assert.deepEqual(await second.close(), [{ start: 12n, end: 21n }]);
    assert.equal((await client.getSequence("tail3")).next, 12n);
  });
});
