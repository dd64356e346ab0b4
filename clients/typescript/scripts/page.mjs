// Generates the page's verifier, ui/static/verify.js, from the one
// JavaScript reader of evidence, src/evidence.ts: tsc's JavaScript output of
// that file (CommonJS, ES2022) wrapped as a classic script (not a module:
// the page also works opened from disk, file://, where Chromium refuses
// module scripts) that assigns its `page` export to globalThis.ShreddVerify
// and its `witness` export to globalThis.ShreddWitness. The output is a
// function of the source's bytes and the locked TypeScript version only.
//
//   node scripts/page.mjs          writes ui/static/verify.js
//   node scripts/page.mjs --check  generates into a temporary file and fails
//                                  when it differs from ui/static/verify.js
//                                  (the committed file was edited by hand,
//                                  or the source changed without npm run
//                                  build:page)
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");
const repo = join(pkg, "..", "..");
const SOURCE = "clients/typescript/src/evidence.ts";
const TARGET = "ui/static/verify.js";

function generate() {
  const src = readFileSync(join(repo, SOURCE));
  const out = ts.transpileModule(src.toString("utf8"), {
    fileName: "evidence.ts",
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      newLine: ts.NewLineKind.LineFeed,
      removeComments: false,
      sourceMap: false,
      isolatedModules: true,
    },
  });
  if (out.diagnostics && out.diagnostics.length > 0) {
    throw new Error(ts.formatDiagnostics(out.diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => pkg, getNewLine: () => "\n" }));
  }
  if (/\brequire\(/.test(out.outputText)) throw new Error(SOURCE + " imports something: the page's script must stand alone");
  const sum = createHash("sha256").update(src).digest("hex");
  return [
    `// GENERATED from ${SOURCE} by clients/typescript/scripts/page.mjs (npm run build:page): do not edit.`,
    `// source sha256 ${sum}`,
    `// typescript ${ts.version}`,
    "//",
    "// The page's verifier: the one JavaScript reader of evidence, as a classic",
    "// script (not a module, so that the page also works opened from disk,",
    "// file://). It sets globalThis.ShreddVerify and globalThis.ShreddWitness;",
    `// what they do is documented in ${SOURCE}.`,
    "(function () {",
    "'use strict';",
    "var exports = {};",
    out.outputText.replace(/\n*$/, "\n") +
    "globalThis.ShreddVerify = exports.page;",
    "globalThis.ShreddWitness = exports.witness;",
    "})();",
    "",
  ].join("\n");
}

const js = generate();
if (process.argv.includes("--check")) {
  const dir = mkdtempSync(join(tmpdir(), "shredd-page-"));
  try {
    const tmp = join(dir, "verify.js");
    writeFileSync(tmp, js);
    const want = readFileSync(tmp);
    const have = readFileSync(join(repo, TARGET));
    if (!want.equals(have)) {
      console.error(`page: ${TARGET} is not the output of ${SOURCE}: run npm run build:page in clients/typescript (and never edit ${TARGET} by hand)`);
      process.exit(1);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
} else {
  writeFileSync(join(repo, TARGET), js);
}
