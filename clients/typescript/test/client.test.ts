// The client against the real shredd binary on 127.0.0.1.
import { after, before, beforeEach, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  Client, HolderKit, InvalidArgument, InvalidEnvelope, InvalidToken, NotFound, Shredded, ShreddError, TransportError,
  UnknownKind, Unauthorized, APIError, InvalidRequest, WaitTimeout, PROBLEM_CODES, envelope, verify, VerifyError, NotErased, NotForgotten,
} from "../src/index.js";
import { Server } from "./server.js";

const te = new TextEncoder();
let srv: Server;
let c: Client;

before(async () => {
  srv = await Server.start("--cache-ttl", "1s", "--lease-ttl", "2s");
  c = new Client(srv.url, { token: srv.adminToken, timeoutMs: 30_000 });
  await c.kinds.ensure("episodic", "summary", "embedding");
});
after(async () => srv.stop());
// Each test writes with a token of its own: the reads of one test (its
// decrypts, attributable to their token until the leases expire) are not
// the next test's to name.
let tokens = 0;
beforeEach(() => {
  c = new Client(srv.url, { token: srv.token(`client-test-${tokens++}`, ["encrypt", "decrypt", "register", "forget", "audit", "admin"]), timeoutMs: 30_000 });
});

test("encrypt, decrypt, derive; leases released by using and by with", async () => {
  const rec = await c.sealing.encrypt({ kind: "episodic", subjects: ["alice@example.com"], plaintext: te.encode("tea"), context: te.encode("t=1") });
  {
    await using d = await c.sealing.decrypt({ ciphertext: rec.ciphertext, context: te.encode("t=1"), holder: "w1" });
    assert.equal(d.text, "tea");
    assert.equal(d.artifact, rec.artifact);
  }
  // The block's lease is released: releasing again answers released_at.
  const d2 = await c.sealing.decrypt({ ciphertext: rec.ciphertext, context: te.encode("t=1") });
  const rel = await d2.release();
  assert.ok(rel?.released_at);
  const boom = new Error("the block failed");
  await assert.rejects(c.leases.with({ ciphertext: rec.ciphertext, context: te.encode("t=1") }, () => { throw boom; }), (e) => e === boom);
  const n = await c.leases.with({ ciphertext: rec.ciphertext, context: te.encode("t=1") }, (d) => d.plaintext.length);
  assert.equal(n, 3);
  assert.deepEqual(await c.sealing.read({ ciphertext: rec.ciphertext, context: te.encode("t=1") }), te.encode("tea"));
  await assert.rejects(c.sealing.decrypt({ ciphertext: rec.ciphertext }), InvalidEnvelope); // context missing
  const sum = await c.sealing.encrypt({ kind: "summary", parents: [rec.artifact], subjects: ["bob@example.com"], plaintext: te.encode("s") });
  assert.equal(sum.lineage_size, 2);
});

test("options: unknown keys are refused before anything is sent", async () => {
  let calls = 0;
  const counting = new Client(srv.url, { token: srv.adminToken, fetch: (...a) => { calls++; return fetch(...a); } });
  const bad = { kind: "summary", plaintext: te.encode("x"), parent: ["0".repeat(32)], subjects: ["a"] };
  await assert.rejects(counting.sealing.encrypt(bad as never), (e: unknown) => e instanceof InvalidArgument && /unknown option "parent"/.test((e as Error).message));
  await assert.rejects(counting.sealing.sealMany([bad as never]), InvalidArgument);
  await assert.rejects(counting.sealing.encryptBatch([{ kind: "episodic", plaintext: te.encode("x"), subjects: ["a"], contxt: te.encode("c") } as never]), InvalidArgument);
  await assert.rejects(counting.sealing.encrypt({ kind: "episodic", plaintext: "text" as never, subjects: ["a"] }), InvalidArgument);
  await assert.rejects(counting.sealing.encrypt({ kind: "episodic", plaintext: te.encode("x"), subjects: "alice" as never }), InvalidArgument);
  assert.throws(() => new Client(srv.url, { tokn: "x" } as never), InvalidArgument);
  assert.equal(calls, 0);
});

test("batches: one result per item, each failure its own error class", async () => {
  const res = await c.sealing.encryptBatch([
    { kind: "episodic", plaintext: te.encode("tea"), subjects: ["carol@example.com"] },
    { kind: "no-such-kind", plaintext: te.encode("coffee"), subjects: ["dave@example.com"] },
  ]);
  assert.ok(res[0]!.ok);
  assert.ok(!res[1]!.ok && res[1]!.error instanceof UnknownKind && res[1]!.error instanceof InvalidRequest);
  assert.equal(!res[1]!.ok && res[1]!.error.code, "unknown_kind");
  const opened = await c.sealing.decryptBatch([res[0]!.ok ? res[0]!.value.ciphertext : ""]);
  assert.ok(opened[0]!.ok);
  if (opened[0]!.ok) {
    assert.equal(opened[0]!.value.text, "tea");
    await opened[0]!.value.release();
  }
});

test("seal on the client: the envelope decrypts on the server, errors per item", async () => {
  const sealed = await c.sealing.sealMany([
    { kind: "episodic", plaintext: te.encode("Gina takes the night train."), subjects: ["gina@example.com"], context: te.encode("tenant=acme") },
    { kind: "no-such-kind", plaintext: te.encode("lost"), subjects: ["gina@example.com"] },
  ]);
  assert.ok(sealed[0]!.ok && !sealed[1]!.ok && sealed[1]!.error instanceof UnknownKind);
  if (!sealed[0]!.ok) return;
  const g = sealed[0]!.value;
  assert.equal(envelope.fromText(g.ciphertext).header.artifact, g.artifact);
  const d = await c.sealing.read({ ciphertext: g.ciphertext, context: te.encode("tenant=acme") });
  assert.equal(new TextDecoder().decode(d), "Gina takes the night train.");
  const raw = await c.sealing.decryptRaw(g.envelope, { context: te.encode("tenant=acme") });
  assert.equal(raw.artifact, g.artifact);
  await c.leases.release(raw.lease);
  // Over 1,000 items: split into several calls, all sealed.
  // This test's token read gina's artifact above: these items declare that they derive nothing from it.
  const many = await c.sealing.sealMany(Array.from({ length: 1001 }, (_, i) => ({ kind: "episodic", plaintext: te.encode(`m${i}`), subjects: ["hank@example.com"], independent: true })));
  assert.equal(many.filter((r) => r.ok).length, 1001);
  await assert.rejects(c.sealing.seal({ kind: "episodic", plaintext: new Uint8Array(0), context: new Uint8Array(4097), subjects: ["x"] }), (e: unknown) => e instanceof ShreddError && e.code === "too_large");
});

test("raw routes carry UTF-8 subject ids in headers", async () => {
  const r = await c.sealing.encryptRaw({ kind: "episodic", plaintext: new Uint8Array(100_000), subjects: ["zoë@example.com"] });
  const d = await c.sealing.decryptRaw(r.envelope);
  assert.equal(d.plaintext.length, 100_000);
  await c.leases.release(d.lease);
  const p = await c.forgets.preview("zoë@example.com");
  assert.equal(p.counts.direct, 1);
});

test("errors: typed per code, with status and request id; no subject id in messages", async () => {
  await assert.rejects(c.forgets.get("0".repeat(32)), (e: unknown) => e instanceof NotFound && e.status === 404 && e.code === "not_found" && e.requestId !== "");
  await assert.rejects(new Client(srv.url, { token: "not-a-token" }).kinds.list(), (e: unknown) => e instanceof InvalidToken && e instanceof Unauthorized && e.status === 401);
  await assert.rejects(c.forgets.attestation("0".repeat(32)), (e: unknown) => e instanceof APIError && e.status === 404);
  await assert.rejects(c.forgets.get("not-an-id"), InvalidArgument);
  assert.ok(PROBLEM_CODES.length >= 30);
  const secret = "secret-subject@example.com";
  const err = await c.sealing.encrypt({ kind: "nope", plaintext: te.encode("x"), subjects: [secret] }).catch((e: unknown) => e);
  assert.ok(err instanceof UnknownKind);
  assert.ok(!String((err as Error).message).includes(secret) && !JSON.stringify(err).includes(secret));
  assert.ok(!srv.logs().includes(secret), "the server log holds no subject id");
});

test("retries: idempotent calls only", async () => {
  let calls = 0;
  const flaky: typeof fetch = async (input, init) => {
    calls++;
    if (calls % 2 === 1) throw new TypeError("connection reset");
    return fetch(input, init);
  };
  const fc = new Client(srv.url, { token: srv.adminToken, fetch: flaky, backoffMs: 1 });
  calls = 0;
  await fc.kinds.list();
  assert.equal(calls, 2, "a GET is tried again");
  calls = 0;
  await assert.rejects(fc.sealing.encrypt({ kind: "episodic", plaintext: te.encode("x"), subjects: ["ivy@example.com"] }), TransportError);
  assert.equal(calls, 1, "an encrypt is never sent twice");
  calls = 0;
  await assert.rejects(fc.epoch(), TransportError);
  assert.equal(calls, 1);
});

test("forget: dry run, Shredded, the holder kit's signed ack, erased, attestation checked offline as shredd verify does", async () => {
  const rec = await c.sealing.encrypt({ kind: "episodic", subjects: ["frank@example.com"], plaintext: te.encode("Frank hikes.") });
  const other = await c.sealing.encrypt({ kind: "episodic", subjects: ["grace@example.com"], plaintext: te.encode("Grace swims.") });
  const kit = new HolderKit(c, "ann-index-1", await HolderKit.generateKey());
  await kit.register();
  const vec = await kit.registerArtifact({ kind: "embedding", parents: [rec.artifact] });
  const vectors = new Map([[vec.artifact, [0.1, 0.7]]]);
  const preview = await c.forgets.preview("frank@example.com");
  assert.equal(preview.counts.total, 2);
  assert.equal(preview.counts.plaintext_held, 1);
  const f = await c.forgets.forget("frank@example.com");
  assert.ok(f.commitment_salt);
  await assert.rejects(c.sealing.decrypt({ ciphertext: rec.ciphertext }), (e: unknown) => e instanceof Shredded && e.status === 410 && !(e instanceof NotFound));
  assert.equal(await c.sealing.read({ ciphertext: other.ciphertext }).then((b) => new TextDecoder().decode(b)), "Grace swims.");
  await assert.rejects(c.forgets.attestation(f.forget), NotErased);
  await assert.rejects(c.forgets.wait(f.forget, "erased", { timeoutMs: 300, intervalMs: 100 }), (e: unknown) => e instanceof WaitTimeout && e.pending.length > 0);
  const outcomes = await kit.purge((w) => {
    for (const a of w.artifacts) vectors.delete(a);
    return w.artifacts;
  });
  assert.equal(outcomes.length, 1);
  assert.ok(outcomes[0]!.ok && outcomes[0]!.ack?.closed.length === 1);
  assert.ok((await kit.reportInventory([])).clean);
  await c.epoch();
  const done = await c.forgets.wait(f.forget, "erased", { timeoutMs: 60_000 });
  assert.equal(done.state, "erased");
  const att = await c.forgets.attestation(f.forget);
  const pubPath = join(srv.dir, "attestation.pub");
  const pub = readFileSync(pubPath, "utf8");
  const a = await verify.verifyAttestation(att, pub, { subject: "frank@example.com", salt: f.commitment_salt!, forget: f.forget });
  assert.equal(a.holderAcks[0]?.holder, "ann-index-1");
  assert.deepEqual(a.holderAcks[0]?.artifacts, [vec.artifact]);
  assert.ok(a.artifacts.some((x) => x.id === vec.artifact) && a.artifacts.some((x) => x.id === rec.artifact));

  // The same outcome as shredd verify on the real file and on tampered copies.
  const tmp = mkdtempSync(join(tmpdir(), "shredd-tsverify-"));
  const doc = JSON.parse(new TextDecoder().decode(att)) as { payload: string; payloadType: string; signatures: { keyid: string; sig: string }[] };
  const payload = new TextDecoder().decode(envelope.unb64(doc.payload)!);
  const reb64 = (s: string): string => envelope.b64(te.encode(s));
  const cases: [string, string, boolean][] = [
    ["valid", new TextDecoder().decode(att), true],
    ["payload changed", JSON.stringify({ ...doc, payload: reb64(payload.replace("cryptographically erased", "cryptographically erasex")) }), false],
    ["condition not ok", JSON.stringify({ ...doc, payload: reb64(payload.replace('"status":"ok"', '"status":"pending"')) }), false],
    ["signature flipped", JSON.stringify({ ...doc, signatures: [{ ...doc.signatures[0]!, sig: envelope.b64(envelope.unb64(doc.signatures[0]!.sig)!.map((b, i) => (i === 0 ? b ^ 1 : b))) }] }), false],
    ["other key id", JSON.stringify({ ...doc, signatures: [{ ...doc.signatures[0]!, keyid: "00".repeat(32) }] }), false],
    ["payload type", JSON.stringify({ ...doc, payloadType: "application/json" }), false],
    ["no signature", JSON.stringify({ ...doc, signatures: [] }), false],
    ["not JSON", "{", false],
  ];
  for (const [name, body, want] of cases) {
    const file = join(tmp, name.replace(/ /g, "_") + ".json");
    writeFileSync(file, body);
    const cli = srv.cli("verify", file, "--key", pubPath, "--subject", "frank@example.com", "--salt", f.commitment_salt!);
    const ours: boolean = await verify.verifyAttestation(te.encode(body), pub, { subject: "frank@example.com", salt: f.commitment_salt! }).then(() => true, (e: unknown) => {
      assert.ok(e instanceof VerifyError, `${name}: ${String(e)}`);
      return false;
    });
    assert.equal(cli.status === 0, want, `shredd verify on ${name}: ${cli.out}`);
    assert.equal(ours, want, `verifyAttestation on ${name}`);
  }
  // The wrong subject does not open the commitment, for both.
  const cli = srv.cli("verify", join(tmp, "valid.json"), "--key", pubPath, "--subject", "grace@example.com", "--salt", f.commitment_salt!);
  assert.notEqual(cli.status, 0);
  await assert.rejects(verify.verifyAttestation(att, pub, { subject: "grace@example.com", salt: f.commitment_salt! }), VerifyError);
});

test("the attestation fixture of attest/testdata verifies; a flipped byte does not", async () => {
  const { REPO } = await import("./server.js");
  const d = join(REPO, "attest", "testdata");
  const pub = readFileSync(join(d, "attestation.pub"), "utf8");
  const att = readFileSync(join(d, "local.dsse.json"));
  const check = Object.fromEntries(readFileSync(join(d, "local.check"), "utf8").trim().split("\n").map((l) => l.split(": ") as [string, string]));
  const a = await verify.verifyAttestation(att, pub, { subject: check["subject"]!, salt: check["salt"]! });
  assert.equal(a.forget, "0f1e2d3c4b5a69788796a5b4c3d2e1f0");
  const cli = srv.cli("verify", join(d, "local.dsse.json"), "--key", join(d, "attestation.pub"), "--subject", check["subject"]!, "--salt", check["salt"]!);
  assert.equal(cli.status, 0, cli.out);
  await assert.rejects(verify.verifyAttestation(att, pub, { subject: "mallory", salt: check["salt"]! }), VerifyError);
});

test("ackMessage is the message of attestation.md §6", () => {
  const m = new TextDecoder().decode(verify.ackMessage("f1", "h1", ["b2", "a1", "b2"]));
  assert.equal(m, "shredd/v1/holder-ack\nforget f1\nholder h1\nartifact a1\nartifact b2\n");
  assert.throws(() => verify.ackMessage("f 1", "h", ["a"]), InvalidArgument);
});

test("reinstate: not before the forget is erased, a new generation once, the old data stays Shredded", async () => {
  const subject = "ruth@example.com";
  const old = await c.sealing.encrypt({ kind: "episodic", subjects: [subject], plaintext: te.encode("first life") });
  await assert.rejects(c.forgets.reinstate(subject), (e: unknown) => e instanceof NotForgotten && e.status === 409 && e.code === "not_forgotten");
  const f = await c.forgets.forget(subject);
  await assert.rejects(c.forgets.reinstate(subject, "came back"), NotErased);
  await assert.rejects(c.sealing.encrypt({ kind: "episodic", subjects: [subject], plaintext: te.encode("too early") }), Shredded);
  await c.epoch();
  await c.forgets.wait(f.forget, "erased", { timeoutMs: 60_000 });
  const r = await c.forgets.reinstate(subject, "came back with fresh consent");
  assert.deepEqual([r.generation, r.previous_generation, r.forget], [2, 1, f.forget]);
  assert.ok(r.log_index >= 0 && typeof r.reinstated_at === "string");
  await assert.rejects(c.forgets.reinstate(subject), NotForgotten);
  await assert.rejects(c.sealing.decrypt({ ciphertext: old.ciphertext }), Shredded);
  const fresh = await c.sealing.encrypt({ kind: "episodic", subjects: [subject], plaintext: te.encode("second life") });
  assert.equal(new TextDecoder().decode(await c.sealing.read({ ciphertext: fresh.ciphertext })), "second life");
  assert.equal((await c.forgets.get(f.forget)).state, "erased");
  const f2 = await c.forgets.forget(subject);
  assert.notEqual(f2.forget, f.forget);
  await assert.rejects(c.sealing.decrypt({ ciphertext: fresh.ciphertext }), Shredded);
  await assert.rejects(c.forgets.reinstate(7 as unknown as string), InvalidArgument);
});
