// Holes in the adapters' read tracking, against the real binary (leases of
// one second): a step that runs past its reads' lease expiry still names
// them; a store whose AsyncBatchedStore is not stamped refuses instead of
// writing without lineage; memory the application recalls outside any step
// and passes into a thread's input is named by that thread's writes
// (Reads.forThread).
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { AsyncBatchedStore, InMemoryStore, MemorySaver } from "@langchain/langgraph-checkpoint";
import { Shredded, type Client, type Lease } from "@shredd/client";
import { Reads, ShreddSaver, ShreddStore, stampSteps } from "../src/index.js";
import { startShredd, type Server } from "./shredd.js";

// The enqueueOperation LangGraph's own class had before any store stamped
// it: what a second copy of @langchain/langgraph-checkpoint runs.
const proto = AsyncBatchedStore.prototype as unknown as Record<PropertyKey, unknown>;
const unstamped = (proto[Symbol.for("@shredd/langgraph/original")] ?? proto["enqueueOperation"]) as unknown;

let server: Server;
let client: Client;
/** leases: every lease the adapters' decrypts took, in order. */
const leases: Lease[] = [];
beforeAll(async () => {
  ({ server, client } = await startShredd("--cache-ttl", "1s", "--lease-ttl", "1s"));
  const sealing = client.sealing;
  const decrypt = sealing.decrypt.bind(sealing);
  sealing.decrypt = async (r) => {
    const d = await decrypt(r);
    leases.push(d.lease);
    return d;
  };
  const batch = sealing.decryptBatch.bind(sealing);
  sealing.decryptBatch = async (items) => {
    const out = await batch(items);
    for (const r of out) if (r.ok) leases.push(r.value.lease);
    return out;
  };
  await client.kinds.ensure("langgraph-checkpoint", "langgraph-write", "langgraph-memory", "langgraph-embedding");
});
afterAll(async () => server.stop());

type Cfg = { configurable: { thread_id: string; participants: string[] } };
const cfg = (thread: string, participants: string[]): Cfg => ({ configurable: { thread_id: thread, participants } });
const State = Annotation.Root({
  messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  recalled: Annotation<string[]>({ reducer: (_, b) => b, default: () => [] }),
});

function adapters(reads: Reads) {
  const inner = new MemorySaver();
  const subjects = (c: Record<string, unknown>) => c["participants"] as string[];
  const saver = new ShreddSaver({ client, inner, subjects, reads });
  const skipping = new ShreddSaver({ client, inner, subjects, reads, onShredded: "skip" });
  const store = new ShreddStore({ client, inner: new InMemoryStore(), reads,
    subjects: (ns, _key, value) => (value["participants"] as string[] | undefined) ?? [ns[1]!] });
  return { saver, skipping, store };
}

async function until(what: string, ok: () => boolean): Promise<void> {
  for (let i = 0; i < 1000 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!ok()) throw new Error("still not: " + what);
}

test("a step that runs past its reads' lease expiry still names them: after forget(alice) the recalled state does not read", async () => {
  let ahead = 0;
  const reads = new Reads(() => Date.now() + ahead);
  const { saver, skipping, store } = adapters(reads);
  await store.put(["memories", "bob"], "trip", { text: "alice and bob: plan a trip to Lisbon", participants: ["alice", "bob"] });
  const graph = new StateGraph(State)
    .addNode("respond", async (state) => {
      if (!state.messages.at(-1)!.endsWith("?")) return { messages: ["assistant: ok"] };
      const from = leases.length;
      const hits = (await store.search(["memories", "bob"], { limit: 10 })).map((h) => String(h.value["text"]));
      const mine = leases.slice(from);
      expect(mine.length).toBeGreaterThan(0);
      // The step goes on past its reads' expiry: the server's leases expire
      // (waited for, per the lease objects), and the adapters' clock runs
      // two minutes ahead, past the minute they keep an expired read.
      await until("the step's leases expired", () => mine.every((l) => Date.now() > Date.parse(l.expires_at) + 50));
      ahead = 120_000;
      return { messages: [`assistant: noted (${hits.length} recalled)`], recalled: hits };
    })
    .addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: saver, store });
  const history = new StateGraph(State).addNode("respond", () => ({})).addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: skipping });
  await graph.invoke({ messages: ["bob: hello"] }, cfg("bob-slow", ["bob"]));
  await graph.invoke({ messages: ["bob: where do we go?"] }, cfg("bob-slow", ["bob"]));
  expect((await graph.getState(cfg("bob-slow", ["bob"]))).values.recalled).toEqual(["alice and bob: plan a trip to Lisbon"]);

  await client.forgets.forget("alice");
  await expect(graph.getState(cfg("bob-slow", ["bob"]))).rejects.toBeInstanceOf(Shredded);
  const left = [];
  for await (const s of history.getStateHistory(cfg("bob-slow", ["bob"]))) left.push(s.values);
  expect(JSON.stringify(left)).not.toMatch(/Lisbon/);
  expect(JSON.stringify(left)).toMatch(/bob: hello/); // bob's turn before the recall still reads
});

test("a store whose AsyncBatchedStore is another copy, not stamped, refuses the step's operations instead of writing without lineage", async () => {
  const { saver, store } = adapters(new Reads());
  await store.put(["memories", "dora"], "m1", { text: "dora likes figs" });
  const graph = new StateGraph(State)
    .addNode("respond", async (_state, config) => {
      const hits = (await config.store!.search(["memories", "dora"], { limit: 10 })).map((h) => String(h.value["text"]));
      await config.store!.put(["memories", "dora"], "m2", { text: `recalled ${hits.length}` });
      return { recalled: hits };
    })
    .addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: saver, store });
  // LangGraph's class as a second copy has it: its enqueueOperation not stamped.
  proto["enqueueOperation"] = unstamped;
  delete proto[Symbol.for("@shredd/langgraph/stamped")];
  try {
    await expect(graph.invoke({ messages: ["dora: hi"] }, cfg("dora-1", ["dora"]))).rejects.toThrow(/stampSteps\(AsyncBatchedStore\)/);
    expect(await store.get(["memories", "dora"], "m2")).toBeNull();
  } finally {
    stampSteps(AsyncBatchedStore); // stamps it again
  }
  // Stamped, the same graph runs; a direct call outside any graph is its own unit, as before.
  await graph.invoke({ messages: ["dora: hi"] }, cfg("dora-2", ["dora"]));
  expect((await store.get(["memories", "dora"], "m2"))?.value).toEqual({ text: "recalled 1" });
});

test("memory the application recalls outside any step and passes into a thread's input is named by the thread's writes (Reads.forThread)", async () => {
  const reads = new Reads();
  const { saver, skipping, store } = adapters(reads);
  await store.put(["memories", "erin"], "group", { text: "fred and erin: fred's surprise party", participants: ["fred", "erin"] });
  const graph = new StateGraph(State)
    .addNode("respond", (state) => ({ messages: [`assistant: ${state.messages.length} messages`] }))
    .addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: saver, store });
  const history = new StateGraph(State).addNode("respond", () => ({})).addEdge(START, "respond").addEdge("respond", END)
    .compile({ checkpointer: skipping });
  await graph.invoke({ messages: ["erin: hello"] }, cfg("erin-1", ["erin"]));
  // The application's own recall, for erin's next turn.
  const hits = await reads.forThread("erin-1", () => store.search(["memories", "erin"], { limit: 10 }));
  expect(hits.map((h) => h.value["text"])).toEqual(["fred and erin: fred's surprise party"]);
  await graph.invoke({ messages: hits.map((h) => `recalled: ${String(h.value["text"])}`) }, cfg("erin-1", ["erin"]));

  await client.forgets.forget("fred");
  await expect(graph.getState(cfg("erin-1", ["erin"]))).rejects.toBeInstanceOf(Shredded);
  const left = [];
  for await (const s of history.getStateHistory(cfg("erin-1", ["erin"]))) left.push(s.values);
  expect(JSON.stringify(left)).not.toMatch(/surprise party/);
  expect(JSON.stringify(left)).toMatch(/erin: hello/); // her turn before the recall reads
});
