// A Node cluster worker of fork.test.mjs: makes ids with its process's own
// worker id, sends them to the primary, and holds its lease until the primary
// says "close" (so that every worker's lease is held at once, as in a
// clustered server). Arguments: URL GROUP COUNT.

import { Client } from "@keysmith/client";

const [url, group, count] = process.argv.slice(2);
const client = new Client({ url });
const lease = client.processWorkerLease(group, { ttlMs: 60_000, max: 16 });
process.on("message", async (m) => {
  if (m !== "close") return;
  await lease.close();
  process.exit(0);
});
try {
  const takenBefore = lease.taken;
  const ids = [];
  while (ids.length < Number(count)) ids.push(String(await lease.nextId()));
  const worker = (await lease.lease()).worker;
  process.send({ takenBefore, worker, ids });
} catch (e) {
  process.send({ error: String(e?.stack ?? e) }, () => process.exit(1));
}
