// The real shredd binary and an admin client, for the adapter's tests.
import { Client } from "@shredd/client";
import { Server } from "../../typescript/test/server.js";

export { Server };

export async function startShredd(...args: string[]): Promise<{ server: Server; client: Client }> {
  const server = await Server.start(...args);
  const client = new Client(server.url, { token: server.adminToken, timeoutMs: 30_000 });
  return { server, client };
}

/** pgURL is the throwaway PostgreSQL server scripts/test-typescript.sh starts. */
export function pgURL(): string {
  const u = process.env["SHREDD_TEST_PG_URL"];
  if (!u) throw new Error("SHREDD_TEST_PG_URL is not set: run scripts/test-typescript.sh, which starts a PostgreSQL 15 server");
  return u;
}
