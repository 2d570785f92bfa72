// The installed npm package against a real `keysmith serve` ($KEYSMITH_URL):
// create a sequence, take a value, and a second one is larger. Run by
// .ci/packages.sh in a fresh project that installed only the packed tarball.
import { randomUUID } from "node:crypto";
import { Client } from "@keysmith/client";

const client = new Client({ url: process.env.KEYSMITH_URL });
const name = `ts-smoke-${randomUUID().slice(0, 12)}`;
await client.createSequence(name, {});
const [first] = await client.next(name, 1);
const [second] = await client.next(name, 1);
if (typeof first !== "bigint" || !(second > first)) {
  throw new Error(`expected increasing bigints, got ${first}, ${second}`);
}
const seq = client.sequence(name);
const third = await seq.next();
await seq.close();
if (!(third > second)) throw new Error(`expected ${third} > ${second}`);
console.log(`typescript smoke: ${name} gave ${first}, ${second}, ${third}`);
