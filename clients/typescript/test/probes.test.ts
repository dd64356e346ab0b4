// The holder kit answers probes (docs/attestation.md §6a). A known answer of
// Go's attest.ProbeMessage and SignProbe; then, against the real binary, an
// agent memory whose retrieval path is its index and a cache in front of
// it: its purge deletes the index rows only, so the probe finds the cached
// vector and the forget waits; once the cache is dropped a later probe is
// clean, the forget is erased, and the attestation carries the signed clean
// answers, which verify.verifyAttestation checks.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client, Conflict, HolderKit, InvalidSignature, NotFound, ShreddError, envelope, verify, type ProbeWork } from "../src/index.js";
import { Server } from "./server.js";

const te = new TextEncoder();
const hex = (s: string) => Uint8Array.from(s.match(/../g)!.map((b) => parseInt(b, 16)));

// attest.ProbeMessage and attest.SignProbe in Go, with the holder key whose
// seed is the bytes 0 to 31.
const VECTOR = {
  probe: "5e5e0000000000000000000000000001",
  forget: "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f",
  holder: "ann-index-1",
  nonce: "9c1f000000000000000000000000000000000000000000000000000000000002",
  artifacts: ["b-art", "a-art"],
  markers: ["zeta-marker", "alpha-marker"],
  found: ["b-art", "alpha-marker"],
  message: "shredd/v1/holder-probe\nprobe 5e5e0000000000000000000000000001\nforget 8c1f0e6a2b4d4e97a1c3f5e7092b4d6f\n" +
    "holder ann-index-1\nnonce 9c1f000000000000000000000000000000000000000000000000000000000002\n" +
    "asked a-art\nasked b-art\nmarker alpha-marker\nmarker zeta-marker\nfound alpha-marker\nfound b-art\n",
  signature: "wdMvIWcCyZqAyPUMf+4L6nshMpeKqnTyl3SMUVIggnRw8dxrRIs3Q8ojrp1XOOPtLYHO9M1UIxbotvDbpsuyBw==",
  publicKey: "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=",
};

test("probeMessage and the kit's signature are Go's (a known answer)", async () => {
  const v = VECTOR;
  assert.deepEqual(verify.probeMessage(v.probe, v.forget, v.holder, v.nonce, v.artifacts, v.markers, v.found), te.encode(v.message));
  assert.equal(new TextDecoder().decode(verify.probeMessage(v.probe, v.forget, v.holder, v.nonce, ["x"])),
    `shredd/v1/holder-probe\nprobe ${v.probe}\nforget ${v.forget}\nholder ${v.holder}\nnonce ${v.nonce}\nasked x\n`);
  const seed = Uint8Array.from({ length: 32 }, (_, i) => i);
  const pkcs8 = new Uint8Array([...hex("302e020100300506032b657004220420"), ...seed]);
  const kit = new HolderKit(new Client("http://127.0.0.1:1"), v.holder, await HolderKit.importKey(pkcs8));
  assert.equal(envelope.b64(await kit.publicKey()), v.publicKey);
  const w: ProbeWork = { probe: v.probe, forget: v.forget, nonce: v.nonce, artifacts: v.artifacts, markers: v.markers, deadline: "2026-03-01T10:00:00Z" };
  assert.equal(envelope.b64(await kit.signProbe(w, v.found)), v.signature);
});

let srv: Server;
before(async () => {
  srv = await Server.start("--epoch-interval", "1s", "--cache-ttl", "0s");
});
after(async () => srv.stop());

async function until<T>(what: string, f: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const v = await f();
    if (v !== undefined) return v;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no ${what} within ${timeoutMs} ms`);
}

test("the holder kit answers probes through the retrieval path; a cached vector holds the forget until it is dropped", async () => {
  const admin = new Client(srv.url, { token: srv.adminToken, timeoutMs: 30_000 });
  await admin.kinds.ensure("episodic", "embedding");
  const hid = "agent-cache";
  const hc = new Client(srv.url, { token: srv.token("kit-" + hid, ["register"], hid), timeoutMs: 30_000 });
  const kit = new HolderKit(hc, hid, await HolderKit.generateKey());
  await kit.register(admin);
  assert.equal(await kit.declareProbes("1s"), "1s");
  assert.equal(await kit.declareProbes(1), "1s");
  await assert.rejects(kit.declareProbes("0s"), (e: unknown) => e instanceof ShreddError && (e as { status?: number }).status === 400);
  assert.deepEqual(await kit.probes(), []);

  const index = new Set<string>(), cache = new Set<string>();
  const searched: [string, string[], string[]][] = [];
  const purge = (w: { artifacts: readonly string[] }) => {
    for (const a of w.artifacts) index.delete(a); // the cache is left: the ack is honest about the rows only
    return w.artifacts;
  };
  const search = (forget: string, artifacts: string[], markers: string[]) => {
    searched.push([forget, artifacts, markers]);
    return artifacts.filter((a) => index.has(a) || cache.has(a));
  };
  const rec = await admin.sealing.encrypt({ kind: "episodic", subjects: ["alice@example.com"], plaintext: te.encode("alice: allergic to penicillin") });
  const vec = await kit.registerArtifact({ kind: "embedding", parents: [rec.artifact] });
  index.add(vec.artifact);
  cache.add(vec.artifact);
  const f = await admin.forgets.forget("alice@example.com");

  // The first probe comes once the holder acked; its path still returns the cached vector.
  const w = await until("probe", async () => {
    for (const o of await kit.purge(purge)) assert.ok(o.ok);
    return (await kit.probes())[0];
  });
  assert.deepEqual([w.forget, w.artifacts, w.markers, w.nonce.length], [f.forget, [vec.artifact], [], 64]);
  const impostor = new HolderKit(hc, hid, await HolderKit.generateKey());
  await assert.rejects(impostor.answerProbe(w, []), InvalidSignature);
  let out = await kit.probeOnce(() => ["not-asked"]);
  assert.ok(!out[0]!.ok && out[0]!.error instanceof ShreddError);
  out = await kit.probeOnce(() => { throw new Error("index down"); });
  assert.ok(!out[0]!.ok && (out[0]!.error as Error).message === "index down");
  out = await kit.probeOnce(search);
  assert.deepEqual(out, [{ probe: w.probe, forget: f.forget, ok: true, found: [vec.artifact], result: { probe: w.probe, clean: false } }]);
  assert.deepEqual(searched.at(-1), [f.forget, [vec.artifact], []]);
  await assert.rejects(kit.answerProbe(w, [vec.artifact]), Conflict);
  await assert.rejects(kit.answerProbe({ ...w, probe: "0".repeat(32) }, []), NotFound);

  // Past the compaction interval the forget still waits, naming the holder.
  await new Promise((r) => setTimeout(r, 2500));
  await until("answered probe", async () => ((await kit.probeOnce(search)).some((o) => o.ok) ? true : undefined));
  const g = await admin.forgets.get(f.forget);
  assert.notEqual(g.state, "erased");
  const conds = [...(g.conditions ?? []), ...(g.verification ?? [])];
  assert.ok(conds.some((c) => c.name === "cascade_closed" && (c.reason ?? "").includes(hid)), JSON.stringify(conds));

  // The cache is dropped: a later probe is clean, and the forget erased.
  cache.clear();
  await until("erased", async () => {
    await kit.probeOnce(search);
    return (await admin.forgets.get(f.forget)).state === "erased" ? true : undefined;
  });
  const pub = readFileSync(join(srv.dir, "attestation.pub"), "utf8");
  const a = await verify.verifyAttestation(await admin.forgets.attestation(f.forget), pub, { forget: f.forget });
  assert.ok(a.probes.length > 0);
  for (const p of a.probes) assert.deepEqual([p.holder, p.artifacts, p.markers], [hid, [vec.artifact], []]);
  await kit.withdrawProbes();
});
