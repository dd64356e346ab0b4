// onShredded "skip" and reinstatement, against the real binary: after a
// forget a skipping saver answers no history, but the thread cannot start
// again (its writes are refused: nothing reinstates implicitly); once the
// forget is erased and an operator reinstated the subject, the same graph
// and thread start afresh under the subject's new key generation, and the
// old turns stay erased.
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { Shredded, type Client } from "@shredd/client";
import { Reads, ShreddSaver } from "../src/index.js";
import { startShredd, type Server } from "./shredd.js";

let server: Server;
let client: Client;
beforeAll(async () => {
  ({ server, client } = await startShredd("--cache-ttl", "1s", "--lease-ttl", "1s"));
});
afterAll(async () => server.stop());

const State = Annotation.Root({
  messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

test('onShredded "skip": after reinstatement the thread starts afresh, the old turns stay erased', async () => {
  const inner = new MemorySaver();
  let ahead = 0;
  const reads = new Reads(() => Date.now() + ahead);
  const saver = new ShreddSaver({ client, inner, reads, subjects: (c) => [String(c["thread_id"])], onShredded: "skip" });
  await saver.setup();
  const graph = new StateGraph(State)
    .addNode("respond", (s) => ({ messages: [`assistant: ${s.messages.length} so far`] }))
    .addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: saver });
  const cfg = { configurable: { thread_id: "cora@example.com" } };
  await graph.invoke({ messages: ["cora: hi"] }, cfg);
  await graph.invoke({ messages: ["cora: my secret plan"] }, cfg);
  expect((await graph.getState(cfg)).values.messages).toEqual(["cora: hi", "assistant: 1 so far", "cora: my secret plan", "assistant: 3 so far"]);

  const f = await client.forgets.forget("cora@example.com");
  expect((await graph.getState(cfg)).values.messages ?? []).toEqual([]);
  // Skipping is not reinstating: the thread's first write is refused.
  await expect(graph.invoke({ messages: ["cora: back"] }, cfg)).rejects.toBeInstanceOf(Shredded);
  await client.epoch();
  await client.forgets.wait(f.forget, "erased", { timeoutMs: 60_000 });
  const r = await client.forgets.reinstate("cora@example.com", "signed up again");
  expect([r.generation, r.previous_generation, r.forget]).toEqual([2, 1, f.forget]);

  // The adapters name a thread's reads in its writes until a minute after
  // their leases expired (Reads): the old life's last reads, seconds ago
  // here, would make the fresh thread's first write derive from erased
  // data (410). A reinstatement comes long after the forget (it waits for
  // the erasure); here the adapters' clock moves past that minute.
  ahead = 120_000;
  const out = await graph.invoke({ messages: ["cora: back"] }, cfg);
  expect(out.messages).toEqual(["cora: back", "assistant: 1 so far"]);
  expect((await graph.getState(cfg)).values.messages).toEqual(["cora: back", "assistant: 1 so far"]);
  const history: unknown[] = [];
  for await (const s of graph.getStateHistory(cfg)) history.push(s.values);
  expect(history.length).toBeGreaterThan(0);
  expect(JSON.stringify(history)).not.toMatch(/secret plan|cora: hi/);
  // A strict saver over the same inner saver reads the new life, and the first forget is unchanged.
  const strict = new ShreddSaver({ client, inner, subjects: (c) => [String(c["thread_id"])] });
  expect((await strict.getTuple(cfg))?.checkpoint.channel_values).toMatchObject({ messages: ["cora: back", "assistant: 1 so far"] });
  expect((await client.forgets.get(f.forget)).state).toBe("erased");
});
