// The saver and the store through a forget, against the real binary: what
// a forgotten subject's reads answer, that the others read on, that the
// index's embeddings are purged with a signed ack, and the attestation.
// Then the cost of sealing per checkpoint, measured (printed, not asserted).
import { InMemoryStore, MemorySaver, emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { HolderKit, InvalidArgument, Shredded, verify } from "@shredd/client";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ShreddSaver, ShreddStore } from "../src/index.js";
import { HashEmbeddings } from "./embeddings.js";
import { startShredd, type Server } from "./shredd.js";
import { storedText } from "./plaintext.js";
import type { Client } from "@shredd/client";

let server: Server;
let client: Client;
beforeAll(async () => {
  ({ server, client } = await startShredd("--cache-ttl", "1s", "--lease-ttl", "2s"));
});
afterAll(async () => server.stop());

const config = (thread: string) => ({ configurable: { thread_id: thread, checkpoint_ns: "" } });

async function putCheckpoint(saver: ShreddSaver | MemorySaver, thread: string, parent: string | undefined, values: Record<string, unknown>) {
  const ck = { ...emptyCheckpoint(), id: uuid6(-3), channel_values: values, channel_versions: Object.fromEntries(Object.keys(values).map((k) => [k, 1])) };
  const cfg = { configurable: { thread_id: thread, checkpoint_ns: "", ...(parent ? { checkpoint_id: parent } : {}) } };
  const out = await saver.put(cfg, ck, { source: "loop", step: 0, parents: {} }, ck.channel_versions);
  await saver.putWrites(out, [["messages", `pending for ${thread}`]], "task-1");
  return out.configurable!["checkpoint_id"] as string;
}

const PLAINTEXT = /secret recipe|Ben's notes|pending for/;

test("the absence checks can fail: a plain MemorySaver and InMemoryStore holding the plaintext are caught", async () => {
  const plain = new MemorySaver();
  const a1 = await putCheckpoint(plain, "ann", undefined, { messages: ["Ann's secret recipe"] });
  await putCheckpoint(plain, "ann", a1, { messages: ["Ann's secret recipe", "more"] });
  expect(storedText([plain.storage, plain.writes])).toMatch(PLAINTEXT);
  expect(storedText(plain.writes)).toMatch(/pending for ann/);
  // What the check replaced: JSON.stringify writes the Uint8Arrays as {"0":123,...}, and misses it.
  expect(JSON.stringify(plain.storage) + JSON.stringify(plain.writes)).not.toMatch(PLAINTEXT);
  const store = new InMemoryStore();
  await store.put(["memories", "cleo"], "m1", { text: "Cleo likes green tea" });
  expect(storedText(await store.search(["memories"]))).toMatch(/green (tea|apples)/);
});

test("options are checked", () => {
  expect(() => new ShreddSaver({ client, inner: new MemorySaver(), subjects: () => ["a"], onShreded: "skip" } as never)).toThrow(InvalidArgument);
  expect(() => new ShreddStore({ client, inner: new InMemoryStore(), subjects: () => ["a"], index: { embeddings: new HashEmbeddings() } })).toThrow(InvalidArgument);
});

test("the inner saver holds no plaintext; a forget makes the subject's threads unreadable, others read on", async () => {
  const inner = new MemorySaver();
  // Threads name their users; the group thread holds both users' data.
  const subjects = (c: Record<string, unknown>) => String(c["thread_id"]).split("+");
  const saver = new ShreddSaver({ client, inner, subjects });
  await saver.setup();
  const skipping = new ShreddSaver({ client, inner, subjects, onShredded: "skip" });
  const a1 = await putCheckpoint(saver, "ann", undefined, { messages: ["Ann's secret recipe"] });
  await putCheckpoint(saver, "ann", a1, { messages: ["Ann's secret recipe", "more"] });
  await putCheckpoint(saver, "ann+ben", undefined, { messages: ["Ann and Ben plan a trip"] });
  const b1 = await putCheckpoint(saver, "ben", undefined, { messages: ["Ben's notes"] });
  expect(storedText([inner.storage, inner.writes])).not.toMatch(PLAINTEXT);
  const before = await saver.getTuple(config("ben"));
  expect(before?.checkpoint.channel_values).toEqual({ messages: ["Ben's notes"] });
  expect(before?.pendingWrites).toEqual([["task-1", "messages", "pending for ben"]]);

  await expect(saver.setup()).resolves.toBeUndefined();
  const preview = await client.forgets.preview("ann");
  expect(preview.counts.total).toBeGreaterThanOrEqual(6); // 2 checkpoints + 2 writes of ann, and the group thread's 2
  const f = await client.forgets.forget("ann");
  await expect(saver.getTuple(config("ann"))).rejects.toBeInstanceOf(Shredded);
  await expect(saver.getTuple(config("ann+ben"))).rejects.toBeInstanceOf(Shredded);
  await expect((async () => { for await (const _ of saver.list(config("ann"))) void _; })()).rejects.toBeInstanceOf(Shredded);
  expect(await skipping.getTuple(config("ann"))).toBeUndefined();
  const history = [];
  for await (const t of skipping.list(config("ann"))) history.push(t);
  expect(history).toEqual([]);
  // Ben's own thread reads exactly as before.
  expect(await saver.getTuple(config("ben"))).toEqual(before);
  // A new checkpoint on a forgotten thread is refused (its parent is shredded).
  await expect(putCheckpoint(saver, "ann", undefined, { messages: ["again"] })).rejects.toBeInstanceOf(Shredded);
  void b1;
  void f;
});

test("the store seals values, purges the index's embeddings with a signed ack, and the forget is erased", async () => {
  const kit = new HolderKit(client, "memory-index-1", await HolderKit.generateKey());
  const inner = new InMemoryStore();
  const store = new ShreddStore({ client, inner, subjects: (ns) => [ns[1]!], kit, index: { embeddings: new HashEmbeddings() } });
  await store.setup();
  await store.put(["memories", "cleo"], "m1", { text: "Cleo likes green tea" });
  await store.put(["memories", "dan"], "m1", { text: "Dan likes green apples" });
  expect(storedText(await inner.search(["memories"]))).not.toMatch(/green (tea|apples)/);
  expect((await store.get(["memories", "cleo"], "m1"))?.value).toEqual({ text: "Cleo likes green tea" });
  const hits = await store.search(["memories"], { query: "green tea", limit: 5 });
  expect(hits[0]?.value).toEqual({ text: "Cleo likes green tea" });
  expect(store.heldArtifacts()).toHaveLength(2);

  const f = await client.forgets.forget("cleo");
  await expect(store.get(["memories", "cleo"], "m1")).rejects.toBeInstanceOf(Shredded);
  await client.epoch();
  // Not erased while the index holds Cleo's embedding.
  await expect(client.forgets.wait(f.forget, "erased", { timeoutMs: 2500 })).rejects.toThrow(/cascade_closed|pending/);
  const outcomes = await store.purge();
  expect(outcomes).toHaveLength(1);
  expect(outcomes[0]!.ok).toBe(true);
  expect(store.heldArtifacts()).toHaveLength(1);
  expect((await store.search(["memories"], { query: "green tea", limit: 5 })).map((i) => i.value)).toEqual([{ text: "Dan likes green apples" }]);
  expect((await store.search(["memories"], { limit: 5 })).map((i) => i.value)).toEqual([{ text: "Dan likes green apples" }]);
  await client.forgets.wait(f.forget, "erased", { timeoutMs: 60_000 });
  const att = await verify.verifyAttestation(await client.forgets.attestation(f.forget), readFileSync(join(server.dir, "attestation.pub"), "utf8"), { subject: "cleo", salt: f.commitment_salt! });
  expect(att.artifacts.map((a) => a.kind).sort()).toEqual(["langgraph-embedding", "langgraph-memory"]);
  expect(att.holderAcks.map((a) => a.holder)).toEqual(["memory-index-1"]);
});

test("the cost of sealing per checkpoint (saver with and without shredd, same run)", async () => {
  const n = 200;
  const values = { messages: Array.from({ length: 20 }, (_, i) => `message ${i} of a conversation, about 60 bytes long.....`) };
  const run = async (saver: ShreddSaver | MemorySaver, thread: string): Promise<number> => {
    let parent: string | undefined;
    const t0 = performance.now();
    for (let i = 0; i < n; i++) parent = await putCheckpoint(saver, thread, parent, values);
    for (let i = 0; i < n / 4; i++) await saver.getTuple(config(thread));
    return (performance.now() - t0) / n;
  };
  const plain = await run(new MemorySaver(), "cost-plain");
  const sealed = new ShreddSaver({ client, inner: new MemorySaver(), subjects: () => ["cost-user"] });
  await sealed.setup();
  const shredd = await run(sealed, "cost-sealed");
  console.log(`sealing cost: ${n} checkpoints (put + 1 pending write each, a getTuple per 4): MemorySaver ${plain.toFixed(3)} ms/checkpoint, ShreddSaver(MemorySaver) ${shredd.toFixed(3)} ms/checkpoint, +${(shredd - plain).toFixed(3)} ms`);
  expect(shredd).toBeGreaterThan(0);
});
