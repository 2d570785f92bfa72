// https URLs, a CA file and client certificates, against a real
// `keysmith serve --tls-cert` with certificates made by clients/tls-test-certs.sh.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client, KeysmithError, SetupError } from "@keysmith/client";
import { makeCerts, startServer } from "./support.mjs";

const certs = makeCerts();
const tlsArgs = ["--tls-cert", certs.serverCert, "--tls-key", certs.serverKey];

/** A predicate for assert.rejects: a TLS refusal, thrown at once as a SetupError, for a reason matching `why`. */
const refused = (why) => (e) => {
  assert.ok(e instanceof SetupError, `not a SetupError: ${e}`);
  assert.equal(e.code, "tls", e.message);
  assert.match(e.message, why);
  return true;
};

describe("https", () => {
  let server;
  before(async () => {
    server = await startServer({ args: tlsArgs });
  });
  after(() => server.stop());

  test("the server's CA file: values over TLS", async () => {
    assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);
    const client = new Client({ url: server.url, caFile: certs.ca });
    await client.createSequence("tls/orders", { start: 10n });
    assert.deepEqual(await client.sequence("tls/orders").nextN(3), [10n, 11n, 12n]);
  });

  test("a server whose CA is not trusted is refused", async () => {
    const client = new Client({ url: server.url, caFile: certs.otherCa, deadlineMs: 1000 });
    await assert.rejects(client.health(), refused(/unable to verify the first certificate/));
  });
});

describe("https with client certificates", () => {
  let server;
  before(async () => {
    server = await startServer({ args: [...tlsArgs, "--client-ca", certs.ca] });
  });
  after(() => server.stop());

  test("a client without a certificate is refused", async () => {
    const client = new Client({ url: server.url, caFile: certs.ca, deadlineMs: 1000 });
    await assert.rejects(client.health(), refused(/certificate required/));
  });

  test("a client with one signed by the CA gets values", async () => {
    const client = new Client({ url: server.url, caFile: certs.ca, certFile: certs.clientCert, keyFile: certs.clientKey });
    await client.createSequence("tls/mutual");
    assert.deepEqual(await client.next("tls/mutual", 2), [1n, 2n]);
  });
});

test("bad TLS options say which", () => {
  assert.throws(() => new Client({ url: "https://127.0.0.1:1", keyFile: certs.clientKey }), /keyFile needs certFile/);
  assert.throws(() => new Client({ url: "https://127.0.0.1:1", caFile: "/nonexistent/ca.pem" }), /cannot read caFile \/nonexistent\/ca\.pem/);
  assert.throws(
    () => new Client({ url: "https://127.0.0.1:1", caFile: certs.ca, fetch: globalThis.fetch }),
    /either fetch or caFile/,
  );
});
