// Witness cosignatures in the browser: the check of `shredd verify
// --witness KEY --witnesses-required K` (translog.CheckCosignatures,
// docs/transparency.md §13) on a signed checkpoint, with WebCrypto
// (Ed25519, SHA-256) and nothing else. It makes no network request. A
// classic script, like verify.js, so that a page opened from disk can load
// it.
//
// ShreddWitness.checkCosignatures(signed, witnessKeys, required) resolves
// to {ok, valid: [{witness, time}], missing: [names], invalid: [names],
// reason}: signed is the checkpoint note (string or bytes) whose log
// signature the caller has checked; witnessKeys are cosignature/v1
// verifier keys ("<name>+<key id>+<base64 of 0x04 ‖ public key>");
// required is how many valid cosignatures of them the checkpoint needs
// (default: all). A witness's line that does not verify counts as none;
// two keys with one public key count once. It rejects (throws) on a
// malformed key, count or note, with a message that names it.
(function (global) {
  'use strict';

  const utf8 = new TextEncoder();
  const ALG = 0x04;

  function b64decode(s) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new Error('not base64');
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    if (btoa(bin) !== s) throw new Error('non-canonical base64');
    return out;
  }
  function hex(b) { return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join(''); }
  function concat(...parts) {
    const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    let i = 0;
    for (const p of parts) { out.set(p, i); i += p.length; }
    return out;
  }
  function validName(n) { return n !== '' && !/[\s+]/u.test(n); }

  // parseWitnessKey reads a cosignature/v1 verifier key and checks its
  // key ID: SHA-256(name ‖ "\n" ‖ 0x04 ‖ public key)[:4].
  async function parseWitnessKey(vkey) {
    // The name and the key ID end at the first two plus signs; the
    // base64 key may hold more.
    const s = String(vkey).trim();
    const i = s.indexOf('+'), j = i < 0 ? -1 : s.indexOf('+', i + 1);
    const parts = j < 0 ? [] : [s.slice(0, i), s.slice(i + 1, j), s.slice(j + 1)];
    if (parts.length !== 3 || !validName(parts[0]) || !/^[0-9a-f]{8}$/.test(parts[1])) throw new Error('witness key: not <name>+<key id>+<key>');
    let raw;
    try { raw = b64decode(parts[2]); } catch (e) { throw new Error('witness key: ' + e.message); }
    if (raw.length !== 33 || raw[0] !== ALG) throw new Error('witness key: not a cosignature/v1 Ed25519 key (type 0x04, 32 bytes)');
    const pub = raw.slice(1);
    const id = new Uint8Array(await crypto.subtle.digest('SHA-256', concat(utf8.encode(parts[0] + '\n'), new Uint8Array([ALG]), pub))).slice(0, 4);
    if (hex(id) !== parts[1]) throw new Error('witness key: key id does not match the key');
    let key;
    try {
      key = await crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
    } catch (e) {
      throw new Error('this browser has no Ed25519 in WebCrypto');
    }
    return { name: parts[0], id, pub: parts[2], key };
  }

  // splitNote returns the note text (ending in a newline) and its
  // signature lines [{name, sig}].
  function splitNote(signed) {
    const s = typeof signed === 'string' ? signed : new TextDecoder('utf-8', { fatal: true }).decode(signed);
    const at = s.lastIndexOf('\n\n');
    if (at < 0 || !s.endsWith('\n')) throw new Error('checkpoint: not a signed note');
    const text = s.slice(0, at + 1);
    const lines = s.slice(at + 2, -1).split('\n').map((line) => {
      const m = /^\u2014 (\S+) (\S+)$/u.exec(line);
      if (!m) throw new Error('checkpoint: malformed signature line');
      return { name: m[1], b64: m[2] };
    });
    return { text, lines };
  }

  async function checkCosignatures(signed, witnessKeys, required) {
    const { text, lines } = splitNote(signed);
    const keys = [];
    for (const k of witnessKeys) {
      const w = await parseWitnessKey(k);
      if (!keys.some((x) => x.pub === w.pub)) keys.push(w);
    }
    if (required === undefined) required = keys.length;
    if (!Number.isInteger(required) || required < 0) throw new Error('witnesses required: not a count');
    const r = { ok: false, valid: [], missing: [], invalid: [], reason: '' };
    for (const w of keys) {
      // The first line of the witness's name and key ID, as note.Open.
      let sig = null;
      for (const l of lines) {
        if (l.name !== w.name) continue;
        let b;
        try { b = b64decode(l.b64); } catch (e) { continue; }
        if (b.length >= 4 && hex(b.slice(0, 4)) === hex(w.id)) { sig = b.slice(4); break; }
      }
      if (sig === null) { r.missing.push(w.name); continue; }
      let good = false, time = null;
      if (sig.length === 8 + 64) {
        const t = new DataView(sig.buffer, sig.byteOffset, 8).getBigUint64(0);
        if (t <= 0x7fffffffffffffffn) {
          const msg = utf8.encode('cosignature/v1\ntime ' + t.toString() + '\n' + text);
          good = await crypto.subtle.verify({ name: 'Ed25519' }, w.key, sig.slice(8), msg);
          time = new Date(Number(t) * 1000).toISOString().replace('.000Z', 'Z');
        }
      }
      if (good) r.valid.push({ witness: w.name, time });
      else r.invalid.push(w.name);
    }
    r.ok = r.valid.length >= required;
    if (!r.ok) {
      const why = [];
      if (r.missing.length) why.push('none from ' + r.missing.join(', '));
      if (r.invalid.length) why.push('an invalid one from ' + r.invalid.join(', '));
      r.reason = `${r.valid.length} valid of the ${required} required` + (why.length ? ` (${why.join('; ')})` : '');
    }
    return r;
  }

  global.ShreddWitness = { parseWitnessKey, checkCosignatures };
})(typeof window !== 'undefined' ? window : globalThis);
