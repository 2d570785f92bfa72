// Fail fast, typed errors, and no secret in any message (issue #49, item 4),
// against a real `keysmith serve` over TLS with an access file of two
// principals: setup mistakes throw at once (one request sent, or none), each
// status has its own error class, 429's Retry-After is honoured within the
// deadline, and no message the client produced holds a token or a lease token.

import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { inspect } from "node:util";

import {
  Client,
  ConflictError,
  ForbiddenError,
  KeysmithError,
  NotFoundError,
  RateLimitedError,
  SetupError,
  UnauthorizedError,
  UnavailableError,
} from "@keysmith/client";
import { makeCerts, startServer, tempDir } from "./support.mjs";

const TOKEN = `team-${randomBytes(16).toString("hex")}`;
const SLOW_TOKEN = `slow-${randomBytes(16).toString("hex")}`;
const WRONG_TOKEN = `wrong-${randomBytes(16).toString("hex")}`;
const sha = (t) => createHash("sha256").update(t).digest("hex");
const certs = makeCerts();

/** Every text an error shows: message, inspect and String, down its cause chain. */
function texts(e) {
  const out = [];
  for (let cur = e, depth = 0; cur !== undefined && cur !== null && depth < 10; cur = cur.cause, depth++) {
    out.push(String(cur), inspect(cur, { depth: 5 }), JSON.stringify(cur) ?? "");
    if (typeof cur.message === "string") out.push(cur.message);
  }
  return out;
}

describe("fail fast and never show a secret", () => {
  let server;
  before(async () => {
    const dir = tempDir();
    const access = join(dir, "access.toml");
    writeFileSync(
      access,
      `
[[principal]]
name = "team"
token_sha256 = "${sha(TOKEN)}"
grants = [ { names = "team/*", actions = ["use", "read", "admin"] } ]

[[principal]]
name = "slow"
token_sha256 = "${sha(SLOW_TOKEN)}"
grants = [ { names = "team/*", actions = ["use", "read", "admin"] } ]
rate = 1
burst = 1
`,
    );
    server = await startServer({
      args: ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey, "--access-file", access, "--auth-failures-per-ip", "0"],
    });
  });
  after(() => server?.stop());

  test("a token from a file or the environment loses its trailing newline", async () => {
    const f = join(tempDir(), "token");
    writeFileSync(f, `${TOKEN}\n`);
    const c = new Client({ url: server.url, tokenFile: f, caFile: certs.ca });
    await c.createSequence("team/file");
    assert.deepEqual(await c.next("team/file", 2), [1n, 2n]);
    const crlf = new Client({ url: server.url, token: `${TOKEN}\r\n`, caFile: certs.ca });
    assert.deepEqual(await crlf.next("team/file", 1), [3n]);
  });

  test("a token with an illegal character is refused when the client is made, without showing it", () => {
    for (const bad of [`${TOKEN} x`, `${TOKEN}\u0000`, `t\u00f6${TOKEN}`, `${TOKEN}\n\n`, `in\n${TOKEN}`, "", "\n"]) {
      let caught;
      try {
        new Client({ url: "http://127.0.0.1:9", token: bad });
      } catch (e) {
        caught = e;
      }
      assert.ok(caught instanceof TypeError, `no TypeError for ${JSON.stringify(bad.length)}`);
      assert.match(caught.message, /token/);
      for (const t of texts(caught)) assert.ok(!t.includes(TOKEN), t);
      const f = join(tempDir(), "token");
      writeFileSync(f, bad);
      assert.throws(
        () => new Client({ url: "http://127.0.0.1:9", tokenFile: f }),
        (e) => e instanceof TypeError && e.message.includes(f) && !texts(e).some((t) => t.includes(TOKEN)),
      );
    }
  });

  test("setup errors throw at once and are never retried", async () => {
    assert.throws(() => new Client({ url: server.url, caFile: join(tempDir(), "missing.pem") }), /cannot read caFile .*missing\.pem/);
    // a CA file that is not a certificate: a SetupError on the first call, one attempt
    const garbage = join(tempDir(), "garbage.pem");
    writeFileSync(garbage, "not a certificate\n");
    const bad = new Client({ url: server.url, token: TOKEN, caFile: garbage, deadlineMs: 60_000 });
    await assert.rejects(bad.health(), (e) => e instanceof SetupError && !texts(e).some((t) => t.includes(TOKEN)));
    assert.equal(bad.stats.attempts, 1);
    // a server certificate the CA file refuses: one attempt, a SetupError, however long the deadline
    const refused = new Client({ url: server.url, token: TOKEN, caFile: certs.otherCa, deadlineMs: 60_000 });
    await assert.rejects(refused.health(), (e) => e instanceof SetupError && e.code === "tls" && !texts(e).some((t) => t.includes(TOKEN)));
    assert.equal(refused.stats.attempts, 1);
    const wrong = new Client({ url: server.url, token: WRONG_TOKEN, caFile: certs.ca, deadlineMs: 60_000 });
    await assert.rejects(wrong.getSequence("team/x"), (e) => e instanceof UnauthorizedError && e.status === 401);
    assert.equal(wrong.stats.attempts, 1);
    const forbidden = new Client({ url: server.url, token: TOKEN, caFile: certs.ca, deadlineMs: 60_000 });
    await assert.rejects(forbidden.createSequence("other/x"), (e) => e instanceof ForbiddenError && e.status === 403);
    assert.equal(forbidden.stats.attempts, 1);
  });

  test("each status has its error class and no message holds a token or a lease token", async () => {
    const errors = [];
    const shown = [];
    const secrets = [TOKEN, SLOW_TOKEN, WRONG_TOKEN];
    const expect = async (cls, p) => {
      let caught;
      try {
        await p;
      } catch (e) {
        caught = e;
      }
      assert.ok(caught instanceof cls, `expected ${cls.name}, got ${caught}`);
      errors.push(caught);
      return caught;
    };
    const name = `team/${randomBytes(4).toString("hex")}`;
    const c = new Client({ url: server.url, token: TOKEN, caFile: certs.ca });
    shown.push(inspect(c, { depth: 6 }));
    await c.createSequence(name);
    await expect(ConflictError, c.createSequence(name));
    await expect(NotFoundError, c.getSequence("team/none"));
    await expect(ForbiddenError, c.next("other/x", 1));
    const lease = await c.reserve(name, 5);
    secrets.push(lease.lease);
    const seq = c.sequence(name);
    assert.ok((await seq.next()) > 0n);
    await seq.close();
    await c.dropSequence(name);
    await expect(KeysmithError, c.release(name, lease.lease, lease.ranges[0].start));
    const info = await c.leaseWorker("team/w");
    secrets.push(info.token);
    assert.equal(await c.releaseWorker("team/w", info.token), true);
    const forged = [...info.token].reverse().join(""); // a lease token that is not one: refused without being shown
    secrets.push(forged);
    await expect(KeysmithError, c.renewWorker("team/w", forged));
    const wl = await c.workerLease("team/w2");
    wl.nextId();
    shown.push(inspect(wl, { depth: 6 }));
    await wl.close();
    const wrong = new Client({ url: server.url, token: WRONG_TOKEN, caFile: certs.ca });
    shown.push(inspect(wrong, { depth: 6 }));
    await expect(UnauthorizedError, wrong.listSequences());
    // 429: Retry-After past the deadline throws at once; within it, it is waited out
    const slow = new Client({ url: server.url, token: SLOW_TOKEN, caFile: certs.ca, deadlineMs: 200 });
    await slow.createSequence(`team/slow-${randomBytes(4).toString("hex")}`);
    const limited = await expect(RateLimitedError, slow.listSequences());
    assert.equal(limited.status, 429);
    assert.ok(limited.retryAfter > 0, `retryAfter ${limited.retryAfter}`);
    const patient = new Client({ url: server.url, token: SLOW_TOKEN, caFile: certs.ca, deadlineMs: 30_000 });
    await patient.listSequences();
    await patient.listSequences(); // over the rate: waits for Retry-After, then answered
    // no server: UnavailableError once the deadline is over
    const url = server.url;
    await server.stop();
    server = undefined;
    const gone = new Client({ url, token: TOKEN, caFile: certs.ca, deadlineMs: 300 });
    await expect(UnavailableError, gone.listSequences());
    for (const e of errors) shown.push(...texts(e));
    for (const s of secrets) {
      const leaks = shown.filter((t) => t.includes(s));
      assert.deepEqual(leaks, [], `a secret in: ${leaks.join(" | ")}`);
    }
    assert.ok(errors.length >= 8);
  });
});
