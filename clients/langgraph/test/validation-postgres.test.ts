// LangGraph's own conformance suite for checkpoint savers, unchanged, over
// ShreddSaver with sealing on, stored by @langchain/langgraph-checkpoint-postgres
// on a real PostgreSQL 15: one schema, migrated once by the saver's own
// setup(), emptied after each checkpointer (the suite allows shared storage
// that is cleared between checkpointers).
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { Client } from "@shredd/client";
import pg from "pg";
import { ShreddSaver } from "../src/index.js";
import { pgURL, startShredd, type Server } from "./shredd.js";

let server: Server | undefined;
let client: Client;
let pool: pg.Pool | undefined;
const schema = `lg_validation_${process.pid}`;

validate<ShreddSaver>({
  checkpointerName: "ShreddSaver(PostgresSaver)",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    // The database first: without one, no server is started to be left behind.
    pool = new pg.Pool({ connectionString: pgURL(), max: 4 });
    await pool.query(`CREATE SCHEMA ${schema}`);
    await new PostgresSaver(pool, undefined, { schema }).setup();
    ({ server, client } = await startShredd());
  },
  async afterAll() {
    // Each step runs whatever failed before it: the server is stopped also
    // when the database never came up or its cleanup fails.
    try {
      if (pool !== undefined) {
        try {
          await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        } finally {
          await pool.end();
        }
      }
    } finally {
      await server?.stop();
    }
  },
  async createCheckpointer() {
    const inner = new PostgresSaver(pool!, undefined, { schema });
    const saver = new ShreddSaver({ client, inner, subjects: (c) => [`user-of-${String(c["thread_id"])}`] });
    await saver.setup();
    return saver;
  },
  async destroyCheckpointer() {
    await pool!.query(`TRUNCATE ${schema}.checkpoints, ${schema}.checkpoint_blobs, ${schema}.checkpoint_writes`);
  },
});
