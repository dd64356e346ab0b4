// What a graph step reads becomes the lineage of what it writes, against
// the real binary: bob's node recalls a memory of alice's and bob's group
// thread from the store into bob's thread state; after forget(alice), the
// checkpoints that hold the recalled memory do not read, bob's own turns
// before the recall do.
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { InMemoryStore, MemorySaver } from "@langchain/langgraph-checkpoint";
import type { RunnableConfig } from "@langchain/core/runnables";
import { HolderKit, Shredded, type Client } from "@shredd/client";
import { ShreddSaver, ShreddStore } from "../src/index.js";
import { HashEmbeddings } from "./embeddings.js";
import { startShredd, type Server } from "./shredd.js";
import { storedText } from "./plaintext.js";

let server: Server;
let client: Client;
beforeAll(async () => {
  ({ server, client } = await startShredd("--cache-ttl", "1s", "--lease-ttl", "2s"));
});
afterAll(async () => server.stop());

type Cfg = { configurable: { thread_id: string; participants: string[] } };
const cfg = (thread: string, participants: string[]): Cfg => ({ configurable: { thread_id: thread, participants } });

/** graph: a "remember" node puts the last message into each participant's memories; "respond" recalls them into the state. */
function build(saver: ShreddSaver | MemorySaver, store: ShreddStore | InMemoryStore) {
  const State = Annotation.Root({
    messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
    recalled: Annotation<string[]>({ reducer: (_, b) => b, default: () => [] }),
  });
  const participants = (c: RunnableConfig) => (c.configurable as Cfg["configurable"]).participants;
  return new StateGraph(State)
    .addNode("remember", async (state, config) => {
      for (const user of participants(config)) {
        await config.store!.put(["memories", user], `${String(config.configurable!["thread_id"])}-${state.messages.length}`,
          { text: state.messages.at(-1), participants: participants(config) });
      }
      return {};
    })
    .addNode("respond", async (state, config) => {
      const hits: string[] = [];
      for (const user of participants(config)) {
        hits.push(...(await config.store!.search(["memories", user], { query: state.messages.at(-1)!, limit: 2 })).map((h) => String(h.value["text"])));
      }
      return { messages: [`assistant: noted (${hits.length} recalled)`], recalled: hits };
    })
    .addEdge(START, "remember").addEdge("remember", "respond").addEdge("respond", END)
    .compile({ checkpointer: saver, store });
}

test("a memory recalled into bob's thread is erased with alice: bob's checkpoints from the recall on do not read, his turns before it do", async () => {
  const inner = new MemorySaver();
  const subjects = (c: Record<string, unknown>) => c["participants"] as string[];
  const saver = new ShreddSaver({ client, inner, subjects });
  const skipping = new ShreddSaver({ client, inner, subjects, onShredded: "skip" });
  const kit = new HolderKit(client, "recall-index", await HolderKit.generateKey());
  const store = new ShreddStore({
    client, inner: new InMemoryStore(), kit, index: { embeddings: new HashEmbeddings() },
    subjects: (ns, _key, value) => (value["participants"] as string[] | undefined) ?? [ns[1]!],
  });
  await saver.setup();
  await store.setup();
  const graph = build(saver, store);
  const history = build(skipping, store);

  await graph.invoke({ messages: ["alice: I am allergic to peanuts"] }, cfg("alice-1", ["alice"]));
  await graph.invoke({ messages: ["alice and bob: plan a trip to Lisbon"] }, cfg("alice-bob-trip", ["alice", "bob"]));
  await graph.invoke({ messages: ["bob: I prefer aisle seats"] }, cfg("bob-1", ["bob"]));
  await graph.invoke({ messages: ["carol: my dog is called Rex"] }, cfg("carol-1", ["carol"]));
  const bob = await graph.getState(cfg("bob-1", ["bob"]));
  expect(bob.values.recalled).toContain("alice and bob: plan a trip to Lisbon");
  const carolBefore = (await graph.getState(cfg("carol-1", ["carol"]))).values;
  const all: string[] = [];
  for await (const s of history.getStateHistory(cfg("bob-1", ["bob"]))) all.push(s.config.configurable!["checkpoint_id"] as string);
  expect(storedText(inner.storage)).not.toMatch(/trip to Lisbon|aisle seats/);

  await client.forgets.forget("alice");
  await expect(graph.getState(cfg("bob-1", ["bob"]))).rejects.toBeInstanceOf(Shredded);
  await expect((async () => { for await (const _ of graph.getStateHistory(cfg("bob-1", ["bob"]))) void _; })()).rejects.toBeInstanceOf(Shredded);
  const readable = [];
  for await (const s of history.getStateHistory(cfg("bob-1", ["bob"]))) readable.push(s);
  const text = JSON.stringify(readable.map((s) => [s.values, s.tasks]));
  expect(text).not.toMatch(/Lisbon/);
  expect(readable.length).toBeGreaterThan(0);
  expect(readable.length).toBeLessThan(all.length);
  expect(readable.some((s) => (s.values.messages as string[] | undefined)?.includes("bob: I prefer aisle seats"))).toBe(true);
  // The store's own copy of the group memory in bob's namespace is gone too; bob's own memory reads.
  expect((await store.search(["memories", "bob"], { limit: 10 })).map((i) => i.value["text"])).toEqual(["bob: I prefer aisle seats"]);
  // carol's thread never read anything of alice's: it reads and resumes as before.
  expect((await graph.getState(cfg("carol-1", ["carol"]))).values).toEqual(carolBefore);
  await graph.invoke({ messages: ["carol: and a cat"] }, cfg("carol-1", ["carol"]));
  expect((await graph.getState(cfg("carol-1", ["carol"]))).values.messages).toHaveLength(4);
});

test("a step that reads another thread's checkpoint through the saver carries its lineage", async () => {
  const inner = new MemorySaver();
  const subjects = (c: Record<string, unknown>) => c["participants"] as string[];
  const saver = new ShreddSaver({ client, inner, subjects });
  await saver.setup();
  const State = Annotation.Root({ notes: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }) });
  const graph = new StateGraph(State)
    .addNode("copy", async (_state, config) => {
      const other = config.configurable!["copy_from"] as string | undefined;
      if (other === undefined) return {};
      const t = await saver.getTuple({ configurable: { thread_id: other } });
      return { notes: (t?.checkpoint.channel_values["notes"] as string[] | undefined) ?? [] };
    })
    .addEdge(START, "copy").addEdge("copy", END)
    .compile({ checkpointer: saver });
  await graph.invoke({ notes: ["dora's diary"] }, { configurable: { thread_id: "dora-1", participants: ["dora"] } });
  await graph.invoke({ notes: ["ed's list"] }, { configurable: { thread_id: "ed-1", participants: ["ed"], copy_from: "dora-1" } });
  expect((await graph.getState({ configurable: { thread_id: "ed-1", participants: ["ed"] } })).values.notes).toContain("dora's diary");
  await client.forgets.forget("dora");
  await expect(graph.getState({ configurable: { thread_id: "ed-1", participants: ["ed"] } })).rejects.toBeInstanceOf(Shredded);
  const skipping = new ShreddSaver({ client, inner, subjects, onShredded: "skip" });
  const left = [];
  for await (const t of skipping.list({ configurable: { thread_id: "ed-1" } })) left.push(t.checkpoint.channel_values);
  expect(JSON.stringify(left)).not.toMatch(/dora's diary/);
  expect(JSON.stringify(left)).toMatch(/ed's list/);
});
