// The shared corpus of evidence cases (testdata/evidence/cases.json,
// docs/transparency.md §10a, §10b): verifyExport (an export) and
// verify.verifyAttestation (a bare attestation) give every case the verdict
// and the reason code `shredd verify` gives it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { verify, verifyExport, VerifyError, type VerifyExportOptions } from "../src/index.js";
import { REPO } from "./server.js";

const dir = join(REPO, "testdata", "evidence");

interface Case {
  name: string; about: string; export?: string; attestation?: string; key: string; log_key?: string;
  subject: string | null; salt: string | null; saved: string | null;
  witnesses?: string[]; witnesses_required?: number;
  verdict: "verified" | "refused" | "usage"; reason: string;
}

const read = (f: string): Uint8Array => new Uint8Array(readFileSync(join(dir, f)));

test("every case of the evidence corpus", async (t) => {
  const cases = (JSON.parse(readFileSync(join(dir, "cases.json"), "utf8")) as { cases: Case[] }).cases;
  assert.ok(cases.length >= 271, `only ${cases.length} cases`);
  const verdicts = new Set(cases.map((c) => c.verdict));
  assert.deepEqual([...verdicts].sort(), ["refused", "usage", "verified"], "the corpus has every verdict");
  const verdictOf = (verified: boolean, reason: string): string => (verified ? "verified" : reason === "usage" ? "usage" : "refused");
  let agreed = 0;
  for (const c of cases) {
    await t.test(c.name, async () => {
      if (c.attestation !== undefined) {
        // A bare attestation: verify.verifyAttestation, through the same reader.
        const o: { subject?: string; salt?: string } = {};
        if (c.subject !== null) o.subject = c.subject;
        if (c.salt !== null) o.salt = c.salt;
        const reason = await verify.verifyAttestation(read(c.attestation), read(c.key), o).then(() => "ok", (e: unknown) => {
          assert.ok(e instanceof VerifyError, String(e));
          return e.reason;
        });
        assert.equal(verdictOf(reason === "ok", reason), c.verdict, c.about);
        assert.equal(reason, c.reason, c.about);
        agreed++;
        return;
      }
      const opts: VerifyExportOptions = { key: read(c.key), logKey: read(c.log_key!) };
      if (c.subject !== null) opts.subject = c.subject;
      if (c.salt !== null) opts.salt = c.salt;
      if (c.saved !== null) opts.checkpoint = read(c.saved);
      if (c.witnesses !== undefined) opts.witnesses = c.witnesses.map(read);
      if (c.witnesses_required !== undefined) opts.witnessesRequired = c.witnesses_required;
      const r = await verifyExport(read(c.export!), opts);
      assert.equal(verdictOf(r.verified, r.reason), c.verdict, `${c.about}: ${r.failed} ${r.detail}`);
      assert.equal(r.reason, c.reason, `${c.about}: ${r.failed} ${r.detail}`);
      if (r.verified) assert.equal(r.failed, ""); else assert.notEqual(r.detail, "");
      agreed++;
    });
  }
  assert.equal(agreed, cases.length);
});

test("a verified export's report", async () => {
  const r = await verifyExport(read("files/001-valid.tar.gz"), {
    key: readFileSync(join(dir, "files/key.pem"), "utf8"), logKey: readFileSync(join(dir, "files/log.vkey"), "utf8"),
    subject: "alice@example.com", salt: "b65bf8931e66e8fab35e4771266c5b77294808e45535ae579eda977a4065545f",
    checkpoint: read("files/saved.checkpoint"),
  });
  assert.equal(r.verified, true);
  assert.equal(r.reason, "ok");
  assert.match(r.forget ?? "", /^[0-9a-f]{32}$/);
  assert.ok(r.checks.some((c) => c.check === "consistency" && c.ok === true));
  const wrong = await verifyExport(read("files/001-valid.tar.gz"), {
    key: readFileSync(join(dir, "files/key.pem")), logKey: read("files/log.vkey"),
    subject: "bob@example.com", salt: "b65bf8931e66e8fab35e4771266c5b77294808e45535ae579eda977a4065545f",
  });
  assert.equal(wrong.verified, false);
  assert.equal(wrong.reason, "subject.mismatch");
  assert.equal(wrong.failed, "subject");
});
