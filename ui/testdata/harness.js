// A long-lived harness that runs the page's verifier (ui/static/verify.js)
// under Node for the Go tests (ui/evidence_test.go): one JSON request per
// line on stdin, one JSON answer per line on stdout, in order.
//
//   {"op":"export","export":B64,"key":B64,"log_key":B64,"subject":S|null,"salt":S|null,"saved":B64|null,
//    "witnesses":[B64...],"witnesses_required":N|null}
//   {"op":"attestation","attestation":B64,"key":B64,"subject":S|null,"salt":S|null}
//     -> {"verified":bool,"code":"ok"|reason|"usage","failed":check,"detail":text}
//   {"op":"gunzip"|"untar"|"json"|"key"|"logkey"|"bundle","data":B64}
//     -> {"code":"ok"|reason,"sha256":hex of the result (gunzip),"names":[...] (untar)}
'use strict';
const path = require('path');
const crypto = require('crypto');
require(path.join(__dirname, '..', 'static', 'verify.js'));
const V = globalThis.ShreddVerify;
const b = (s) => (s === null || s === undefined ? null : new Uint8Array(Buffer.from(s, 'base64')));

async function handle(req) {
  if (req.op === 'export') {
    const r = await V.verifyExport(b(req.export), { key: b(req.key), logKey: b(req.log_key), subject: req.subject, salt: req.salt, saved: b(req.saved),
      witnesses: (req.witnesses || []).map(b), witnessesRequired: req.witnesses_required });
    return { verified: r.verified, code: r.code, failed: r.failed, detail: r.reason };
  }
  if (req.op === 'attestation') {
    const r = await V.verifyAttestation(b(req.attestation), { key: b(req.key), subject: req.subject, salt: req.salt });
    return { verified: r.verified, code: r.code, failed: r.failed, detail: r.reason };
  }
  const S = V.strict;
  const data = b(req.data);
  try {
    switch (req.op) {
      case 'gunzip': {
        const out = S.gunzip(data);
        return { code: 'ok', sha256: crypto.createHash('sha256').update(out).digest('hex') };
      }
      case 'untar': {
        const ms = S.untar(data);
        return { code: 'ok', names: ms.map((m) => m.name + (m.dir ? '' : ':' + crypto.createHash('sha256').update(m.data).digest('hex'))) };
      }
      case 'bundle': await S.readBundle(data); return { code: 'ok' };
      case 'json': await S.checkJSON(data); return { code: 'ok' };
      case 'key': await S.checkPublicKeyFile(data); return { code: 'ok' };
      case 'logkey': await S.checkLogKeyFile(data); return { code: 'ok' };
    }
    return { code: 'harness.unknown-op' };
  } catch (e) {
    if (e && e.code) return { code: e.code, detail: e.message };
    return { code: 'harness.exception', detail: String(e && e.stack) };
  }
}

let buf = '';
let chain = Promise.resolve();
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    chain = chain.then(async () => {
      let out;
      try { out = await handle(JSON.parse(line)); } catch (e) { out = { code: 'harness.exception', detail: String(e && e.stack) }; }
      process.stdout.write(JSON.stringify(out) + '\n');
    });
  }
});
