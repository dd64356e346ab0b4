// The store's index answers shredd's probes (docs/attestation.md §6a)
// through the lookup its search runs, against the real binary. Two
// subjects are forgotten: fay's embedding is purged, so the probe answers
// clean and the forget is erased with the probe in its attestation; one of
// gus's two embeddings is acked but left in the index (a purge that lost
// a delete), so the probe finds it, the forget stays pending naming the
// holder, and it is erased only once the entry is gone and a later probe
// is clean.
import { InMemoryStore } from "@langchain/langgraph-checkpoint";
import { type Client, HolderKit, InvalidArgument, type InventoryItem, type PurgeCallback, verify } from "@shredd/client";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ShreddStore } from "../src/index.js";
import { HashEmbeddings } from "./embeddings.js";
import { startShredd, type Server } from "./shredd.js";

let server: Server;
let client: Client;
beforeAll(async () => {
  ({ server, client } = await startShredd("--epoch-interval", "1s", "--cache-ttl", "0s"));
});
afterAll(async () => server.stop());

/**
 * LeakyKit acks every artifact a forget names but hands the store's purge
 * all but those in skip, and leaves them out of the inventory too: what an
 * index that lost a delete, and says it holds nothing, looks like to the
 * ack. Only the probe, which asks the index itself, can see it.
 */
class LeakyKit extends HolderKit {
  readonly skip = new Set<string>();
  override purge(fn: PurgeCallback) {
    return super.purge(async (w) => {
      await fn({ ...w, artifacts: w.artifacts.filter((a) => !this.skip.has(a)) });
      return w.artifacts;
    });
  }
  override reportInventory(items: readonly InventoryItem[]) {
    return super.reportInventory(items.filter((i) => !this.skip.has(i.id)));
  }
}

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no ${what} within ${timeoutMs} ms`);
}

test("the index answers probes through its search lookup: purged is clean, a stale entry holds the forget until it is gone", async () => {
  const holder = "memory-index-probed";
  const kit = new LeakyKit(client, holder, await HolderKit.generateKey());
  const store = new ShreddStore({ client, inner: new InMemoryStore(), subjects: (ns) => [ns[1]!], kit, index: { embeddings: new HashEmbeddings() } });
  await store.setup();
  await expect(new ShreddStore({ client, inner: new InMemoryStore(), subjects: () => ["x"] }).declareProbes("1s")).rejects.toBeInstanceOf(InvalidArgument);
  expect(await store.declareProbes("1s")).toBe("1s");

  const held = () => new Set(store.heldArtifacts().map((a) => a.id));
  const added = async (ns: string[], key: string, text: string): Promise<string> => {
    const before = held();
    await store.put(ns, key, { text });
    const [a] = [...held()].filter((x) => !before.has(x));
    return a!;
  };
  const fay = await added(["memories", "fay"], "m1", "Fay keeps bees on the roof");
  const gus1 = await added(["memories", "gus"], "m1", "Gus plays the oboe");
  const gus2 = await added(["memories", "gus"], "m2", "Gus is allergic to walnuts");
  const hal = await added(["memories", "hal"], "m1", "Hal grows walnuts");
  // The probe's lookup is the index's: what it holds, in any namespace; nothing it was not asked.
  expect(store.probe("f", [fay, gus2, "not-held"])).toEqual([fay, gus2]);
  expect(() => store.probe("f", [fay], ["canary-marker"])).toThrow(InvalidArgument);
  kit.skip.add(gus2);

  const ff = await client.forgets.forget("fay");
  const fg = await client.forgets.forget("gus");
  // Purge until shredd has a probe open for each forget (it asks once the holder acked).
  const first = await until("a probe of each forget", async () => {
    for (const o of await store.purge()) expect(o.ok).toBe(true);
    const open = await kit.probes();
    return new Set(open.map((p) => p.forget)).size === 2 ? open : undefined;
  });
  expect(Object.fromEntries(first.map((p) => [p.forget, [...p.artifacts].sort()]))).toEqual({ [ff.forget]: [fay], [fg.forget]: [gus1, gus2].sort() });
  // The stale entry: search shows nothing of gus (his values no longer open), but the index still scores it.
  expect((await store.search(["memories"], { query: "walnuts allergic", limit: 5 })).map((i) => i.value)).toEqual([{ text: "Hal grows walnuts" }]);
  const answers = await store.probeOnce();
  const by = Object.fromEntries(answers.map((o) => [o.forget, o]));
  expect(by[ff.forget]).toMatchObject({ ok: true, found: [], result: { clean: true } });
  expect(by[fg.forget]).toMatchObject({ ok: true, found: [gus2], result: { clean: false } });

  // Past the compaction interval fay's forget is erased on a clean probe; gus's waits, naming the holder.
  await until("fay erased", async () => {
    await store.probeOnce();
    return (await client.forgets.get(ff.forget)).state === "erased" ? true : undefined;
  });
  await until("a later probe of gus that finds the entry", async () => {
    const o = (await store.probeOnce()).find((x) => x.forget === fg.forget);
    return o?.ok === true && o.found.length === 1 ? true : undefined;
  });
  const g = await client.forgets.get(fg.forget);
  expect(g.state).not.toBe("erased");
  const conds = [...(g.conditions ?? []), ...(g.verification ?? [])];
  expect(conds.some((c) => c.name === "cascade_closed" && (c.reason ?? "").includes(holder) && /probe/.test(c.reason ?? ""))).toBe(true);

  // The entry goes (the application deletes the item: its vector with it); a later probe is clean.
  await store.delete(["memories", "gus"], "m2");
  expect(store.probe(fg.forget, [gus1, gus2])).toEqual([]);
  await until("gus erased", async () => {
    await store.probeOnce();
    return (await client.forgets.get(fg.forget)).state === "erased" ? true : undefined;
  });
  const pub = readFileSync(join(server.dir, "attestation.pub"), "utf8");
  for (const [f, subject, arts] of [[ff, "fay", [fay]], [fg, "gus", [gus1, gus2].sort()]] as const) {
    const att = await verify.verifyAttestation(await client.forgets.attestation(f.forget), pub, { subject, salt: f.commitment_salt! });
    expect(att.probes.length).toBeGreaterThan(0);
    for (const p of att.probes) expect([p.holder, [...p.artifacts].sort()]).toEqual([holder, arts]);
  }
  expect(store.heldArtifacts().map((a) => a.id)).toEqual([hal]);
});
