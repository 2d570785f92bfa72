// Failover rules that a real keysmith server cannot be made to show on
// demand (a 503 with Retry-After): two small node:http servers on 127.0.0.1
// that answer what each test tells them. The real-server failover tests are
// in failover.test.mjs.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, test } from "node:test";

import { Client, KeysmithError } from "@keysmith/client";
import { deadUrl } from "./support.mjs";

/** A server that answers the queued replies in turn (the last one repeats), recording request times. */
async function scripted(replies) {
  const seen = [];
  const srv = createServer((req, res) => {
    const seenReq = { at: Date.now(), method: req.method, url: req.url, auth: req.headers.authorization, body: "" };
    seen.push(seenReq);
    req.setEncoding("utf8");
    req.on("data", (d) => (seenReq.body += d));
    req.on("end", () => {
      const r = replies.length > 1 ? replies.shift() : replies[0];
      res.writeHead(r.status, { "content-type": "application/json", ...(r.headers ?? {}) });
      res.end(JSON.stringify(r.body));
    });
  });
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  after(() => new Promise((res) => srv.close(res)));
  return { url: `http://127.0.0.1:${srv.address().port}`, seen };
}

const busy = { status: 503, headers: { "retry-after": "1" }, body: { error: { code: "contention", message: "busy" } } };
const ok = { status: 200, body: { status: "ok" } };

test("a 503 sends the call to the next server at once", async () => {
  const a = await scripted([busy]);
  const b = await scripted([ok]);
  const c = new Client({ url: [a.url, b.url], token: "t0k" });
  assert.deepEqual(await c.health(), { status: "ok" });
  assert.equal(a.seen.length, 1);
  assert.equal(b.seen.length, 1);
  assert.equal(b.seen[0].auth, "Bearer t0k");
  // The next call starts at the server that answered.
  await c.health();
  assert.equal(a.seen.length, 1);
  assert.equal(b.seen.length, 2);
});

test("with every server at 503, the call waits out Retry-After and tries again", async () => {
  const a = await scripted([busy, ok]);
  const c = new Client({ url: a.url });
  assert.deepEqual(await c.health(), { status: "ok" });
  assert.equal(a.seen.length, 2);
  assert.ok(a.seen[1].at - a.seen[0].at >= 990, `retried ${a.seen[1].at - a.seen[0].at} ms after a Retry-After of 1 s`);
});

test("past the deadline the call fails with the server's last error", async () => {
  const a = await scripted([busy]);
  const c = new Client({ url: a.url, deadlineMs: 500 });
  await assert.rejects(c.health(), (e) => {
    assert.ok(e instanceof KeysmithError);
    assert.equal(e.code, "contention");
    assert.equal(e.status, 503);
    assert.equal(e.retryAfter, 1);
    return true;
  });
  assert.equal(a.seen.length, 1);
});

test("no server reachable: code unreachable, status 0", async () => {
  const c = new Client({ url: [await deadUrl(), await deadUrl()], deadlineMs: 300 });
  await assert.rejects(c.health(), (e) => e instanceof KeysmithError && e.code === "unreachable" && e.status === 0);
});

test("other errors do not fail over: the first answer counts", async () => {
  const a = await scripted([{ status: 404, body: { error: { code: "not_found", message: "no sequence \"x\"" } } }]);
  const b = await scripted([ok]);
  const c = new Client({ url: [a.url, b.url] });
  await assert.rejects(c.getSequence("x"), (e) => e instanceof KeysmithError && e.code === "not_found" && e.status === 404);
  assert.equal(b.seen.length, 0);
});

test("a ticket commit is not sent again once it may have reached a server; a refused connection fails over", async () => {
  // A server that reads the request, then drops the connection without answering.
  const hung = [];
  const srv = createServer((req) => {
    hung.push(req.url);
    req.socket.destroy();
  });
  await new Promise((res) => srv.listen(0, "127.0.0.1", res));
  after(() => new Promise((res) => srv.close(res)));
  const dropper = `http://127.0.0.1:${srv.address().port}`;
  const b = await scripted([{ status: 200, body: { committed: 7 } }]);

  const c = new Client({ url: [dropper, b.url], deadlineMs: 2000 });
  await assert.rejects(c.commitTicket("s", "0-7-" + "a".repeat(32)), (e) => {
    assert.ok(e instanceof KeysmithError);
    assert.equal(e.code, "unreachable");
    assert.match(e.message, /may or may not have taken effect/);
    return true;
  });
  assert.equal(hung.length, 1);
  assert.equal(b.seen.length, 0, "sent again to the next server");

  // Refused: surely never sent, so the next server gets it.
  const d = new Client({ url: [await deadUrl(), b.url] });
  assert.equal(await d.commitTicket("s", "0-7-" + "a".repeat(32)), 7n);
  assert.equal(b.seen.length, 1);
  assert.equal(b.seen[0].url, "/v1/sequences/s/tickets/commit", "the ticket never in the URL");
  assert.deepEqual(JSON.parse(b.seen[0].body), { ticket: "0-7-" + "a".repeat(32) });

  // A 503 timeout may still take effect: not sent again either.
  const t = await scripted([{ status: 503, headers: { "retry-after": "1" }, body: { error: { code: "timeout", message: "slow" } } }]);
  const e2 = new Client({ url: [t.url, b.url] });
  await assert.rejects(e2.releaseTicket("s", "0-7-" + "a".repeat(32)), (e) => e instanceof KeysmithError && e.code === "timeout" && /not sent again/.test(e.message));
  assert.equal(b.seen.length, 1);
});

// A worker lease's token is a credential: a renew or release that fails in
// any way says the path with `***` in its place, never the token.
test("errors never say a worker lease's token", async () => {
  const token = "tok-secret-1234567890";
  const notJson = createServer((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end("this is not json");
  });
  const hangUp = createServer((req) => req.socket.destroy());
  for (const s of [notJson, hangUp]) await new Promise((r) => s.listen(0, "127.0.0.1", r));
  try {
    for (const s of [notJson, hangUp]) {
      const client = new Client({ url: `http://127.0.0.1:${s.address().port}`, deadlineMs: 500 });
      for (const call of [() => client.renewWorker("g", token), () => client.releaseWorker("g", token)]) {
        const e = await call().then(
          () => assert.fail("expected an error"),
          (e) => e,
        );
        const said = `${e.message} ${e.stack} ${e.cause ? `${e.cause.message} ${e.cause.stack}` : ""}`;
        assert.ok(!said.includes(token), `the token was said: ${said}`);
      }
      client.close?.();
    }
  } finally {
    for (const s of [notJson, hangUp]) s.close();
  }
});
