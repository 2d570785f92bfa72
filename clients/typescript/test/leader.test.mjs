// Leader-ordered sequences: a client of a follower follows its 421 to the leader.
import { test } from "node:test";
import assert from "node:assert/strict";

import { Client } from "@keysmith/client";
import { startServer } from "./support.mjs";

test("a client of a follower gets values from the leader, in call order", async () => {
  const a = await startServer();
  const b = await startServer({ dir: a.dir });
  try {
    const ca = new Client({ url: a.url });
    const cb = new Client({ url: b.url });
    await ca.createSequence("led", { order: "leader" });
    const first = await ca.next("led", 2); // a leads from here on
    assert.deepEqual(first, [1n, 2n]);
    const r = await fetch(`${b.url}/v1/sequences/led/next`, { method: "POST" });
    assert.equal(r.status, 421);
    assert.equal(r.headers.get("keysmith-leader"), a.url);
    assert.equal((await r.json()).error.leader, a.url);
    const got = [];
    for (let i = 0; i < 5; i++) got.push((await cb.next("led"))[0]);
    for (let i = 1; i < got.length; i++) assert.ok(got[i] > got[i - 1], `${got}`);
    assert.ok(got[0] > first[1]);
    assert.ok((await ca.next("led"))[0] > got[4]);
  } finally {
    await a.stop();
    await b.stop();
  }
});
