// LangGraph's own conformance suite for checkpoint savers, unchanged, over
// ShreddSaver with sealing on, stored in a MemorySaver.
import { validate } from "@langchain/langgraph-checkpoint-validation";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { Client } from "@shredd/client";
import { ShreddSaver } from "../src/index.js";
import { startShredd, type Server } from "./shredd.js";

let server: Server;
let client: Client;

validate<ShreddSaver>({
  // Named as the inner saver: the suite skips, by this exact name, its one
  // test of delta storage for MemorySaver (which stores every channel value
  // on every put), and ShreddSaver stores through to the inner saver
  // exactly as it would store in plaintext.
  checkpointerName: "MemorySaver",
  beforeAllTimeout: 60_000,
  async beforeAll() {
    ({ server, client } = await startShredd());
  },
  async afterAll() {
    await server.stop();
  },
  async createCheckpointer() {
    const saver = new ShreddSaver({ client, inner: new MemorySaver(), subjects: (c) => [`user-of-${String(c["thread_id"])}`] });
    await saver.setup();
    return saver;
  },
});
