// Opaque and encoded sequences, decode and the JavaScript-safe bound, against
// a real `keysmith serve` (the same cases as the Python client's test_opaque.py).

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { startServer } from "./support.mjs";

const fails = (code, status) => (e) => {
  assert.ok(e instanceof KeysmithError, `not a KeysmithError: ${e}`);
  assert.equal(e.code, code, e.message);
  assert.equal(e.status, status, e.message);
  return true;
};

describe("opaque and encoded sequences", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new Client({ url: server.url });
  });
  after(() => server.stop());

  test("opaque base62 strings decode to their counters", async () => {
    await client.createSequence("op/users", { opaque: true, encoding: "base62", prefix: "usr", jsSafe: true });
    const got = await client.nextNumbers("op/users", 10);
    assert.equal(new Set(got).size, 10);
    for (const s of got) assert.ok(s.startsWith("usr_") && s.length === 4 + 9 + 1, s);
    const decoded = [];
    for (const s of got) decoded.push(await client.decode("op/users", s));
    assert.deepEqual(decoded.map((d) => d.counter), [1n, 2n, 3n, 4n, 5n, 6n, 7n, 8n, 9n, 10n]);
    assert.deepEqual(await client.decode("op/users", decoded[3].value), decoded[3]);
  });

  test("bad values and options are refused", async () => {
    await client.createSequence("op/inv", { encoding: "base32", prefix: "inv" });
    const [good] = await client.nextNumbers("op/inv", 1);
    assert.equal((await client.decode("op/inv", good)).counter, 1n);
    await assert.rejects(client.decode("op/inv", good.replace("inv_", "ord_")), fails("invalid_argument", 400));
    await assert.rejects(client.decode("op/inv", good + "0"), fails("invalid_argument", 400));
    await assert.rejects(
      client.createSequence("op/js", { jsSafe: true, max: 2n ** 53n }),
      fails("invalid_argument", 400),
    );
    await assert.rejects(client.getSequence("op/js"), fails("not_found", 404));
  });
});
