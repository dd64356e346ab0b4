// LangGraph's own conformance suite for checkpoint savers, unchanged, over
// ShreddSaver with sealing on, stored by @langchain/langgraph-checkpoint-postgres
// on a real PostgreSQL 15 (a fresh schema per checkpointer).
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { Client } from "@shredd/client";
import pg from "pg";
import { ShreddSaver } from "../src/index.js";
import { pgURL, startShredd, type Server } from "./shredd.js";

let server: Server;
let client: Client;
let n = 0;
const schemas = new Map<ShreddSaver, { schema: string; inner: PostgresSaver }>();

validate<ShreddSaver>({
  checkpointerName: "ShreddSaver(PostgresSaver)",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    ({ server, client } = await startShredd());
  },
  async afterAll() {
    await server.stop();
  },
  async createCheckpointer() {
    const schema = `lg_${process.pid}_${n++}`;
    const inner = PostgresSaver.fromConnString(pgURL(), { schema });
    await inner.setup();
    const saver = new ShreddSaver({ client, inner, subjects: (c) => [`user-of-${String(c["thread_id"])}`] });
    await saver.setup();
    schemas.set(saver, { schema, inner });
    return saver;
  },
  async destroyCheckpointer(saver) {
    const s = schemas.get(saver)!;
    await s.inner.end();
    const c = new pg.Client({ connectionString: pgURL() });
    await c.connect();
    await c.query(`DROP SCHEMA ${s.schema} CASCADE`);
    await c.end();
  },
});
