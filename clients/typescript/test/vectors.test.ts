// The envelope's vectors (envelope/testdata/vectors), every one, byte for
// byte: what parses re-encodes exactly, successes open, client-sealed ones
// derive the listed artifact key and seal to the same bytes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { envelope, EnvelopeError } from "../src/index.js";
import { REPO } from "./server.js";

const dir = join(REPO, "envelope", "testdata", "vectors");

interface Vector { name: string; fields: Map<string, string[]>; text: string }

function load(): Vector[] {
  return readdirSync(dir).sort().map((name) => {
    const raw = readFileSync(join(dir, name), "utf8");
    const [head, body] = raw.split("\n\n", 2) as [string, string];
    const fields = new Map<string, string[]>();
    for (const line of head.split("\n")) {
      const i = line.indexOf(":");
      const k = line.slice(0, i);
      fields.set(k, [...(fields.get(k) ?? []), line.slice(i + 1).trim()]);
    }
    assert.ok(body.endsWith("\n"));
    return { name, fields, text: body.slice(0, -1) };
  });
}

const one = (v: Vector, k: string): string | undefined => v.fields.get(k)?.[0];

test("every envelope vector", async (t) => {
  const vs = load();
  assert.ok(vs.length >= 56, `only ${vs.length} vectors`);
  let clientSealed = 0;
  for (const v of vs) {
    await t.test(v.name, async () => {
      const expect = one(v, "expect");
      if (expect === "parse failure" || expect === "unsupported") {
        assert.throws(() => envelope.fromText(v.text), (e: unknown) =>
          e instanceof EnvelopeError && e.code === (expect === "unsupported" ? "unsupported" : "malformed"));
        return;
      }
      const env = envelope.fromText(v.text);
      assert.equal(envelope.toText(env.bytes), v.text, "re-encodes exactly");
      const refs = (v.fields.get("lineage") ?? []).map((l) => {
        const [sid, gen] = l.split(":") as [string, string];
        return { sid, gen: Number(gen) };
      });
      const keys = (v.fields.get("keys") ?? []).map((k, i) => ({ ref: refs[i]!, key: envelope.unhex(k) }));
      const context = envelope.unhex(one(v, "context") ?? "");
      if (expect === "open failure") {
        await assert.rejects(envelope.open(env, keys, context), (e: unknown) =>
          e instanceof EnvelopeError && (e.code === "open_failed" || e.code === "invalid"));
        return;
      }
      assert.equal(expect, "success");
      assert.equal(env.header.kind, one(v, "kind"));
      assert.deepEqual(env.header.lineage.map((r) => r.sid), [...refs].map((r) => r.sid).sort());
      const pt = await envelope.open(env, keys, context);
      assert.equal(envelope.hex(pt), one(v, "plaintext"));
      const ak = one(v, "artifact_key");
      if (ak !== undefined) {
        clientSealed++;
        const ordered = env.header.lineage.map((r) => keys.find((k) => k.ref.sid === r.sid)!.key);
        assert.equal(envelope.hex(await envelope.deriveKey(env.header, ordered)), ak);
        const sealed = await envelope.sealWithKey(env.header.bytes, envelope.unhex(ak), pt, context);
        assert.equal(envelope.toText(sealed), v.text, "sealing on the client gives the vector's bytes");
      }
    });
  }
  assert.equal(clientSealed, 2);
});

test("sealWithKey refuses oversize input and header bytes with a tail", async () => {
  const v = load().find((x) => x.name === "client_sealed_single")!;
  const env = envelope.fromText(v.text);
  const key = envelope.unhex(one(v, "artifact_key")!);
  await assert.rejects(envelope.sealWithKey(env.header.bytes, key, new Uint8Array(0), new Uint8Array(4097)), (e: unknown) => e instanceof EnvelopeError && e.code === "too_large");
  await assert.rejects(envelope.sealWithKey(env.bytes, key, new Uint8Array(1)), (e: unknown) => e instanceof EnvelopeError && e.code === "malformed");
  await assert.rejects(envelope.sealWithKey(env.header.bytes, key.subarray(1), new Uint8Array(1)), (e: unknown) => e instanceof EnvelopeError && e.code === "invalid");
});
