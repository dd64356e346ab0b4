// Reads become lineage (docs/api.md): units of work, the undeclared
// derivation a write is refused for, declarations, and a --reads inherit
// token, against the real binary on 127.0.0.1.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Conflict, InvalidArgument, UndeclaredDerivation, Unit, errorFromItem, errorFromProblem, type Encrypted } from "../src/index.js";
import { Server } from "./server.js";

const te = new TextEncoder();
let srv: Server;
let admin: Client;
let n = 0;

before(async () => {
  srv = await Server.start("--cache-ttl", "1s", "--lease-ttl", "30s");
  admin = new Client(srv.url, { token: srv.adminToken, timeoutMs: 30_000 });
  await admin.kinds.ensure("episodic", "summary", "embedding");
});
after(async () => srv.stop());

/** fresh is a client with a token of its own: no read of another test is its. */
function fresh(...extra: string[]): Client {
  return new Client(srv.url, { token: srv.token(`t${n++}`, ["encrypt", "decrypt", "register"], undefined, ...extra), timeoutMs: 30_000 });
}

async function record(subject: string, text: string): Promise<Encrypted> {
  return admin.sealing.encrypt({ kind: "episodic", subjects: [subject], plaintext: te.encode(text) });
}

test("a unit names its reads in each of its writes; close releases them", async () => {
  const c = fresh();
  const alice = await record("alice", "Alice plans a trip to Lisbon.");
  const u = c.unit();
  assert.ok(u instanceof Unit);
  assert.match(u.id, /^[0-9a-f]{16}$/);
  const d = await u.decrypt({ ciphertext: alice.ciphertext });
  assert.equal(d.lease.unit, u.id);
  assert.deepEqual(u.leases, [d.lease.id]);
  const sum = await u.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("bob travels with someone") });
  assert.equal(sum.lineage_size, 2, "the summary's lineage holds alice, read by the unit");
  const art = await c.artifacts.get(sum.artifact);
  assert.deepEqual(art.reads?.map((r) => [r.lease, r.how]), [[d.lease.id, "named"]]);
  const sealed = await u.seal({ kind: "summary", subjects: ["carol"], plaintext: te.encode("x") });
  assert.equal(sealed.lineage_size, 2);
  const raw = await u.encryptRaw({ kind: "summary", subjects: ["dave"], plaintext: te.encode("y") });
  assert.equal(raw.lineage_size, 2);
  // Declared independent, a lease of the unit is not named.
  const indep = await u.encrypt({ kind: "summary", subjects: ["erin"], plaintext: te.encode("z"), independentOf: [d.lease.id] });
  assert.equal(indep.lineage_size, 1);
  await u.close();
  assert.ok((await c.leases.release(d.lease.id)).released_at, "close released the unit's lease");
  await assert.rejects(u.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("late") }), InvalidArgument);
  assert.throws(() => c.unit("not a unit!"), InvalidArgument);
  assert.equal(c.unit("job-7:step.1").id, "job-7:step.1");
});

test("a write that names no read of its token is refused: UndeclaredDerivation lists the leases", async () => {
  const c = fresh();
  const alice = await record("alice", "Alice is allergic to peanuts.");
  const d = await c.sealing.decrypt({ ciphertext: alice.ciphertext });
  const err = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("no peanuts at the party") }).catch((e: unknown) => e);
  assert.ok(err instanceof UndeclaredDerivation && err instanceof Conflict, String(err));
  assert.equal(err.status, 409);
  assert.equal(err.code, "undeclared_derivation");
  assert.deepEqual(err.leases, [d.lease.id]);
  // The same for a batch item, and for sealing on the client.
  const batch = await c.sealing.encryptBatch([{ kind: "summary", subjects: ["bob"], plaintext: te.encode("b") }]);
  assert.ok(!batch[0]!.ok && batch[0]!.error instanceof UndeclaredDerivation && batch[0]!.error.leases[0] === d.lease.id);
  await assert.rejects(c.sealing.seal({ kind: "summary", subjects: ["bob"], plaintext: te.encode("s") }), UndeclaredDerivation);
  // Released is not forgotten: the read stays attributable until its expiry.
  await d.release();
  await assert.rejects(c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("r") }), UndeclaredDerivation);
  // Each way of answering for the read.
  const named = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("n"), leases: [d.lease.id] });
  assert.equal(named.lineage_size, 2);
  const parent = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("p"), parents: [alice.artifact] });
  assert.equal(parent.lineage_size, 2);
  const of = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("o"), independentOf: [d.lease.id] });
  assert.equal(of.lineage_size, 1);
  const all = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("i"), independent: true });
  assert.equal(all.lineage_size, 1);
  assert.deepEqual((await c.artifacts.get(all.artifact)).reads?.map((r) => r.how), ["independent"]);
  const rawIndep = await c.sealing.encryptRaw({ kind: "summary", subjects: ["bob"], plaintext: te.encode("h"), independentOf: [d.lease.id] });
  assert.equal(rawIndep.lineage_size, 1);
  await assert.rejects(c.sealing.encryptRaw({ kind: "summary", subjects: ["bob"], plaintext: te.encode("h") }), UndeclaredDerivation);
});

test("units keep apart: a write of one unit does not answer for another unit's reads", async () => {
  const c = fresh();
  const alice = await record("alice", "Alice's notes.");
  const a = c.unit();
  const b = c.unit();
  await a.decrypt({ ciphertext: alice.ciphertext });
  const other = await b.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("bob's own") });
  assert.equal(other.lineage_size, 1);
  // A write outside any unit answers for every read of its token.
  await assert.rejects(c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("x") }), UndeclaredDerivation);
  // A read outside any unit is seen by every unit.
  const c2 = fresh();
  const plain = await c2.sealing.decrypt({ ciphertext: alice.ciphertext });
  const err = await c2.unit().encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("y") }).catch((e: unknown) => e);
  assert.ok(err instanceof UndeclaredDerivation && err.leases.includes(plain.lease.id));
  await a.close();
  await b.close();
});

test("raw decrypts and plaintext-held registrations through a unit", async () => {
  const c = fresh();
  const alice = await record("alice", "raw alice");
  const sealed = await admin.sealing.seal({ kind: "episodic", subjects: ["alice"], plaintext: te.encode("raw") });
  const u = c.unit();
  const d = await u.decryptRaw(sealed.envelope);
  assert.deepEqual(u.leases, [d.lease]);
  await u.decryptBatch([alice.ciphertext]);
  assert.equal(u.leases.length, 2);
  const art = await u.register({ kind: "embedding", holder: "index-1", subjects: ["bob"] });
  assert.equal(art.lineage_size, 2, "the embedding's lineage: bob, and alice read by the unit");
  await u.close();
});

test("a --reads inherit token: the undeclared write takes the reads' lineage and says so", async () => {
  const c = fresh("--reads", "inherit");
  const alice = await record("alice", "inherit me");
  const d = await c.sealing.decrypt({ ciphertext: alice.ciphertext });
  const w = await c.sealing.encrypt({ kind: "summary", subjects: ["bob"], plaintext: te.encode("derived") });
  assert.deepEqual(w.inherited, [d.lease.id]);
  assert.equal(w.lineage_size, 2);
  assert.deepEqual((await c.artifacts.get(w.artifact)).reads?.map((r) => r.how), ["inherited"]);
  const s = await c.sealing.seal({ kind: "summary", subjects: ["bob"], plaintext: te.encode("sealed") });
  assert.deepEqual(s.inherited, [d.lease.id]);
  await d.release();
});

test("the 409 problem becomes UndeclaredDerivation with its leases (no server)", () => {
  const body = te.encode(JSON.stringify({ type: "about:blank", title: "Conflict", status: 409, code: "undeclared_derivation",
    detail: "2 reads neither named nor declared independent", leases: ["a".repeat(32), "b".repeat(32)], request_id: "r1" }));
  const e = errorFromProblem(409, body, "", "POST /v1/encrypt");
  assert.ok(e instanceof UndeclaredDerivation && e instanceof Conflict);
  assert.deepEqual(e.leases, ["a".repeat(32), "b".repeat(32)]);
  assert.equal(e.requestId, "r1");
  const item = errorFromItem({ status: 409, code: "undeclared_derivation", leases: ["c".repeat(32)] }, "POST /v1/encrypt item 0", "r2");
  assert.ok(item instanceof UndeclaredDerivation && item.leases[0] === "c".repeat(32));
});
