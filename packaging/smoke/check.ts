// Type-checked (tsc --noEmit) against the installed package's declarations:
// the calls and types a user writes first.
import { Client, KeysmithError, Sequence } from "@keysmith/client";

export async function firstKey(url: string): Promise<bigint> {
  const client = new Client({ url, timeoutMs: 5000 });
  await client.createSequence("orders", { start: 1n, block: 100 });
  const values: bigint[] = await client.next("orders", 2);
  const orders: Sequence = client.sequence("orders");
  const id: bigint = await orders.next();
  await orders.close();
  return values[0] + id;
}

export function describe(e: unknown): string {
  return e instanceof KeysmithError ? `${e.code} (${e.status})` : String(e);
}
