// The ```ts snippets of docs/clients.md's TypeScript section run, in
// order, against the real binary (transpiled with TypeScript as written),
// and print what their comments say.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import ts from "typescript";
import * as client from "../src/index.js";
import { REPO, Server } from "./server.js";

let srv: Server;
before(async () => {
  srv = await Server.start("--cache-ttl", "1s", "--lease-ttl", "2s");
});
after(async () => srv.stop());

test("the TypeScript snippets of docs/clients.md", async () => {
  const doc = readFileSync(join(REPO, "docs", "clients.md"), "utf8");
  const section = doc.split("\n## TypeScript\n")[1];
  assert.ok(section, "docs/clients.md has a ## TypeScript section");
  const blocks = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.ok(blocks.length >= 5, `only ${blocks.length} snippets`);
  let code = blocks.join("\n");
  code = code.replace(/^import \{([^}]*)\} from "@shredd\/client";$/m, "const {$1} = __client;");
  assert.ok(!/^import /m.test(code), "every import is of @shredd/client");
  const src = `export default async function (url, token, workerToken, attestationPub, console, __client) {\n${code}\n}\n`;
  const js = ts.transpileModule(src, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText;
  const dir = mkdtempSync(join(tmpdir(), "shredd-tsdocs-"));
  try {
    const file = join(dir, "snippets.mjs");
    writeFileSync(file, js);
    const mod = (await import(pathToFileURL(file).href)) as { default: (...a: unknown[]) => Promise<void> };
    const lines: string[] = [];
    const log = { log: (...a: unknown[]) => lines.push(a.map((x) => (typeof x === "string" ? x : JSON.stringify(x))).join(" ")) };
    const workerToken = srv.token("summarizer", ["encrypt", "decrypt"], "summarizer-1");
    await mod.default(srv.url, srv.adminToken, workerToken, readFileSync(join(srv.dir, "attestation.pub"), "utf8"), log, client);
    for (const want of ["Alice prefers green tea.", "4 2", "true", "undeclared_derivation true", "1 2", "true true", "Gina takes the night train.",
      "true 410 shredded", "erased ann-index-1", "true 404 not_found true"]) {
      assert.ok(lines.includes(want), `the snippets print ${JSON.stringify(want)}; they printed:\n${lines.join("\n")}`);
    }
    assert.match(lines[0]!, /"status":"ok"/);
    assert.ok(lines.some((l) => /"total":2/.test(l) && /"plaintext_held":1/.test(l)), lines.join("\n"));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
