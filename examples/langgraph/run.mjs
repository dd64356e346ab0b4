// A LangGraph.js agent whose thread state and long-term memory are sealed
// through shredd, run end to end against a real shredd:
//
//   npm ci && npm start            (in examples/langgraph; SHREDD_BIN=... or Go to build one)
//
// Three users talk to a StateGraph (a "remember" node that writes a memory
// to the store, a "respond" node that recalls memories by vector search
// into the thread's state); alice and bob also share a group thread, and
// bob talks after it, so his node recalls the group's memory into bob's
// thread. Then forget("alice"), and every line printed as a check is
// asserted:
//   - alice's thread and the group thread can no longer be read (the saver
//     throws Shredded: the data existed and is erased; an empty history
//     would let the graph silently start alice afresh), nor her memories;
//   - nor can bob's checkpoints from his recall of the group memory on:
//     what a step reads through the store is the lineage of what it writes
//     (the adapters' units of work), so the recalled trip is gone from his
//     history too, while his own turns before the recall still read;
//   - carol's graph resumes exactly where it was;
//   - the index purges alice's embeddings with a signed holder ack, the
//     forget reaches erased, and its attestation, checked offline, lists
//     the saver's and the store's artifacts.
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { InMemoryStore, MemorySaver } from "@langchain/langgraph-checkpoint";
import { Client, HolderKit, Shredded, verify } from "@shredd/client";
import { ShreddSaver, ShreddStore } from "@shredd/langgraph";

const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const check = (ok, what) => {
  assert.ok(ok, what);
  console.log("  ok  " + what);
};

// What a store holds, as text: strings as they are, byte arrays decoded as
// UTF-8 (MemorySaver keeps checkpoints as Uint8Array, which JSON.stringify
// writes as {"0":123,...}: a search of that finds nothing, whatever it holds).
function storedText(x, seen = new Set()) {
  if (typeof x === "string") return x + "\n";
  if (x instanceof Uint8Array) return new TextDecoder().decode(x) + "\n";
  if (x === null || typeof x !== "object" || seen.has(x)) return "";
  seen.add(x);
  const values = x instanceof Map ? [...x.keys(), ...x.values()] : Array.isArray(x) ? x : [...Object.keys(x), ...Object.values(x)];
  return values.map((v) => storedText(v, seen)).join("");
}
const PLAINTEXT = /allergic to peanuts|aisle seats|called Rex|trip to Lisbon/;

// A deterministic embedding (hashed bag of words): the application's model.
class HashEmbeddings {
  embed(text) {
    const v = new Array(64).fill(0);
    for (const w of text.toLowerCase().match(/[a-z]+/g) ?? []) {
      let h = 2166136261;
      for (const ch of w) h = Math.imul(h ^ ch.charCodeAt(0), 16777619);
      v[(h >>> 0) % 64] += 1;
    }
    return v;
  }
  async embedDocuments(texts) { return texts.map((t) => this.embed(t)); }
  async embedQuery(t) { return this.embed(t); }
}

// --- a real shredd on 127.0.0.1, in a throwaway data directory ---------
const tmp = mkdtempSync(join(tmpdir(), "shredd-langgraph-"));
let bin = process.env.SHREDD_BIN;
if (!bin) {
  bin = join(tmp, "shredd");
  execFileSync("go", ["build", "-o", bin, "./cmd/shredd"], { cwd: repo, stdio: "inherit" });
}
const logFile = join(tmp, "log");
const proc = spawn(bin, ["serve", "--data-dir", join(tmp, "d"), "--addr", "127.0.0.1:0", "--cache-ttl", "1s", "--lease-ttl", "2s"],
  { stdio: ["ignore", openSync(logFile, "w"), openSync(logFile, "a")] });
let url = "";
for (let i = 0; i < 1000 && !url; i++) {
  await new Promise((r) => setTimeout(r, 20));
  for (const line of readFileSync(logFile, "utf8").split("\n")) {
    try {
      const rec = JSON.parse(line);
      if (rec.msg === "listening") url = `http://${rec.addr}`;
    } catch {}
  }
}
assert.ok(url, "shredd did not start:\n" + readFileSync(logFile, "utf8"));
try {
  await main(new Client(url, { token: readFileSync(join(tmp, "d", "admin.token"), "ascii").trim() }), join(tmp, "d"));
} finally {
  // The server writes into its data directory until it has exited (its
  // shutdown closes the database): remove the directory only then, as the
  // TypeScript client's test server does (clients/typescript/test/server.ts).
  if (proc.exitCode === null && proc.signalCode === null) {
    const exited = new Promise((r) => proc.once("exit", r));
    proc.kill("SIGTERM");
    await exited;
  }
  rmSync(tmp, { recursive: true, force: true });
}

async function main(client, dataDir) {
  // The saver and the store, both sealing through shredd. A thread's
  // subjects are its participants, and so are those of a memory drawn from
  // it: a group thread's memory is erased when any participant is forgotten.
  const innerSaver = new MemorySaver();
  const saver = new ShreddSaver({ client, inner: innerSaver, subjects: (c) => c.participants });
  const kit = new HolderKit(client, "langgraph-memory-index", await HolderKit.generateKey());
  const store = new ShreddStore({ client, inner: new InMemoryStore(), subjects: (ns, _key, value) => value.participants ?? [ns[1]], kit, index: { embeddings: new HashEmbeddings() } });
  await saver.setup();
  await store.setup();

  const State = Annotation.Root({
    messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
    recalled: Annotation({ reducer: (_, b) => b, default: () => [] }),
  });
  const build = (checkpointer) => new StateGraph(State)
    .addNode("remember", async (state, config) => {
      const last = state.messages.at(-1);
      for (const user of config.configurable.participants) {
        await config.store.put(["memories", user], `${config.configurable.thread_id}-${state.messages.length}`,
          { text: last, participants: config.configurable.participants });
      }
      return {};
    })
    .addNode("respond", async (state, config) => {
      const last = state.messages.at(-1);
      const hits = [];
      for (const user of config.configurable.participants) {
        hits.push(...(await config.store.search(["memories", user], { query: last, limit: 2 })).map((h) => h.value.text));
      }
      return { messages: [`assistant: noted (${hits.length} memories recalled)`], recalled: hits };
    })
    .addEdge(START, "remember").addEdge("remember", "respond").addEdge("respond", END)
    .compile({ checkpointer, store });
  const graph = build(saver);
  // The same graph over the same sealed checkpoints, with onShredded "skip":
  // a history that leaves out what no longer reads, instead of throwing.
  const browse = build(new ShreddSaver({ client, inner: innerSaver, subjects: (c) => c.participants, onShredded: "skip" }));

  const cfg = (thread, participants) => ({ configurable: { thread_id: thread, participants } });
  const threads = {
    alice: cfg("alice-1", ["alice"]),
    bob: cfg("bob-1", ["bob"]),
    carol: cfg("carol-1", ["carol"]),
    group: cfg("alice-bob-trip", ["alice", "bob"]),
  };
  console.log("running the graph for alice, carol, alice+bob's group thread, then bob");
  await graph.invoke({ messages: ["alice: I am allergic to peanuts"] }, threads.alice);
  await graph.invoke({ messages: ["alice: book me a window seat"] }, threads.alice);
  await graph.invoke({ messages: ["carol: my dog is called Rex"] }, threads.carol);
  await graph.invoke({ messages: ["alice and bob: plan a trip to Lisbon"] }, threads.group);
  await graph.invoke({ messages: ["bob: I prefer aisle seats"] }, threads.bob);

  check(!PLAINTEXT.test(storedText([innerSaver.storage, innerSaver.writes])), "the inner saver holds only sealed bytes (no message text, its bytes decoded)");
  {
    // The same check, on a plain MemorySaver that ran the same turn, finds the text: it can fail.
    const plain = new MemorySaver();
    await build(plain).invoke({ messages: ["carol: my dog is called Rex"] }, cfg("carol-plain", ["carol-plain"]));
    check(PLAINTEXT.test(storedText([plain.storage, plain.writes])) && !PLAINTEXT.test(JSON.stringify(plain.storage)),
      "the same check finds the text in a plain MemorySaver (where JSON.stringify of its bytes would not)");
  }
  const bobState = (await graph.getState(threads.bob)).values;
  check(bobState.recalled.includes("alice and bob: plan a trip to Lisbon"), "bob's node recalled the group thread's memory into bob's state");
  const before = {};
  for (const k of ["carol"]) before[k] = (await graph.getState(threads[k])).values;
  const aliceState = (await graph.getState(threads.alice)).values;
  check(aliceState.messages.length === 4, "alice's thread holds her 2 turns before the forget");
  const countCheckpoints = async (g, t) => {
    let n = 0;
    for await (const _ of g.getStateHistory(t)) n++;
    return n;
  };
  const stored = {};
  for (const k of Object.keys(threads)) stored[k] = await countCheckpoints(browse, threads[k]);

  // --- forget alice --------------------------------------------------
  const preview = await client.forgets.preview("alice");
  console.log(`forget("alice"), dry run first: ${preview.counts.total} artifacts (${preview.counts.direct} direct, ${preview.counts.derived} derived, ${preview.counts.plaintext_held} plaintext-held embeddings)`);
  const f = await client.forgets.forget("alice");

  console.log("what the forget made unreadable:");
  for (const k of Object.keys(threads)) {
    const left = await countCheckpoints(browse, threads[k]);
    console.log(`  ${threads[k].configurable.thread_id}: ${stored[k] - left} of ${stored[k]} checkpoints no longer read`);
  }
  console.log(`  bob-1's state from his recall on: messages ${JSON.stringify(bobState.messages)}, recalled ${JSON.stringify(bobState.recalled)}`);
  for (const k of ["alice", "group", "bob"]) {
    const err = await graph.getState(threads[k]).then(() => undefined, (e) => e);
    check(err instanceof Shredded && err.status === 410, `getState(${threads[k].configurable.thread_id}) throws Shredded (410)`);
  }
  const histErr = await (async () => { for await (const _ of graph.getStateHistory(threads.bob)) void _; })().then(() => undefined, (e) => e);
  check(histErr instanceof Shredded, "getStateHistory(bob-1) throws Shredded at bob's state that holds the recalled memory");
  const bobHistory = [];
  for await (const s of browse.getStateHistory(threads.bob)) bobHistory.push(s);
  check(bobHistory.length > 0 && bobHistory.length < stored.bob && !JSON.stringify(bobHistory.map((s) => [s.values, s.tasks])).includes("Lisbon"),
    `bob's history (onShredded "skip") no longer holds "alice and bob: plan a trip to Lisbon": ${bobHistory.length} of ${stored.bob} checkpoints read`);
  check(bobHistory.some((s) => s.values.messages?.includes("bob: I prefer aisle seats")),
    "bob's own turn before the recall still reads (\"bob: I prefer aisle seats\")");
  const againErr = await graph.invoke({ messages: ["alice: hello?"] }, threads.alice).then(() => undefined, (e) => e);
  check(againErr instanceof Shredded, "invoking alice's thread again throws Shredded: the graph never starts her afresh by mistake");
  const memErr = await store.get(["memories", "alice"], "alice-1-1").then(() => undefined, (e) => e);
  check(memErr instanceof Shredded, "alice's memories in the store throw Shredded");
  const bobMemories = (await store.search(["memories", "bob"], { limit: 10 })).map((i) => i.value.text);
  check(bobMemories.length === 1 && bobMemories[0] === "bob: I prefer aisle seats", "bob's own memory reads; the group's is gone from his namespace too");

  for (const k of ["carol"]) {
    const now = (await graph.getState(threads[k])).values;
    assert.deepEqual(now, before[k]);
    check(true, `${k}'s state reads exactly as before the forget`);
  }
  await graph.invoke({ messages: ["carol: and a cat called Tom"] }, threads.carol);
  const carolNow = (await graph.getState(threads.carol)).values;
  assert.deepEqual(carolNow.messages.slice(0, before.carol.messages.length), before.carol.messages);
  check(carolNow.messages.length === before.carol.messages.length + 2, "carol's graph resumes from her last checkpoint (one more turn, history intact)");
  check(carolNow.recalled.length > 0 && !carolNow.recalled.some((t) => /peanuts|window|Lisbon/.test(t)),
    "carol's recall finds her own memories and nothing of alice's");

  // --- the index purges alice's embeddings, the forget is erased -------
  const rounds = await store.purge();
  check(rounds.length === 1 && rounds[0].ok && rounds[0].ack.closed.length > 0 && rounds[0].ack.missing.length === 0,
    `the index purged alice's embeddings and signed the ack (${rounds[0]?.ack?.closed.length} closed)`);
  const hits = await store.search(["memories", "alice"], { query: "peanuts window seat Lisbon", limit: 10 });
  check(hits.length === 0, "the index no longer answers with alice's vectors");
  await client.epoch();
  const done = await client.forgets.wait(f.forget, "erased", { timeoutMs: 60_000 });
  check(done.state === "erased", "the forget is erased");
  const att = await verify.verifyAttestation(await client.forgets.attestation(f.forget), readFileSync(join(dataDir, "attestation.pub"), "utf8"),
    { subject: "alice", salt: f.commitment_salt, forget: f.forget });
  const kinds = {};
  for (const a of att.artifacts) kinds[a.kind] = (kinds[a.kind] ?? 0) + 1;
  console.log("  attestation artifacts by kind: " + JSON.stringify(kinds));
  check(kinds["langgraph-checkpoint"] > 0 && kinds["langgraph-write"] > 0, "the attestation lists the saver's checkpoints and writes");
  check(kinds["langgraph-memory"] > 0 && kinds["langgraph-embedding"] > 0, "the attestation lists the store's memories and embeddings");
  check(att.holderAcks.length === 1 && att.holderAcks[0].holder === "langgraph-memory-index", "the attestation carries the index's signed ack, verified offline");
  console.log("example passed");
}
