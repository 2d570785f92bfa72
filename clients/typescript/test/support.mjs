// Starts real `keysmith serve` processes for the tests: a throwaway SQLite
// store in a temporary directory, a free port on 127.0.0.1, the address read
// from the first stderr line. Every process started is killed by its PID when
// the test process exits.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../..");

/** The keysmith binary: $KEYSMITH_BIN, else the workspace's debug build. */
export function keysmithBin() {
  const bin = process.env.KEYSMITH_BIN ?? join(repoRoot, "target", "debug", "keysmith");
  if (!existsSync(bin)) {
    throw new Error(`no keysmith binary at ${bin}: run \`cargo build -p keysmith-cli\` in ${repoRoot} or set $KEYSMITH_BIN`);
  }
  return bin;
}

const live = new Set();
process.on("exit", () => {
  for (const p of live) {
    try {
      process.kill(p.pid, "SIGKILL");
    } catch {
      // gone already
    }
  }
});

/** A temporary directory, removed when the test process exits. */
export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), "keysmith-ts-"));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * Starts `keysmith --store sqlite://DIR/k.db serve`. Options: `dir` (the
 * store's directory; a new one by default), `listen` (default 127.0.0.1:0),
 * `token` (the server then requires it), `leaseSecret` (shared by servers
 * that must open each other's lease tokens), `args` (more serve options).
 * Answers { url, port, dir, pid, kill(), stop(), exited }.
 */
export async function startServer(opts = {}) {
  const dir = opts.dir ?? tempDir();
  const args = ["--store", `sqlite://${join(dir, "k.db")}`, "serve", "--listen", opts.listen ?? "127.0.0.1:0"];
  args.push("--counter-dir", join(dir, "counter"), "--counter-host", "testhost");
  const secret = join(dir, "shard-secret");
  writeFileSync(secret, "a test secret of at least sixteen bytes\n");
  args.push("--shard-key-secret-file", secret);
  if (opts.token !== undefined) {
    const tf = join(dir, "token");
    writeFileSync(tf, `${opts.token}\n`);
    args.push("--token-file", tf);
  }
  args.push(...(opts.args ?? []));
  const env = { ...process.env };
  delete env.KEYSMITH_TOKEN;
  delete env.KEYSMITH_STORE;
  delete env.KEYSMITH_LEASE_SECRET;
  if (opts.leaseSecret !== undefined) env.KEYSMITH_LEASE_SECRET = opts.leaseSecret;
  const proc = spawn(keysmithBin(), args, { env, stdio: ["ignore", "ignore", "pipe"] });
  live.add(proc);
  const exited = new Promise((res) => proc.once("exit", (code, signal) => {
    live.delete(proc);
    res({ code, signal });
  }));
  let log = "";
  const url = await new Promise((res, rej) => {
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (chunk) => {
      log += chunk;
      const m = /https?:\/\/127\.0\.0\.1:\d+/.exec(log);
      if (m) res(m[0]);
    });
    proc.once("error", rej);
    exited.then(({ code, signal }) => rej(new Error(`keysmith serve exited (${code ?? signal}) before listening:\n${log}`)));
  });
  const port = Number(new URL(url).port);
  return {
    url,
    port,
    dir,
    pid: proc.pid,
    exited,
    log: () => log,
    /** SIGKILL: no clean shutdown, nothing handed back. */
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid, "SIGKILL");
      return exited;
    },
    /** SIGTERM: the server finishes requests in flight and exits. */
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid, "SIGTERM");
      return exited;
    },
  };
}

/**
 * PEM files from clients/tls-test-certs.sh in a new temporary directory: a
 * CA, a server certificate for 127.0.0.1, a client certificate (CN=team-a)
 * it signed, and an unrelated CA.
 */
export function makeCerts() {
  const dir = tempDir();
  execFileSync("bash", [join(repoRoot, "clients", "tls-test-certs.sh"), dir], { stdio: ["ignore", "ignore", "inherit"] });
  const f = (name) => join(dir, name);
  return {
    ca: f("ca.pem"),
    serverCert: f("server.pem"),
    serverKey: f("server-key.pem"),
    clientCert: f("client.pem"),
    clientKey: f("client-key.pem"),
    otherCa: f("other-ca.pem"),
  };
}

/** Asserts that no value occurs twice; answers the duplicates' description or "". */
export function duplicates(values) {
  const seen = new Set();
  const dups = [];
  for (const v of values) {
    if (seen.has(v)) dups.push(v);
    seen.add(v);
  }
  return dups.length === 0 ? "" : `${dups.length} values handed out twice, e.g. ${dups.slice(0, 5).join(", ")}`;
}

/** Asserts that a list of bigints increases strictly; answers "" or where it does not. */
export function notIncreasing(values) {
  for (let i = 1; i < values.length; i++) {
    if (!(values[i] > values[i - 1])) return `value ${i} (${values[i]}) is not above value ${i - 1} (${values[i - 1]})`;
  }
  return "";
}

/** A URL where nothing listens: a port that was free a moment ago. */
export async function deadUrl() {
  const net = await import("node:net");
  const port = await new Promise((res, rej) => {
    const s = net.createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => res(p));
    });
  });
  return `http://127.0.0.1:${port}`;
}
