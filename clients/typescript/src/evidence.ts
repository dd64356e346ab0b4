/**
 * The one JavaScript reader of shredd's evidence (docs/transparency.md
 * §10a, "Reading an export strictly", and §13, witness cosignatures): the
 * checks of `shredd verify` (cmd/shredd/verify.go, bundle.CheckExport,
 * attest.Open, translog) on an erasure attestation or a regulator export,
 * with the same rules, in the same order, and the same reason codes. Web
 * Crypto (Ed25519, SHA-256) and nothing else; no network request: its own
 * inflate, ustar reader, strict JSON, key files, checkpoint, proof and
 * cosignature checks.
 *
 * Two programs run this one file. The TypeScript client imports it
 * (verifyExport below; verify.verifyAttestation goes through
 * readAttestation). The page's ui/static/verify.js is generated from it
 * (npm run build:page, scripts/page.mjs): tsc's output wrapped as a classic
 * script (not a module, so that the page also works opened from disk,
 * file://, where Chromium refuses module scripts) that assigns the
 * exported `page` to globalThis.ShreddVerify and `witness` to
 * globalThis.ShreddWitness. So this file imports nothing.
 *
 * ShreddVerify.verifyExport(bytes, opts) and ShreddVerify.verifyAttestation(
 * bytes, opts) resolve to a report {verified, failed, checks:[{check, ok,
 * detail}]}; failed names the first failing check ("archive", "attestation",
 * "checkpoint", "entry entry-3-forget_committed", "entries", "subject",
 * "consistency", "keys"; for an attestation alone the names of `shredd
 * verify`: "envelope", "signature", "statement", "claim", "conditions",
 * "timeline", "key evidence", "holder acks", "residuals", "subject"; an
 * export checked with witnesses also "witnesses"). A report that fails
 * carries the spec's reason code (code) and the section of
 * docs/transparency.md that defines it (section, ShreddVerify.sectionOf);
 * an export checked with witnesses (opts.witnesses, opts.witnessesRequired)
 * carries witnessed {required, valid, missing, invalid} once its
 * checkpoint's cosignatures were checked.
 *
 * The parsed JSON values the reader walks are untyped (`any`): every field
 * is checked by hand, in the spec's order.
 */
const utf8 = new TextEncoder();
// ignoreBOM: a BOM is kept as U+FEFF, never stripped (the spec refuses it).
const strictUTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

// Constants of the formats (attest, translog, bundle).
const C = {
  payloadType: 'application/vnd.in-toto+json',
  eventPayloadType: 'application/vnd.shredd.log-event+json',
  statementType: 'https://in-toto.io/Statement/v1',
  predicateType: 'https://shredd.dev/attestation/erasure/v1',
  eventType: 'https://shredd.dev/log-event/v1',
  subjectName: 'subject-commitment',
  claim: 'cryptographically erased',
  labelCommitment: 'shredd/v1/subject-commitment',
  labelHolderAck: 'shredd/v1/holder-ack',
  conditions: ['cascade_closed', 'workers_quiesced', 'read_path_converged', 'closure_intact', 'backups_epoch'],
  rootStores: ['local', 'vault-transit', 'vault-transit-per-subject'],
  proofHeader: 'c2sp.org/tlog-proof@v1',
  consistencyHeader: 'shredd/tlog-consistency@v1',
  maxEnvelope: 64 << 20,
  maxEvent: 65535,
  maxFiles: 10000,
  maxFileSize: 64 << 20,
  maxTotal: 256 << 20,
};

// A failed check: its name (the report's) and why.
class CheckError extends Error {
  check: string;
  constructor(check: string, message: string) { super(message); this.check = check; }
}
// A format or validation error inside a check; kind is the attest error
// it mirrors (format, signature, claim, condition, timeline, key
// evidence, ack, residual, key).
class FormatError extends Error {
  kind: string;
  code: string | undefined;
  constructor(kind: string, message: string, code?: string) { super(message); this.kind = kind; this.code = code; }
}
function bad(kind: string, msg: string, code?: string): never { throw new FormatError(kind, msg, code); }

// ---- bytes ----
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64REV = new Map([...B64].map((c?: any, i?: any) => [c, i]));
function b64encode(bytes?: any): any {
  let s = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] || 0) << 8) | (bytes[i + 2] || 0);
    s += B64[n >> 18]! + B64[(n >> 12) & 63]! + (i + 1 < bytes.length ? B64[(n >> 6) & 63]! : '=') + (i + 2 < bytes.length ? B64[n & 63]! : '=');
  }
  return s;
}
// b64decode decodes padded standard base64; strict also refuses non-zero
// padding bits (Go's StdEncoding.Strict). null when malformed.
function b64decode(s?: any, strict?: any): any {
  if (typeof s !== 'string' || s.length % 4 !== 0) return null;
  const out = [];
  for (let i = 0; i < s.length; i += 4) {
    const q = s.slice(i, i + 4);
    const pad = q.endsWith('==') ? 2 : q.endsWith('=') ? 1 : 0;
    if (pad && i + 4 !== s.length) return null;
    let n = 0;
    for (let j = 0; j < 4 - pad; j++) {
      const v = B64REV.get(q[j]);
      if (v === undefined) return null;
      n |= v << (18 - 6 * j);
    }
    if (q.slice(0, 4 - pad).includes('=')) return null;
    out.push((n >> 16) & 255);
    if (pad < 2) out.push((n >> 8) & 255);
    if (pad < 1) out.push(n & 255);
    if (strict && ((pad === 2 && (n & 0xffff)) || (pad === 1 && (n & 0xff)))) return null;
  }
  return new Uint8Array(out);
}
// canonical base64: decodes and re-encodes to the same text.
function b64canon(s?: any): any {
  const b = b64decode(s, true);
  return b && b64encode(b) === s ? b : null;
}
const hex = (b?: any) => Array.from(b, (x?: any) => x.toString(16).padStart(2, '0')).join('');
function unhex(s?: any): any {
  if (typeof s !== 'string' || !/^([0-9a-fA-F]{2})*$/.test(s)) return null;
  const b = new Uint8Array(s.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(s.substr(2 * i, 2), 16);
  return b;
}
const concat = (...parts: Uint8Array[]): Uint8Array => {
  const n = parts.reduce((a?: any, p?: any) => a + p.length, 0);
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
};
const equal = (a?: any, b?: any) => a.length === b.length && a.every((x?: any, i?: any) => x === b[i]);
const bytesOf = (x?: any) => (typeof x === 'string' ? utf8.encode(x) : x);
const text = (b?: any): any => { try { return strictUTF8.decode(b); } catch (e: any) { return null; } };

// ---- WebCrypto ----
const subtle = (): any => {
  if (!globalThis.crypto || !globalThis.crypto.subtle) throw new CheckError('browser', 'WebCrypto is not available (the page needs a secure context: https, localhost or file://)');
  return globalThis.crypto.subtle;
};
async function sha256(b?: any): Promise<any> { return new Uint8Array(await subtle().digest('SHA-256', bytesOf(b))); }
async function ed25519Verify(pub?: any, sig?: any, msg?: any): Promise<any> {
  if (!pub || pub.length !== 32 || !sig || sig.length !== 64) return false;
  let key;
  try {
    key = await subtle().importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
  } catch (e: any) {
    if (e && e.name === 'NotSupportedError') throw new CheckError('browser', 'this browser has no Ed25519 in WebCrypto');
    return false; // a point that is not on the curve
  }
  return subtle().verify({ name: 'Ed25519' }, key, sig, bytesOf(msg));
}

// ---- Go's encoding/json, for the canonical-form checks ----
// goString is json.Marshal of a Go string: \" \\ \b \f \n \r \t, other
// control characters as \u00xx, <, > and & as \u003c \u003e \u0026, and
// U+2028, U+2029 escaped.
function goString(s?: any): any {
  if (typeof s !== 'string') bad('format', 'a string field holds another type');
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    switch (ch) {
      case '"': out += '\\"'; continue;
      case '\\': out += '\\\\'; continue;
      case '\b': out += '\\b'; continue;
      case '\f': out += '\\f'; continue;
      case '\n': out += '\\n'; continue;
      case '\r': out += '\\r'; continue;
      case '\t': out += '\\t'; continue;
      case '<': case '>': case '&': case '\u2028': case '\u2029':
        out += '\\u' + c.toString(16).padStart(4, '0'); continue;
    }
    if (c < 0x20) out += '\\u' + c.toString(16).padStart(4, '0');
    else if (c >= 0xd800 && c <= 0xdfff) out += '\ufffd'; // a lone surrogate: Go writes U+FFFD
    else out += ch;
  }
  return out + '"';
}
const isObj = (v?: any) => v !== null && typeof v === 'object' && !Array.isArray(v);
function goInt(v?: any, min?: any, max?: any): any {
  if (v === null || v === undefined) return '0';
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) bad('format', 'an integer field holds another value');
  return String(v);
}
const int64 = (v?: any) => goInt(v, -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
const uint32 = (v?: any) => goInt(v, 0, 4294967295);
function goBool(v?: any): any {
  if (v === null || v === undefined) return 'false';
  if (typeof v !== 'boolean') bad('format', 'a boolean field holds another type');
  return String(v);
}
const goStr = (v?: any) => (v === null || v === undefined ? '""' : goString(v));
// goBytes: a []byte field (standard base64); null stays null.
function goBytes(v?: any): any {
  if (v === null || v === undefined) return 'null';
  const b = typeof v === 'string' ? b64decode(v, false) : null;
  if (!b) bad('format', 'a base64 field is not base64');
  return '"' + b64encode(b) + '"';
}
function goList(v?: any, item?: any, orEmpty?: any): any {
  if (v === null || v === undefined) return orEmpty ? '[]' : 'null';
  if (!Array.isArray(v)) bad('format', 'a list field holds another type');
  return '[' + v.map(item).join(',') + ']';
}
const goObj = (v?: any) => { if (v !== null && v !== undefined && !isObj(v)) bad('format', 'an object field holds another type'); return v || {}; };
// RFC 3339 time as Go's time.Time marshals it (RFC3339Nano); parseTime
// returns {ns: BigInt since 1970 UTC, utc: bool, canon: the Go spelling}.
const isLeap = (y?: any) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;
// daysFromCivil: days since 1970-01-01 of a proleptic Gregorian date,
// for every year 0000-9999 (Date.UTC reads years 0-99 as 1900-1999).
function daysFromCivil(y?: any, m?: any, d?: any): any {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400), yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  return era * 146097 + yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy - 719468;
}
// Go's zero time.Time, 0001-01-01T00:00:00Z, in ns since 1970.
const GO_ZERO_NS = -62135596800n * 1000000000n;
// RFC 3339 time as Go's time.Time marshals it (RFC3339Nano); parseTime
// returns {ns: BigInt since 1970 UTC, utc: bool, zero: Go's IsZero,
// canon: the Go spelling}.
function parseTime(v?: any): any {
  if (v === null || v === undefined) return { ns: GO_ZERO_NS, utc: true, zero: true, canon: '"0001-01-01T00:00:00Z"' };
  if (typeof v !== 'string') bad('format', 'a time field holds another type');
  const m = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/.exec(v);
  if (!m) bad('format', 'a time is not RFC 3339');
  const [Y, Mo, D, h, mi, s] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (Mo < 1 || Mo > 12) bad('format', 'a time is out of range');
  const dim = [31, isLeap(Y) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][Mo - 1]!;
  if (D < 1 || D > dim || h > 23 || mi > 59 || s > 59) bad('format', 'a time is out of range');
  let frac = (m[7] || '').slice(1);
  const zone = m[8]!;
  let off = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const oh = Number(zone.slice(1, 3)), om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) bad('format', 'a time zone is out of range');
    off = (zone[0] === '-' ? -1 : 1) * (oh * 60 + om) * 60;
  }
  const secs = BigInt(daysFromCivil(Y, Mo, D)) * 86400n + BigInt(h * 3600 + mi * 60 + s) - BigInt(off);
  const ns = secs * 1000000000n + BigInt((frac || '0').padEnd(9, '0'));
  frac = frac.replace(/0+$/, '');
  const canon = '"' + v.slice(0, 19).replace('t', 'T') + (frac ? '.' + frac : '') + (off === 0 ? 'Z' : zone) + '"';
  return { ns, utc: zone === 'Z' || zone === 'z' || off === 0, offset: off, zero: ns === GO_ZERO_NS, canon };
}
// compact is encoding/json.Compact: the text without insignificant
// whitespace, string contents untouched.
function compact(s?: any): any {
  let out = '', inStr = false, esc = false;
  for (const ch of s) {
    if (inStr) {
      out += ch;
      if (esc) esc = false; else if (ch === '\\') esc = true; else if (ch === '"') inStr = false;
    } else if (ch === '"') { inStr = true; out += ch; } else if (!' \t\r\n'.includes(ch)) out += ch;
  }
  return out;
}
// parseJSON reads JSON after checkJSON: JSON.parse then sees no
// duplicate key, no integer it cannot hold exactly, nothing it would
// read otherwise than Go.
function parseJSON(bytes?: any, what?: any): any {
  const s = checkJSON(bytes);
  try { return { value: JSON.parse(s), text: s }; } catch (e: any) { refuse('json.syntax', what + ' is not JSON'); }
}
// ---- the strict reader (docs/transparency.md, "Reading an export
// strictly"): the same rules, in the same order, with the same reason
// codes as bundle/strict.go, so that the page and `shredd verify` never
// disagree on which bytes they read. ----
// A refusal: its reason code (the spec's) and why.
class Refusal extends FormatError {
  constructor(code: string, message: string) { super('format', message, code); }
}
function refuse(code: string, msg: string): never { throw new Refusal(code, msg); }
const MAX_SAFE = 9007199254740991;
const hasBOM = (b?: any) => b.length >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;
const validUTF8 = (b?: any) => text(b) !== null;
// checkText: every text file is UTF-8 without a BOM.
function checkText(b?: any): any {
  if (hasBOM(b)) refuse('text.bom', 'a UTF-8 BOM');
  if (!validUTF8(b)) refuse('text.utf8', 'not UTF-8');
}

// -- gzip (RFC 1952), exactly one member --
const LBASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEXT = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DBASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
const DEXT = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
const CLORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];
function inflateErr(): never { return refuse('gzip.deflate', 'bad or cut deflate data'); }
// huffman builds a canonical decoding table; like Go's compress/flate
// it refuses over-subscribed and incomplete codes, but for one code of
// length 1; an empty code is built (it fails when used).
function huffman(lengths?: any): any {
  const count = new Array(16).fill(0);
  let max = 0;
  for (const l of lengths) { if (l) { count[l]++; if (l > max) max = l; } }
  if (max === 0) return { count, symbol: [] };
  let code = 0;
  for (let i = 1; i <= max; i++) code = (code << 1) + count[i];
  if (code !== (1 << max) && !(code === 1 && max === 1)) return null;
  const offs = new Array(16).fill(0);
  for (let i = 1; i < 16; i++) offs[i] = offs[i - 1] + count[i - 1];
  const symbol = new Array(lengths.length);
  lengths.forEach((l?: any, s?: any) => { if (l) symbol[offs[l]++] = s; });
  return { count, symbol };
}
const FIXED_LIT = huffman(Array.from({ length: 288 }, (_?: any, i?: any) => (i < 144 ? 8 : i < 256 ? 9 : i < 280 ? 7 : 8)));
const FIXED_DIST = huffman(new Array(32).fill(5));
// inflateRaw decodes one deflate stream from src[start:], reading no
// byte past its end; returns {out, end}.
function inflateRaw(src?: any, start?: any, maxOut?: any): any {
  let pos = start, bitbuf = 0, bitcnt = 0;
  let out = new Uint8Array(Math.min(Math.max(1024, src.length * 4), maxOut)), n = 0;
  const need = (k?: any) => {
    while (bitcnt < k) {
      if (pos >= src.length) inflateErr();
      bitbuf |= src[pos++] << bitcnt; bitcnt += 8;
    }
  };
  const bits = (k?: any) => { need(k); const v = bitbuf & ((1 << k) - 1); bitbuf >>>= k; bitcnt -= k; return v; };
  // room makes space for k more bytes; more than maxOut in all is
  // gzip.too-large (what Go's reader says once it has read maxOut+1).
  const room = (k?: any) => {
    if (n + k > maxOut) refuse('gzip.too-large', 'over ' + maxOut + ' bytes uncompressed');
    if (n + k > out.length) {
      const o = new Uint8Array(Math.min(Math.max(out.length * 2, n + k), maxOut)); o.set(out.subarray(0, n)); out = o;
    }
  };
  const put = (b?: any) => { room(1); out[n++] = b; };
  const decode = (h?: any) => {
    let code = 0, first = 0, index = 0;
    for (let len = 1; len < 16; len++) {
      code |= bits(1);
      const c = h.count[len];
      if (code - c < first) return h.symbol[index + (code - first)];
      index += c; first += c; first <<= 1; code <<= 1;
    }
    return inflateErr();
  };
  let last;
  do {
    last = bits(1);
    const type = bits(2);
    if (type === 0) {
      bitbuf = 0; bitcnt = 0;
      if (pos + 4 > src.length) inflateErr();
      const len = src[pos] | (src[pos + 1] << 8), nlen = src[pos + 2] | (src[pos + 3] << 8);
      pos += 4;
      if (len !== (~nlen & 0xffff)) inflateErr();
      if (pos + len > src.length) inflateErr();
      room(len);
      out.set(src.subarray(pos, pos + len), n);
      n += len; pos += len;
      continue;
    }
    let lit, dist;
    if (type === 1) { lit = FIXED_LIT; dist = FIXED_DIST; } else if (type === 2) {
      const nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4;
      if (nlen > 286 || ndist > 30) inflateErr();
      const cl = new Array(19).fill(0);
      for (let i = 0; i < ncode; i++) cl[CLORDER[i]!] = bits(3);
      const ch = huffman(cl);
      if (!ch) inflateErr();
      const lengths = [];
      while (lengths.length < nlen + ndist) {
        const sym = decode(ch);
        if (sym < 16) { lengths.push(sym); continue; }
        let rep, v = 0;
        if (sym === 16) {
          if (lengths.length === 0) inflateErr();
          v = lengths[lengths.length - 1]; rep = 3 + bits(2);
        } else if (sym === 17) rep = 3 + bits(3);
        else rep = 11 + bits(7);
        if (lengths.length + rep > nlen + ndist) inflateErr();
        for (let i = 0; i < rep; i++) lengths.push(v);
      }
      lit = huffman(lengths.slice(0, nlen)); dist = huffman(lengths.slice(nlen));
      if (!lit || !dist) inflateErr();
    } else inflateErr();
    for (;;) {
      let sym = decode(lit);
      if (sym < 256) { put(sym); continue; }
      if (sym === 256) break;
      sym -= 257;
      if (sym >= 29) inflateErr();
      const len = LBASE[sym]! + bits(LEXT[sym]!);
      const ds = decode(dist);
      if (ds >= 30) inflateErr();
      const d = DBASE[ds]! + bits(DEXT[ds]!);
      if (d > n) inflateErr();
      room(len);
      // LZ77: the copy repeats with period d. copyWithin from the start
      // of the period, never overlapping: d bytes, then 2d, 4d...
      const from = n - d;
      for (let left = len; left > 0;) {
        const k = Math.min(n - from, left);
        out.copyWithin(n, from, from + k);
        n += k; left -= k;
      }
    }
  } while (!last);
  return { out: out.subarray(0, n), end: pos };
}
let CRC_TABLE: Int32Array | null = null;
function crc32(b?: any): any {
  if (!CRC_TABLE) {
    CRC_TABLE = new Int32Array(256);
    for (let i = 0; i < 256; i++) { let c = i; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; CRC_TABLE[i] = c; }
  }
  let c = -1;
  for (let i = 0; i < b.length; i++) c = CRC_TABLE![(c ^ b[i]) & 0xff]! ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
const u32 = (b?: any, i?: any) => (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24)) >>> 0;
// gunzipStrict is bundle.Gunzip.
function gunzipStrict(b?: any, maxOut?: any): any {
  if (b.length < 2 || b[0] !== 0x1f || b[1] !== 0x8b) refuse('gzip.header', 'not a gzip file');
  if (b.length < 10) refuse('gzip.truncated', 'gzip header cut');
  if (b[2] !== 8 || (b[3] & ~0x08) !== 0) refuse('gzip.header', 'gzip method or flags other than deflate and FNAME');
  let off = 10;
  if (b[3] & 0x08) {
    const i = b.indexOf(0, off);
    if (i < 0) refuse('gzip.truncated', 'gzip file name cut');
    off = i + 1;
  }
  const { out, end } = inflateRaw(b, off, maxOut);
  const rest = b.subarray(end);
  if (rest.length < 8) refuse('gzip.truncated', 'gzip trailer cut');
  if (u32(rest, 0) !== crc32(out)) refuse('gzip.crc', 'gzip CRC-32 does not match');
  if (u32(rest, 4) !== out.length >>> 0) refuse('gzip.size', 'gzip ISIZE does not match');
  if (rest.length > 8) {
    if (rest.length >= 10 && rest[8] === 0x1f && rest[9] === 0x8b) refuse('gzip.multi-member', 'a second gzip member');
    refuse('gzip.trailing', 'data after the gzip member');
  }
  return out;
}

// -- tar: POSIX ustar only (bundle.Untar) --
const allZero = (b?: any) => b.every((x?: any) => x === 0);
function octalField(f?: any): any {
  let i = 0;
  while (i < f.length && f[i] >= 0x30 && f[i] <= 0x37) i++;
  if (i === 0 || i === f.length) return null;
  for (let j = i; j < f.length; j++) if (f[j] !== 0 && f[j] !== 0x20) return null;
  return parseInt(String.fromCharCode(...f.subarray(0, i)), 8);
}
// cField: the bytes before the first NUL; null when bytes other than NUL follow it.
function cField(f?: any): any {
  const i = f.indexOf(0);
  if (i < 0) return f;
  return allZero(f.subarray(i)) ? f.subarray(0, i) : null;
}
const bstr = (a?: any) => String.fromCharCode(...a);
function untarStrict(t?: any): any {
  const out = [];
  const seen = new Set();
  let off = 0;
  for (;;) {
    if (off === t.length) refuse('tar.end', 'no end-of-archive blocks');
    if (off + 512 > t.length) refuse('tar.truncated', 'tar header cut');
    const h = t.subarray(off, off + 512);
    if (allZero(h)) {
      if (off + 1024 > t.length || !allZero(t.subarray(off + 512, off + 1024))) refuse('tar.end', 'one end-of-archive block, not two');
      if (!allZero(t.subarray(off + 1024))) refuse('tar.trailing', 'data after the end-of-archive blocks');
      return out;
    }
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
    const chk = octalField(h.subarray(148, 156));
    if (chk === null || chk !== sum) refuse('tar.checksum', 'tar header checksum');
    if (bstr(h.subarray(257, 263)) === 'ustar\0' && bstr(h.subarray(263, 265)) === '00') { /* POSIX ustar */ } else if (bstr(h.subarray(257, 265)) === 'ustar  \0') refuse('tar.gnu', 'a GNU tar header');
    else refuse('tar.magic', 'not a POSIX ustar header');
    const typ = String.fromCharCode(h[156]);
    if (typ === '0' || typ === '\0' || typ === '5') { /* a file or a directory */ } else if (typ === 'x' || typ === 'g') refuse('tar.pax', 'a PAX extended header');
    else if ('LKSDMNV'.includes(typ)) refuse('tar.gnu', 'a GNU extension header');
    else refuse('tar.type', 'a member that is not a regular file or directory');
    const nums = [];
    for (const [a, l] of [[100, 8], [108, 8], [116, 8], [124, 12], [136, 12]] as [number, number][]) {
      const f = h.subarray(a, a + l);
      if (f[0] & 0x80) refuse('tar.base256', 'a base-256 numeric field');
      const v = octalField(f);
      if (v === null) refuse('tar.header', 'a malformed numeric field');
      nums.push(v);
    }
    const size = nums[3];
    if (!allZero(h.subarray(157, 257))) refuse('tar.header', 'a link name on a file');
    const nm = cField(h.subarray(0, 100)), px = cField(h.subarray(345, 500));
    if (nm === null || px === null) refuse('tar.path', 'a NUL inside a name');
    const nameBytes = px.length ? concat(px, new Uint8Array([0x2f]), nm) : nm;
    const name = text(nameBytes);
    if (name === null || name === '' || name[0] === '/' || name.replace(/\/$/, '').split('/').includes('..')) refuse('tar.path', 'an empty, absolute, non-UTF-8 or .. path');
    if (typ === '5' && size !== 0) refuse('tar.header', 'a directory with data');
    if (size > C.maxFileSize) refuse('bundle.size', 'a file over ' + C.maxFileSize + ' bytes');
    const end = off + 512 + size, pad = (512 - (size % 512)) % 512;
    if (end + pad > t.length) refuse('tar.truncated', 'tar data cut');
    if (seen.has(name)) refuse('tar.duplicate', 'a name twice');
    seen.add(name);
    if (out.length === C.maxFiles) refuse('bundle.size', 'more than ' + C.maxFiles + ' members');
    out.push({ name, dir: typ === '5', data: t.subarray(off + 512, end) });
    off = end + pad;
  }
}

// -- JSON (bundle.CheckJSON) --
function checkJSON(b?: any): any {
  if (hasBOM(b)) refuse('json.bom', 'a UTF-8 BOM before JSON');
  const s = text(b);
  if (s === null) refuse('json.utf8', 'JSON is not UTF-8');
  let i = 0;
  const syntax = (): any => refuse('json.syntax', 'JSON syntax error at ' + i);
  const ws = (): any => { while (i < s.length && (s[i] === ' ' || s[i] === '\t' || s[i] === '\n' || s[i] === '\r')) i++; };
  const digits = (): any => { const a = i; while (i < s.length && s[i] >= '0' && s[i] <= '9') i++; return i - a; };
  const hex4 = (): any => {
    if (i + 4 > s.length || !/^[0-9a-fA-F]{4}$/.test(s.slice(i, i + 4))) syntax();
    const v = parseInt(s.slice(i, i + 4), 16); i += 4; return v;
  };
  const str = (): any => {
    i++;
    let out = '';
    for (;;) {
      if (i >= s.length) syntax();
      const c = s[i];
      if (c === '"') { i++; return out; }
      if (c.charCodeAt(0) < 0x20) syntax();
      if (c === '\\') {
        if (i + 1 >= s.length) syntax();
        const e = s[i + 1]; i += 2;
        const simple = ({ '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' } as Record<string, string>)[e];
        if (simple !== undefined) { out += simple; continue; }
        if (e !== 'u') syntax();
        let r = hex4();
        if (r >= 0xdc00 && r <= 0xdfff) refuse('json.utf8', 'a lone surrogate escape');
        if (r >= 0xd800 && r <= 0xdbff) {
          if (s[i] !== '\\' || s[i + 1] !== 'u') refuse('json.utf8', 'a lone surrogate escape');
          i += 2;
          const lo = hex4();
          if (lo < 0xdc00 || lo > 0xdfff) refuse('json.utf8', 'a lone surrogate escape');
          out += String.fromCharCode(r, lo);
          continue;
        }
        out += String.fromCharCode(r);
        continue;
      }
      out += c; i++;
    }
  };
  const value = (depth?: any) => {
    if (i >= s.length) syntax();
    const c = s[i];
    if (c === '{') {
      if (depth >= 64) syntax();
      i++; ws();
      if (s[i] === '}') { i++; return; }
      const keys = new Set();
      for (;;) {
        if (s[i] !== '"') syntax();
        const k = str();
        if (keys.has(k)) refuse('json.duplicate-key', 'a duplicate JSON key');
        keys.add(k);
        ws();
        if (s[i] !== ':') syntax();
        i++; ws();
        value(depth + 1);
        ws();
        if (s[i] === ',') { i++; ws(); continue; }
        if (s[i] === '}') { i++; return; }
        syntax();
      }
    }
    if (c === '[') {
      if (depth >= 64) syntax();
      i++; ws();
      if (s[i] === ']') { i++; return; }
      for (;;) {
        value(depth + 1);
        ws();
        if (s[i] === ',') { i++; ws(); continue; }
        if (s[i] === ']') { i++; return; }
        syntax();
      }
    }
    if (c === '"') { str(); return; }
    for (const w of ['true', 'false', 'null']) if (c === w[0]) { if (s.slice(i, i + w.length) !== w) syntax(); i += w.length; return; }
    if (c === '-' || (c >= '0' && c <= '9')) {
      if (s[i] === '-') i++;
      const ds = i;
      if (s[i] === '0') i++; else if (digits() === 0) syntax();
      const intPart = s.slice(ds, i);
      let frac = false;
      if (s[i] === '.') { i++; if (digits() === 0) syntax(); frac = true; }
      if (s[i] === 'e' || s[i] === 'E') { i++; if (s[i] === '+' || s[i] === '-') i++; if (digits() === 0) syntax(); frac = true; }
      if (frac) refuse('json.number', 'a number that is not an integer');
      if (intPart.length > 16 || Number(intPart) > MAX_SAFE) refuse('json.number', 'an integer beyond 2^53-1');
      return;
    }
    syntax();
  };
  ws();
  value(0);
  ws();
  if (i !== s.length) refuse('json.trailing', 'data after the JSON value');
  return s;
}

// -- key files (bundle.CheckPublicKeyFile, CheckLogKeyFile) --
const PEM_BEGIN = '-----BEGIN PUBLIC KEY-----\n';
function checkPublicKeyFile(b?: any): any {
  checkText(b);
  const s = text(b);
  if (!s.startsWith(PEM_BEGIN)) {
    if (s.indexOf('-----BEGIN PUBLIC KEY-----') > 0) refuse('key.leading', 'data before the PEM block');
    refuse('key.format', 'not a PEM PUBLIC KEY');
  }
  const body0 = s.slice(PEM_BEGIN.length);
  const e = body0.indexOf('-----END PUBLIC KEY-----');
  if (e < 0 || !body0.slice(0, e).endsWith('\n')) refuse('key.format', 'no PEM end line');
  const body = body0.slice(0, e), rest = body0.slice(e + '-----END PUBLIC KEY-----'.length);
  if (rest !== '\n') {
    if (rest === '') refuse('key.format', 'no newline after the PEM end line');
    refuse('key.trailing', 'data after the PEM block');
  }
  const der = b64decode(body.replace(/\n/g, ''), true);
  const wrap = (x?: any) => { let o = ''; while (x.length > 64) { o += x.slice(0, 64) + '\n'; x = x.slice(64); } return o + x + '\n'; };
  if (!der || der.length !== 44 || !equal(der.slice(0, 12), SPKI_ED25519) || wrap(b64encode(der)) !== body) refuse('key.format', 'not an Ed25519 public key in canonical PEM');
  return der.slice(12);
}
function checkLogKeyFile(b?: any): any {
  checkText(b);
  let s = text(b);
  if (s.endsWith('\n')) s = s.slice(0, -1);
  if (s === '' || /[\n\r\t ]/.test(s)) refuse('logkey.format', 'not one line');
  return s;
}


// ---- DSSE ----
export function pae(type?: any, payload?: any): any {
  const t = utf8.encode(type);
  return concat(utf8.encode('DSSEv1 ' + t.length + ' '), t, utf8.encode(' ' + payload.length + ' '), payload);
}
async function keyID(pub?: any): Promise<any> { return hex(await sha256(pub)); }
// verifyEnvelope is attest.verifyEnvelope: the envelope canonical, of
// payloadType, one signature by pub's key id, valid over PAE.
async function verifyEnvelope(bytes?: any, pub?: any, payloadType?: any): Promise<any> {
  if (bytes.length > C.maxEnvelope) bad('format', 'envelope over ' + C.maxEnvelope + ' bytes');
  const { value: env, text: src } = parseJSON(bytes, 'the envelope');
  if (!isObj(env)) refuse('json.schema', 'envelope: not a JSON object');
  const sigs = env.signatures;
  let canon;
  try {
    canon = '{"payloadType":' + goStr(env.payloadType) + ',"payload":' + goBytes(env.payload) + ',"signatures":' +
      goList(sigs, (s?: any) => { const o = goObj(s); return '{"keyid":' + goStr(o.keyid) + ',"sig":' + goBytes(o.sig) + '}'; }) + '}';
  } catch (e: any) { if (e instanceof FormatError) refuse('json.schema', 'envelope: ' + e.message); throw e; }
  if (canon !== compact(src)) refuse('json.schema', 'envelope is not in canonical form');
  if (env.payloadType !== payloadType) bad('format', 'payloadType is ' + JSON.stringify(String(env.payloadType).slice(0, 64)) + ', want "' + payloadType + '"', 'envelope.format');
  if (!Array.isArray(sigs) || sigs.length !== 1) bad('format', (Array.isArray(sigs) ? sigs.length : 0) + ' signatures, want exactly 1', 'envelope.format');
  const want = await keyID(pub);
  if (sigs[0].keyid !== want) bad('signature', 'signed by key id ' + JSON.stringify(String(sigs[0].keyid).slice(0, 64)) + ', not by the given key (key id ' + want + ')', 'envelope.signature');
  const payload = b64decode(env.payload, false);
  const sig = b64decode(sigs[0].sig, false);
  if (!(await ed25519Verify(pub, sig, pae(env.payloadType, payload)))) bad('signature', 'the signature does not verify', 'envelope.signature');
  return payload;
}

// ---- keys ----
const SPKI_ED25519 = unhex('302a300506032b6570032100');
// parsePublicKey reads a PEM "PUBLIC KEY" (PKIX) Ed25519 key, alone in
// the file but for whitespace (attest.ParsePublicKey).
function parsePublicKey(pem?: any): any {
  const s = typeof pem === 'string' ? pem : text(pem);
  const m = s && /^\s*-----BEGIN PUBLIC KEY-----\r?\n([A-Za-z0-9+/=\r\n]+)-----END PUBLIC KEY-----\s*$/.exec(s);
  if (!m) bad('key', 'not one PEM "PUBLIC KEY" block');
  const der = b64decode(m[1]!.replace(/[\r\n]/g, ''), false);
  if (!der || der.length !== 44 || !equal(der.slice(0, 12), SPKI_ED25519)) bad('key', 'not an Ed25519 public key');
  return der.slice(12);
}
// validNoteName is golang.org/x/mod/sumdb/note's isValidName: no '+'
// and no space as Go's unicode.IsSpace has it (which is not JavaScript's
// \s: U+0085 is a space for Go, U+FEFF is not).
const validNoteName = (n?: any) => n !== '' && !/[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000+]/.test(n);
// parseVerifierKey reads a signed-note verifier key
// "<name>+<hash>+<base64(0x01 || key)>" (golang.org/x/mod/sumdb/note).
async function parseVerifierKey(vkey?: any): Promise<any> {
  const s = (typeof vkey === 'string' ? vkey : text(vkey) || '').trim();
  // Split at the first two '+' only: the base64 key may hold more.
  const i = s.indexOf('+'), j = i < 0 ? -1 : s.indexOf('+', i + 1);
  const parts: any[] = i < 0 || j < 0 ? [] : [s.slice(0, i), s.slice(i + 1, j), s.slice(j + 1)];
  if (parts.length !== 3 || !validNoteName(parts[0]) || !/^[0-9a-fA-F]{8}$/.test(parts[1])) bad('key', 'malformed verifier key');
  const key = b64decode(parts[2], false);
  if (!key || key.length !== 33 || key[0] !== 1) bad('key', 'malformed verifier key');
  const h = await sha256(concat(utf8.encode(parts[0] + '\n'), key));
  if (hex(h.slice(0, 4)) !== parts[1].toLowerCase()) bad('key', 'verifier key hash mismatch');
  return { name: parts[0], hash: parts[1].toLowerCase(), pub: key.slice(1) };
}

// ---- signed notes and checkpoints (translog) ----
// openNote is note.Open with one known verifier: the text and whether
// the verifier's signature is on it (throws on malformed notes and bad
// signatures; unverified when the verifier did not sign).
async function openNote(bytes?: any, v?: any): Promise<any> {
  const s = text(bytes);
  if (s === null || /[\u0000-\u0009\u000b-\u001f]/.test(s)) bad('format', 'malformed note');
  const split = s.lastIndexOf('\n\n');
  if (split < 0) bad('format', 'malformed note');
  const noteText = s.slice(0, split + 1);
  let sigs = s.slice(split + 2);
  if (sigs === '' || !sigs.endsWith('\n')) bad('format', 'malformed note');
  let verified = false, n = 0;
  const seen = new Set();
  for (const line of sigs.slice(0, -1).split('\n')) {
    if (!line.startsWith('\u2014 ')) bad('format', 'malformed note');
    const rest = line.slice(2);
    const sp = rest.indexOf(' ');
    const name = sp < 0 ? rest : rest.slice(0, sp);
    const b = sp < 0 ? '' : rest.slice(sp + 1);
    const sig = b64decode(b, false);
    if (!sig || !validNoteName(name) || b === '' || sig.length < 5) bad('format', 'malformed note');
    if (++n > 100) bad('format', 'malformed note');
    const h = hex(sig.slice(0, 4));
    if (name !== v.name || h !== v.hash || seen.has(h)) continue;
    seen.add(h);
    if (!(await ed25519Verify(v.pub, sig.slice(4), utf8.encode(noteText)))) bad('verify', 'invalid signature for key ' + name);
    verified = true;
  }
  if (!verified) bad('verify', 'note has no verifiable signature');
  return noteText;
}
// decimal: no sign, no leading zero, at most 2^53-1 (the spec's bound).
const decimal = (s?: any) => (/^(0|[1-9][0-9]{0,15})$/.test(s) && Number(s) <= MAX_SAFE ? Number(s) : null);
function parseHash(s?: any): any { const b = b64canon(s); return b && b.length === 32 ? b : null; }
function parseCheckpoint(t?: any): any {
  if (!t.endsWith('\n')) bad('format', 'checkpoint: no final newline');
  const lines = t.split('\n');
  if (lines.length < 4) bad('format', 'checkpoint: fewer than three lines');
  const size = decimal(lines[1]);
  const hash = parseHash(lines[2]);
  if (lines[0] === '' || size === null || !hash) bad('format', 'malformed checkpoint');
  const ext = lines.slice(3, -1);
  if (ext.some((l?: any) => l === '')) bad('format', 'checkpoint: empty extension line');
  return { origin: lines[0], size, hash };
}
// openCheckpoint is translog.OpenCheckpoint.
// With codes {format, signature, origin}, it throws Refusals with the
// spec's reason codes (bundle.openCheckpoint).
async function openCheckpoint(bytes?: any, v?: any, codes?: any): Promise<any> {
  if (!codes) {
    const c = parseCheckpoint(await openNote(bytes, v));
    if (c.origin !== v.name) bad('verify', 'origin ' + JSON.stringify(c.origin) + ' signed by key ' + JSON.stringify(v.name));
    return c;
  }
  checkText(bytes);
  let noteText;
  try { noteText = await openNote(bytes, v); } catch (e: any) {
    if (e instanceof FormatError) refuse(e.kind === 'verify' ? codes.signature : codes.format, (e.kind === 'verify' ? 'verification failed: ' : '') + e.message);
    throw e;
  }
  let c;
  try { c = parseCheckpoint(noteText); } catch (e: any) { if (e instanceof FormatError) refuse(codes.format, 'malformed checkpoint'); throw e; }
  if (c.origin !== v.name) refuse(codes.origin, 'verification failed: origin ' + JSON.stringify(c.origin) + ' signed by key ' + JSON.stringify(v.name));
  return c;
}
// parseProof is translog.ParseProof.
function parseProof(bytes?: any): any {
  let rest = bytes;
  const next = (): any => {
    const i = rest.indexOf(10);
    if (i < 0) return null;
    const line = text(rest.slice(0, i));
    rest = rest.slice(i + 1);
    return line === null ? '\u0000' : line;
  };
  let line = next();
  if (line !== C.proofHeader) bad('format', 'first line is not "' + C.proofHeader + '"');
  if ((line = next()) === null) bad('format', 'truncated');
  if (line.startsWith('extra ')) {
    const e = b64canon(line.slice(6));
    if (!e || e.length === 0) bad('format', 'extra: not non-empty base64');
    if ((line = next()) === null) bad('format', 'truncated');
  }
  if (!line.startsWith('index ')) bad('format', 'no index line');
  const index = decimal(line.slice(6));
  if (index === null) bad('format', 'index: not a decimal');
  const hashes = [];
  for (;;) {
    if ((line = next()) === null) bad('format', 'truncated');
    if (line === '') break;
    const h = parseHash(line);
    if (!h) bad('format', 'hash ' + hashes.length + ': malformed');
    if (hashes.length === 63) bad('format', 'more than 63 hashes');
    hashes.push(h);
  }
  const rt = text(rest);
  const cut = rt === null ? -1 : rt.indexOf('\n\n');
  if (cut < 0) bad('format', 'checkpoint has no signature block');
  parseCheckpoint(rt.slice(0, cut) + '\n');
  return { index, hashes, checkpoint: rest };
}
// RFC 6962 hashing.
const leafHash = (data?: any) => sha256(concat(new Uint8Array([0]), data));
const nodeHash = (l?: any, r?: any) => sha256(concat(new Uint8Array([1]), l, r));
const half = (n?: any) => Math.floor(n / 2);
const odd = (n?: any) => n % 2 === 1;
// checkInclusion is RFC 9162 §2.1.3.2 (tlog.CheckRecord).
async function checkInclusion(path?: any, size?: any, root?: any, index?: any, leaf?: any): Promise<any> {
  if (index < 0 || index >= size) return false;
  let fn = index, sn = size - 1, r = leaf;
  for (const p of path) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      r = await nodeHash(p, r);
      if (!odd(fn)) while (!odd(fn) && fn !== 0) { fn = half(fn); sn = half(sn); }
    } else {
      r = await nodeHash(r, p);
    }
    fn = half(fn); sn = half(sn);
  }
  return sn === 0 && equal(r, root);
}
// checkConsistency is RFC 9162 §2.1.4.2 (tlog.CheckTree), for
// 0 < old < new.
async function checkConsistency(proof?: any, oldSize?: any, oldRoot?: any, newSize?: any, newRoot?: any): Promise<any> {
  if (proof.length === 0) return false;
  let p = proof;
  if (Number.isInteger(Math.log2(oldSize))) p = [oldRoot, ...proof]; // old is a power of two
  let fn = oldSize - 1, sn = newSize - 1;
  while (odd(fn)) { fn = half(fn); sn = half(sn); }
  let fr = p[0], sr = p[0];
  for (const c of p.slice(1)) {
    if (sn === 0) return false;
    if (odd(fn) || fn === sn) {
      fr = await nodeHash(c, fr); sr = await nodeHash(c, sr);
      if (!odd(fn)) while (!odd(fn) && fn !== 0) { fn = half(fn); sn = half(sn); }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn = half(fn); sn = half(sn);
  }
  return sn === 0 && equal(fr, oldRoot) && equal(sr, newRoot);
}
// checkProof is translog.CheckProof.
async function checkProof(proofBytes?: any, entry?: any, v?: any): Promise<any> {
  const p = parseProof(proofBytes);
  const c = await openCheckpoint(p.checkpoint, v);
  if (p.index >= c.size) bad('verify', 'index ' + p.index + ' beyond tree size ' + c.size);
  if (!(await checkInclusion(p.hashes, c.size, c.hash, p.index, await leafHash(entry)))) {
    bad('verify', 'entry ' + p.index + ' not in tree ' + c.size);
  }
  return c;
}
function parseConsistency(bytes?: any): any {
  const t = text(bytes);
  if (t === null || !t.endsWith('\n')) bad('format', 'no final newline');
  const lines = t.slice(0, -1).split('\n');
  if (lines.length < 3 || lines[0] !== C.consistencyHeader) bad('format', 'no "' + C.consistencyHeader + '" header with old and new lines');
  const o = lines[1].startsWith('old ') ? decimal(lines[1].slice(4)) : null;
  const n = lines[2].startsWith('new ') ? decimal(lines[2].slice(4)) : null;
  if (o === null || n === null || o > n) bad('format', 'malformed sizes');
  if (lines.length - 3 > 126) bad('format', 'too many hashes');
  const hashes = lines.slice(3).map((l?: any, i?: any) => parseHash(l) || bad('format', 'hash ' + i + ': malformed'));
  return { old: o, new: n, hashes };
}

// ---- the attestation (attest.Open, ParseStatement, Validate) ----
const validID = (s?: any) => typeof s === 'string' && s.length > 0 && s.length <= 256 && /^[\x21-\x7e]+$/.test(s);
const validCommitment = (s?: any) => typeof s === 'string' && /^[0-9a-f]{64}$/.test(s);
function marshalStatement(st?: any): any {
  const o = goObj(st);
  const p = goObj(o.predicate);
  const tl = goObj(p.timeline);
  const ke = goObj(p.key_evidence);
  const subj = (d?: any) => {
    const x = goObj(d);
    let dig = 'null';
    if (x.digest !== null && x.digest !== undefined) {
      const m = goObj(x.digest);
      dig = '{' + Object.keys(m).sort().map((k?: any) => goString(k) + ':' + goStr(m[k])).join(',') + '}';
    }
    return '{"name":' + goStr(x.name) + ',"digest":' + dig + '}';
  };
  let rkc = '';
  if (ke.root_key_config !== null && ke.root_key_config !== undefined) {
    const c = goObj(ke.root_key_config);
    rkc = ',"root_key_config":{"name":' + goStr(c.name) + ',"type":' + goStr(c.type) + ',"exportable":' + goBool(c.exportable) +
      ',"allow_plaintext_backup":' + goBool(c.allow_plaintext_backup) + ',"min_available_version":' + int64(c.min_available_version) +
      ',"latest_version":' + int64(c.latest_version) + '}';
  }
  const art = (a?: any) => {
    const x = goObj(a);
    const sig = x.ack_signature === null || x.ack_signature === undefined || x.ack_signature === '' ? '' : ',"ack_signature":' + goBytes(x.ack_signature);
    return '{"id":' + goStr(x.id) + ',"kind":' + goStr(x.kind) + ',"holder":' + goStr(x.holder) + ',"closed_by":' + goStr(x.closed_by) + sig + '}';
  };
  const cond = (c?: any) => { const x = goObj(c); return '{"name":' + goStr(x.name) + ',"status":' + goStr(x.status) + ',"evidence":' + goStr(x.evidence) + '}'; };
  const ack = (h?: any) => {
    const x = goObj(h);
    return '{"holder":' + goStr(x.holder) + ',"public_key":' + goBytes(x.public_key) + ',"signature":' + goBytes(x.signature) +
      ',"artifacts":' + goList(x.artifacts, goStr, true) + '}';
  };
  const res = (r?: any) => { const x = goObj(r); return '{"kind":' + goStr(x.kind) + ',"description":' + goStr(x.description) + '}'; };
  return '{"_type":' + goStr(o._type) + ',"subject":' + goList(o.subject, subj, true) + ',"predicateType":' + goStr(o.predicateType) +
    ',"predicate":{"forget":' + goStr(p.forget) + ',"claim":' + goStr(p.claim) +
    ',"timeline":{"requested":' + parseTime(tl.requested).canon + ',"committed":' + parseTime(tl.committed).canon +
    ',"shredded":' + parseTime(tl.shredded).canon + ',"erased":' + parseTime(tl.erased).canon + '}' +
    ',"key_evidence":{"root_store":' + goStr(ke.root_store) + ',"retired_root_versions":' + goList(ke.retired_root_versions, int64, true) + rkc +
    ',"epoch":' + int64(ke.epoch) + '}' +
    ',"artifacts":' + goList(p.artifacts, art, true) + ',"conditions":' + goList(p.conditions, cond, true) +
    ',"holder_acks":' + goList(p.holder_acks, ack, true) + ',"residuals":' + goList(p.residuals, res, true) + '}}';
}
function ackMessage(forget?: any, holder?: any, artifacts?: any): any {
  const ids = artifacts.slice().sort((a?: any, b?: any) => (a < b ? -1 : a > b ? 1 : 0)); // byte order: ids are ASCII
  return C.labelHolderAck + '\nforget ' + forget + '\nholder ' + holder + '\n' + ids.map((id?: any) => 'artifact ' + id + '\n').join('');
}
async function validateStatement(s?: any): Promise<any> {
  if (s._type !== C.statementType) bad('format', '_type is ' + JSON.stringify(s._type) + ', want ' + JSON.stringify(C.statementType));
  if (s.predicateType !== C.predicateType) bad('format', 'predicateType is ' + JSON.stringify(s.predicateType));
  if (!Array.isArray(s.subject) || s.subject.length !== 1 || s.subject[0].name !== C.subjectName || !isObj(s.subject[0].digest) ||
    Object.keys(s.subject[0].digest).length !== 1) bad('format', 'subject must be one "' + C.subjectName + '" with a single sha256 digest');
  if (!validCommitment(s.subject[0].digest.sha256)) bad('format', 'subject digest must be a sha256 of 64 lower-case hex digits');
  const p = s.predicate;
  if (p.claim !== C.claim) bad('claim', 'claim is ' + JSON.stringify(p.claim) + ', want exactly ' + JSON.stringify(C.claim));
  if (!validID(p.forget)) bad('format', 'forget id is empty, too long or not printable');
  let prev = null;
  for (const name of ['requested', 'committed', 'shredded', 'erased']) {
    const t = parseTime(p.timeline[name]);
    if (t.zero) bad('timeline', 'timeline: ' + name + ' missing');
    if (!t.utc) bad('timeline', 'timeline: ' + name + ' is not in UTC');
    if (prev && t.ns < prev.t.ns) bad('timeline', 'timeline: ' + name + ' before ' + prev.name);
    prev = { name, t };
  }
  const k = p.key_evidence;
  if (!C.rootStores.includes(k.root_store)) bad('format', 'key_evidence: unknown root_store ' + JSON.stringify(k.root_store));
  if (k.epoch < 0) bad('format', 'key_evidence: negative epoch');
  const rv = k.retired_root_versions;
  rv.forEach((v?: any, i?: any) => { if (v < 1 || (i > 0 && v <= rv[i - 1])) bad('format', 'key_evidence: retired_root_versions must be positive and strictly ascending'); });
  if (k.root_store !== 'vault-transit-per-subject' && (k.epoch < 1 || rv.length === 0)) {
    bad('key evidence', 'key_evidence: root store ' + k.root_store + ' needs an epoch that retired at least one root version');
  }
  const c = k.root_key_config;
  if (c) {
    if (c.exportable || c.allow_plaintext_backup) bad('key evidence', 'key_evidence: root key ' + JSON.stringify(c.name) + ' is exportable or allows plaintext backup');
    if (c.min_available_version < 0 || c.latest_version < c.min_available_version) bad('format', 'key_evidence: root_key_config versions inconsistent');
    if (rv.length > 0 && c.min_available_version > 0 && rv[rv.length - 1] >= c.min_available_version) {
      bad('key evidence', 'key_evidence: root version ' + rv[rv.length - 1] + ' reported retired but min_available_version is ' + c.min_available_version);
    }
  }
  const artifacts = new Map();
  for (const a of p.artifacts) {
    if (!validID(a.id)) bad('format', 'artifact id is empty, too long or not printable');
    if (!validID(a.kind)) bad('format', 'artifact ' + a.id + ': kind is empty, too long or not printable');
    if (a.holder !== '' && !validID(a.holder)) bad('format', 'artifact ' + a.id + ': holder too long or not printable');
    const sig = a.ack_signature === undefined ? null : b64decode(a.ack_signature, false);
    if (a.closed_by === 'sealed_key_destroyed') {
      if (a.ack_signature !== undefined) bad('format', 'artifact ' + a.id + ': ack_signature on a sealed artifact');
    } else if (a.closed_by === 'holder_ack') {
      if (a.holder === '' || !sig || sig.length !== 64) bad('format', 'artifact ' + a.id + ': closed by holder_ack needs a holder and a 64-byte ack_signature');
    } else bad('format', 'artifact ' + a.id + ': unknown closed_by ' + JSON.stringify(a.closed_by));
    if (artifacts.has(a.id)) bad('format', 'artifact ' + a.id + ' listed twice');
    artifacts.set(a.id, { a, sig });
  }
  const seen = new Set();
  for (const cd of p.conditions) {
    if (!C.conditions.includes(cd.name)) bad('condition', 'unknown condition ' + JSON.stringify(cd.name));
    if (seen.has(cd.name)) bad('condition', 'condition ' + cd.name + ' listed twice');
    seen.add(cd.name);
    if (cd.status !== 'ok') bad('condition', 'condition ' + cd.name + ' is ' + JSON.stringify(cd.status) + ', not ok (' + cd.evidence + ')');
    if (cd.evidence.trim() === '') bad('condition', 'condition ' + cd.name + ' is ok without evidence');
  }
  for (const name of C.conditions) if (!seen.has(name)) bad('condition', 'condition ' + name + ' missing');
  const closedBy = new Map();
  for (const h of p.holder_acks) {
    const pub = h.public_key === null ? null : b64decode(h.public_key, false);
    const sig = h.signature === null ? null : b64decode(h.signature, false);
    if (!validID(p.forget) || !validID(h.holder)) bad('ack', 'ack: forget and holder ids must be non-empty printable ASCII without spaces');
    if (h.artifacts.length === 0) bad('ack', 'ack of holder ' + h.holder + ' names no artifact');
    const ids = new Set();
    for (const id of h.artifacts) { if (!validID(id) || ids.has(id)) bad('ack', 'ack of holder ' + h.holder + ': artifact id malformed or repeated'); ids.add(id); }
    if (!pub || pub.length !== 32) bad('ack', 'ack of holder ' + h.holder + ': public key of ' + (pub ? pub.length : 0) + ' bytes');
    if (!sig || sig.length !== 64 || !(await ed25519Verify(pub, sig, ackMessage(p.forget, h.holder, h.artifacts)))) {
      bad('ack', 'ack of holder ' + h.holder + ' does not verify under its public key');
    }
    for (const id of h.artifacts) {
      const x = artifacts.get(id);
      if (!x || x.a.closed_by !== 'holder_ack' || x.a.holder !== h.holder) bad('ack', 'holder ' + h.holder + ' acks artifact ' + id + ', which is not one of its plaintext-held artifacts here');
      if (closedBy.has(id)) bad('ack', 'artifact ' + id + ' acked twice');
      closedBy.set(id, sig);
    }
  }
  for (const [id, x] of artifacts) {
    if (x.a.closed_by !== 'holder_ack') continue;
    const sig = closedBy.get(id);
    if (!sig) bad('ack', 'artifact ' + id + ' is closed by holder_ack but no ack of holder ' + x.a.holder + ' names it');
    if (!equal(sig, x.sig)) bad('ack', 'artifact ' + id + ': ack_signature is not the signature of the ack that closes it');
  }
  const kinds = new Set();
  for (const r of p.residuals) {
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(r.kind) || r.description.trim() === '') bad('residual', 'residual ' + JSON.stringify(r.kind) + ': the kind must be lower-case snake_case and the description non-empty');
    kinds.add(r.kind);
  }
  if (!kinds.has('root_store_snapshots')) bad('residual', 'residual root_store_snapshots missing');
  if (p.holder_acks.length > 0 && !kinds.has('holder_trust')) bad('residual', 'residual holder_trust missing: the attestation relies on holder acks');
}
// parseStatement is attest.ParseStatement on an authenticated payload.
async function parseStatement(payload?: any): Promise<any> {
  const { value: s } = parseJSON(payload, 'the statement');
  if (!isObj(s)) bad('format', 'statement: not a JSON object');
  let canon;
  try { canon = marshalStatement(s); } catch (e: any) { if (e instanceof FormatError) refuse('json.schema', 'statement: ' + e.message); throw e; }
  if (!equal(utf8.encode(canon), payload)) refuse('json.schema', 'statement is not in canonical form');
  await validateStatement(s);
  return s;
}
export async function commitment(subject?: any, salt?: any): Promise<any> {
  return hex(await sha256(concat(utf8.encode(C.labelCommitment), new Uint8Array([0]), salt, utf8.encode(subject))));
}
async function checkSubject(st?: any, subject?: any, salt?: any): Promise<any> {
  const want = st.subject[0].digest.sha256;
  return salt && salt.length === 32 && (await commitment(subject, salt)) === want;
}

// ---- log events (attest.OpenEvent) ----
function marshalEvent(ev?: any): any {
  const o = goObj(ev);
  let part = '';
  const opt = (name?: any, v?: any, f?: any) => { if (v !== null && v !== undefined) part += ',"' + name + '":' + f(goObj(v)); };
  opt('key', o.key, (x?: any) => '{"subject":' + goStr(x.subject) + ',"generation":' + uint32(x.generation) + '}');
  opt('forget', o.forget, (x?: any) => '{"forget":' + goStr(x.forget) + ',"subject":' + goStr(x.subject) + ',"generation":' + uint32(x.generation) +
    ',"barrier":' + int64(x.barrier) + ',"key_created_index":' + int64(x.key_created_index) + '}');
  opt('epoch', o.epoch, (x?: any) => '{"epoch":' + int64(x.epoch) + ',"root_store":' + goStr(x.root_store) + ',"from_version":' + int64(x.from_version) +
    ',"to_version":' + int64(x.to_version) + ',"retired_versions":' + goList(x.retired_versions, int64, false) + '}');
  opt('ack', o.ack, (x?: any) => '{"forget":' + goStr(x.forget) + ',"holder":' + goStr(x.holder) + ',"public_key":' + goBytes(x.public_key) +
    ',"artifacts":' + int64(x.artifacts) + ',"message_sha256":' + goStr(x.message_sha256) + ',"signature":' + goBytes(x.signature) + '}');
  opt('attested', o.attested, (x?: any) => '{"forget":' + goStr(x.forget) + ',"subject":' + goStr(x.subject) + ',"attestation_sha256":' + goStr(x.attestation_sha256) + '}');
  return '{"_type":' + goStr(o._type) + ',"event":' + goStr(o.event) + ',"time":' + parseTime(o.time).canon + part + '}';
}
async function openEvent(entry?: any, pub?: any): Promise<any> {
  if (entry.length > C.maxEvent) bad('format', 'event of ' + entry.length + ' bytes, at most ' + C.maxEvent);
  const payload = await verifyEnvelope(entry, pub, C.eventPayloadType);
  const { value: ev } = parseJSON(payload, 'the event');
  if (!isObj(ev)) refuse('json.schema', 'event: not a JSON object');
  let canon;
  try { canon = marshalEvent(ev); } catch (e: any) { if (e instanceof FormatError) refuse('json.schema', 'event: ' + e.message); throw e; }
  if (!equal(utf8.encode(canon), payload)) refuse('json.schema', 'event is not in canonical form');
  if (ev._type !== C.eventType) bad('format', 'event _type is ' + JSON.stringify(ev._type));
  const t = parseTime(ev.time);
  if (t.zero || !(ev.time.endsWith('Z'))) bad('format', 'event time must be set, in UTC');
  const parts: any[] = ['key', 'forget', 'epoch', 'ack', 'attested'].filter((k?: any) => ev[k] !== undefined && ev[k] !== null);
  if (parts.length !== 1) bad('format', 'event has ' + parts.length + ' parts, want exactly the one its kind names');
  const kindPart: any = { key_created: 'key', forget_committed: 'forget', epoch_completed: 'epoch', holder_ack: 'ack', erasure_attested: 'attested' };
  if (kindPart[ev.event] !== parts[0]) bad('format', 'event does not carry its part');
  const x = ev[parts[0]];
  const ok = ({
    key: (): any => validCommitment(x.subject) && x.generation !== 0,
    forget: (): any => validID(x.forget) && validCommitment(x.subject) && x.barrier >= 0 && x.key_created_index >= -1,
    epoch: (): any => x.epoch > 0 && x.to_version >= x.from_version && Array.isArray(x.retired_versions) && validID(x.root_store),
    ack: (): any => { const pk = x.public_key && b64decode(x.public_key), sg = x.signature && b64decode(x.signature);
      return validID(x.forget) && validID(x.holder) && pk && pk.length === 32 && sg && sg.length === 64 && x.artifacts > 0 && validCommitment(x.message_sha256); },
    attested: (): any => validID(x.forget) && validCommitment(x.subject) && validCommitment(x.attestation_sha256),
  } as Record<string, () => any>)[parts[0]]!();
  if (!ok) bad('format', ev.event + ': malformed');
  return ev;
}

// ---- the export archive (bundle.ReadBytes) ----
const entryRe = /^entry-(0|[1-9][0-9]{0,18})-([a-z_]{1,32})\.(json|tlog-proof)$/;
const forgetRe = /^[0-9a-f]{32}$/;
// readBundle is bundle.ReadBytes: one gzip member, a POSIX ustar
// archive, every file in the one top directory shredd-export-<forget>,
// known names only, every required file present. It throws Refusals.
function readBundle(bytes?: any): any {
  const members = untarStrict(gunzipStrict(bytes, C.maxTotal));
  const b: any = { forget: '', entries: new Map(), files: new Map() };
  let total = 0;
  for (const m of members) {
    const slash = m.name.indexOf('/');
    const dir = slash < 0 ? m.name : m.name.slice(0, slash), name = slash < 0 ? '' : m.name.slice(slash + 1);
    const forget = dir.startsWith('shredd-export-') ? dir.slice('shredd-export-'.length) : null;
    if (forget === null || !forgetRe.test(forget) || (b.forget !== '' && forget !== b.forget) || name.includes('/') ||
      (m.dir && name !== '') || (!m.dir && name === '')) refuse('bundle.layout', JSON.stringify(m.name) + ' is not a file of one shredd-export-<forget id> directory');
    b.forget = forget;
    if (m.dir) continue;
    total += m.data.length;
    if (['README.txt', 'check-inclusion.py', 'attestation.json', 'attestation.pub', 'log.vkey', 'checkpoint', 'consistency.proof'].includes(name)) {
      b.files.set(name, m.data);
      continue;
    }
    const em = entryRe.exec(name);
    if (!em) refuse('bundle.unknown-file', 'unknown file ' + name);
    if (m.data.length > C.maxEvent) refuse('bundle.size', name + ' is over ' + C.maxEvent + ' bytes');
    if (em[1]!.length > 16 || Number(em[1]) > MAX_SAFE) refuse('bundle.unknown-file', 'unknown file ' + name);
    const base = name.replace(/\.(json|tlog-proof)$/, '');
    let e = b.entries.get(base);
    if (!e) { e = { index: Number(em[1]), event: em[2], name: base }; b.entries.set(base, e); }
    if (em[3] === 'json') e.data = m.data; else e.proof = m.data;
  }
  if (total > C.maxTotal) refuse('bundle.size', 'over ' + C.maxTotal + ' bytes in all');
  for (const f of ['README.txt', 'attestation.json', 'attestation.pub', 'log.vkey', 'checkpoint', 'check-inclusion.py']) {
    if (!b.files.has(f)) refuse('bundle.missing-file', f + ' is missing');
  }
  b.attestation = b.files.get('attestation.json');
  b.attestationPub = b.files.get('attestation.pub');
  b.logKey = b.files.get('log.vkey');
  b.checkpoint = b.files.get('checkpoint');
  b.consistency = b.files.get('consistency.proof');
  b.entries = [...b.entries.values()].sort((x?: any, y?: any) => x.index - y.index || (x.event < y.event ? -1 : x.event > y.event ? 1 : 0));
  for (const e of b.entries) if (!e.data || !e.proof) refuse('bundle.missing-file', e.name + ' needs both its .json and its .tlog-proof');
  return b;
}

// ---- reports ----
function report(): any {
  const r: any = { verified: false, failed: '', reason: '', checks: [] };
  r.ok = (check?: any, detail?: any) => r.checks.push({ check, ok: true, detail });
  r.skip = (check?: any, detail?: any) => r.checks.push({ check, ok: null, detail });
  r.fail = (check?: any, detail?: any) => { r.checks.push({ check, ok: false, detail }); if (!r.failed) { r.failed = check; r.reason = detail; } };
  return r;
}
const statementCheck: Record<string, string> = { claim: 'claim', condition: 'conditions', timeline: 'timeline', 'key evidence': 'key evidence', ack: 'holder acks', residual: 'residuals' };
const toBytes = (x?: any) => (x === undefined || x === null ? null : typeof x === 'string' ? utf8.encode(x) : x);

// verifyAttestation is `shredd verify FILE --key --subject --salt`:
// opts {key (PEM), subject, salt (hex)}.
function verifyAttestation(bytes?: any, opts?: any): Promise<any> {
  return readAttestation(bytes, opts, false);
}

/**
 * readAttestation is verifyAttestation, the page's reader of an attestation
 * file; with subjectOptional (the TypeScript client's
 * verify.verifyAttestation) an attestation given neither a subject id nor a
 * salt is checked without its commitment ("subject" skipped).
 */
export async function readAttestation(bytes?: any, opts?: any, subjectOptional?: boolean): Promise<any> {
  const r = report();
  const given = (x?: any) => x !== undefined && x !== null && String(x).trim() !== '';
  if (given(opts.witnesses) && (!Array.isArray(opts.witnesses) || opts.witnesses.some(given)) || given(opts.witnessesRequired)) {
    r.fail('keys', 'witnesses apply to an export\'s checkpoint, not to an attestation file');
    return finish(r);
  }
  let pub, salt;
  try { pub = parsePublicKey(toBytes(opts.key) || new Uint8Array()); } catch (e: any) { r.fail('keys', 'the attestation key: ' + e.message); return finish(r); }
  const skipSubject = subjectOptional === true && (opts.subject === undefined || opts.subject === null) && (opts.salt === undefined || opts.salt === null);
  salt = unhex(String(opts.salt || '').trim());
  if (!skipSubject && (!salt || salt.length !== 32)) { r.fail('subject', 'the salt must be the 64 hex digits the forget returned'); return finish(r); }
  let payload;
  try {
    payload = await verifyEnvelope(bytes, pub, C.payloadType);
    r.ok('signature', 'Ed25519 by key id ' + (await keyID(pub)));
  } catch (e: any) {
    if (!(e instanceof FormatError)) throw e;
    r.fail(e.kind === 'format' ? 'envelope' : 'signature', e.message);
    return finish(r);
  }
  let st = null;
  try {
    st = await parseStatement(payload);
    r.ok('statement', 'in-toto Statement v1, predicate ' + st.predicateType);
    r.ok('claim', JSON.stringify(st.predicate.claim) + ', 5 of 5 conditions ok');
  } catch (e: any) {
    if (!(e instanceof FormatError)) throw e;
    r.fail(statementCheck[e.kind] || 'statement', e.message);
    try { st = JSON.parse(text(payload)); } catch (e2: any) { st = null; }
  }
  if (skipSubject) {
    r.skip('subject', 'not checked (no subject id and salt given)');
    r.statement = st;
    return finish(r);
  }
  let opened = false;
  try { opened = st && Array.isArray(st.subject) && st.subject[0] && st.subject[0].digest && (await checkSubject(st, String(opts.subject || ''), salt)); } catch (e: any) { opened = false; }
  if (opened) r.ok('subject', 'the subject id and salt open commitment ' + st.subject[0].digest.sha256.slice(0, 16) + '...');
  else r.fail('subject', 'the subject id and salt do not open the statement\'s commitment');
  r.statement = st;
  return finish(r);
}

// verifyExport is `shredd verify EXPORT.tar.gz --key --log-key
// [--subject --salt] [--checkpoint]` (bundle.CheckExport): opts {key
// (PEM), logKey, subject, salt (hex), saved (a checkpoint)}. The
// report's code is the spec's reason code ("ok" when verified), the one
// `shredd verify` prints for the same inputs.
async function verifyExportReport(bytes?: any, opts?: any): Promise<any> {
  const r = report();
  const subject = opts.subject === undefined || opts.subject === null ? '' : String(opts.subject);
  const saltText = String(opts.salt || '').trim();
  if ((subject === '') !== (saltText === '')) { r.fail('keys', 'give both the subject id and the salt, or neither'); return finish(r); }
  const salt = saltText ? unhex(saltText) : null;
  if (saltText && (!salt || salt.length !== 32)) { r.fail('subject', 'the salt must be the 64 hex digits the forget returned'); return finish(r); }
  let check = 'keys';
  try {
    const pub = within('the attestation key', (): any => checkPublicKeyFile(toBytes(opts.key) || new Uint8Array()));
    const vline = within('the log key', (): any => checkLogKeyFile(toBytes(opts.logKey) || new Uint8Array()));
    let v;
    try { v = await parseVerifierKey(vline); } catch (e: any) { if (e instanceof FormatError) refuse('logkey.format', 'the log key: ' + e.message); throw e; }
    const witnesses = await witnessOpts(opts);
    if (witnesses.error) { r.fail('keys', witnesses.error); return finish(r); }
    check = 'archive';
    const b = readBundle(bytes);
    r.ok('archive', 'shredd-export-' + b.forget + ': ' + b.entries.length + ' log entries');
    const step = (c?: any) => { check = c; };
    await checkBundle(b, pub, v, { subject, salt, saved: toBytes(opts.saved), witnesses }, r, step);
    if (!equal(b.attestationPub, toBytes(opts.key))) r.skip('keys', 'the archive\'s attestation.pub is not the key given; the given key was used');
    if ((text(b.logKey) || '').trim() !== vline) r.skip('keys', 'the archive\'s log.vkey is not the log key given; the given key was used');
  } catch (e: any) {
    if (e instanceof FormatError && e.code) { r.fail(check, e.message); r.code = e.code; } else if (e instanceof CheckError) r.fail(e.check, e.message);
    else throw e;
  }
  return finish(r);
}
// witnessOpts reads the witnesses of `shredd verify --witness VKEY ...
// --witnesses-required K` (cmd/shredd witnessFlags.verifiers): opts
// {witnesses (keys, or a text of one key a line), witnessesRequired
// (1 to their number; empty: all)}. {keys: [], required: 0} when none
// is given; {error} on a malformed key or count, as the CLI's usage
// errors.
async function witnessOpts(opts?: any): Promise<any> {
  let keys = opts.witnesses === undefined || opts.witnesses === null ? [] : opts.witnesses;
  if (typeof keys === 'string') keys = keys.split('\n');
  keys = keys.map((k?: any) => String(k).trim()).filter((k?: any) => k !== '');
  const rq = opts.witnessesRequired === undefined || opts.witnessesRequired === null ? '' : String(opts.witnessesRequired).trim();
  if (keys.length === 0) return rq === '' ? { keys, required: 0 } : { error: 'witnesses required needs the trusted witnesses\' keys' };
  const seen = new Set();
  for (const k of keys) {
    let w;
    try { w = await parseWitnessKey(k); } catch (e: any) { return { error: e.message }; }
    if (seen.has(w.pub)) return { error: 'witness key ' + w.name + ': the same public key is given twice; each witness counts once' };
    seen.add(w.pub);
  }
  let required = keys.length;
  if (rq !== '') {
    required = /^[0-9]+$/.test(rq) ? Number(rq) : NaN;
    if (!Number.isSafeInteger(required) || required < 1 || required > keys.length) return { error: 'witnesses required ' + rq + ': want 1 to the ' + keys.length + ' witness keys given' };
  }
  return { keys, required };
}

// within names the file a refusal is about.
function within(name?: any, f?: any): any {
  try { return f(); } catch (e: any) { if (e instanceof FormatError) e.message = name + ': ' + e.message; throw e; }
}
async function withinAsync(name?: any, f?: any): Promise<any> {
  try { return await f(); } catch (e: any) { if (e instanceof FormatError) e.message = name + ': ' + e.message; throw e; }
}
// The codes of attest.Validate's errors.
const statementCode: Record<string, string> = { format: 'statement.format', claim: 'statement.claim', condition: 'statement.conditions', timeline: 'statement.timeline',
  'key evidence': 'statement.key-evidence', ack: 'statement.acks', residual: 'statement.residuals' };

async function checkBundle(b?: any, pub?: any, v?: any, opts?: any, r?: any, step?: any): Promise<any> {
  function fail(code: string, msg: string): never { return refuse(code, msg); }
  // 1. The attestation.
  step('attestation');
  const st = await withinAsync('attestation.json', async (): Promise<any> => {
    const payload = await verifyEnvelope(b.attestation, pub, C.payloadType);
    const { value: s } = parseJSON(payload, 'the statement');
    if (!isObj(s)) refuse('json.schema', 'statement: not a JSON object');
    let canon;
    try { canon = marshalStatement(s); } catch (e: any) { if (e instanceof FormatError) refuse('json.schema', 'statement: ' + e.message); throw e; }
    if (!equal(utf8.encode(canon), payload)) refuse('json.schema', 'statement is not in canonical form');
    try { await validateStatement(s); } catch (e: any) { if (e instanceof FormatError && !e.code) e.code = statementCode[e.kind] || 'statement.format'; throw e; }
    return s;
  });
  const pred = st.predicate;
  if (pred.forget !== b.forget) fail('statement.forget', 'attestation.json is about forget ' + pred.forget + ', the export about ' + b.forget);
  const commit = st.subject[0].digest.sha256;
  r.ok('attestation', 'signed by the service key, claim and conditions valid, forget ' + b.forget);
  if (opts.salt) {
    step('subject');
    if (!(await checkSubject(st, opts.subject, opts.salt))) fail('subject.mismatch', 'the subject id and salt do not match the statement\'s commitment');
  }
  // 2. The checkpoint and every entry in it.
  step('checkpoint');
  const cp = await withinAsync('checkpoint', (): any => openCheckpoint(b.checkpoint, v, { format: 'checkpoint.format', signature: 'checkpoint.signature', origin: 'checkpoint.origin' }));
  r.ok('checkpoint', 'signed by the log key, origin ' + cp.origin + ', tree size ' + cp.size);
  if (opts.witnesses && opts.witnesses.keys.length > 0) {
    // The cosignatures (translog.CheckCosignatures), as `shredd verify
    // --witness --witnesses-required` checks them.
    step('witnesses');
    const w = await checkCosignatures(b.checkpoint, opts.witnesses.keys, opts.witnesses.required);
    r.witnessed = { required: opts.witnesses.required, valid: w.valid, missing: w.missing, invalid: w.invalid };
    if (!w.ok) fail('checkpoint.witnesses', 'checkpoint: ' + w.reason);
    let line = w.valid.length + ' of ' + opts.witnesses.required + ' required cosignatures valid: ' + w.valid.map((c?: any) => c.witness + ' (' + c.time + ')').join(', ');
    if (w.missing.length) line += '; none from ' + w.missing.join(', ');
    if (w.invalid.length) line += '; invalid from ' + w.invalid.join(', ');
    r.ok('witnesses', line);
  }
  const events: any = {};
  const index = new Map();
  const attSHA = hex(await sha256(b.attestation));
  for (const e of b.entries) {
    step('entry ' + e.name);
    within(e.name + '.tlog-proof', (): any => checkText(e.proof));
    let p;
    try { p = parseProof(e.proof); } catch (x: any) { if (x instanceof FormatError) fail('proof.format', e.name + '.tlog-proof is malformed'); throw x; }
    if (p.index !== e.index) fail('proof.index', e.name + '.tlog-proof proves index ' + p.index);
    if (!equal(p.checkpoint, b.checkpoint)) fail('proof.checkpoint', e.name + '.tlog-proof is against another checkpoint than checkpoint');
    if (p.index >= cp.size || !(await checkInclusion(p.hashes, cp.size, cp.hash, p.index, await leafHash(e.data)))) {
      fail('proof.inclusion', e.name + ': entry ' + p.index + ' not in tree ' + cp.size + ' of the checkpoint');
    }
    const ev = await withinAsync(e.name + '.json', async (): Promise<any> => {
      try { return await openEvent(e.data, pub); } catch (x: any) { if (x instanceof FormatError && !x.code) x.code = 'event.format'; throw x; }
    });
    if (ev.event !== e.event) fail('event.kind', e.name + '.json holds a ' + ev.event + ' event');
    (events[ev.event] = events[ev.event] || []).push(ev);
    index.set(ev, e.index);
    r.ok('entry ' + e.name, 'signed, included in the checkpoint\'s tree');
  }
  step('entries');
  const one = (kind?: any) => {
    const n = (events[kind] || []).length;
    if (n !== 1) fail('entries.mismatch', n + ' ' + kind + ' entries, want 1');
    return events[kind][0];
  };
  // 3. The entries are this forget's.
  const fc = one('forget_committed');
  if (fc.forget.forget !== b.forget || fc.forget.subject !== commit) fail('entries.mismatch', 'the forget_committed entry is about another forget or commitment');
  const ea = one('erasure_attested');
  if (ea.attested.forget !== b.forget || ea.attested.subject !== commit || ea.attested.attestation_sha256 !== attSHA) {
    fail('entries.mismatch', 'the erasure_attested entry does not name this attestation (forget, commitment or SHA-256 differ)');
  }
  if (index.get(ea) <= index.get(fc)) fail('entries.mismatch', 'the attestation was logged before the forget committed');
  const kc = events.key_created || [];
  const kci = fc.forget.key_created_index;
  let keyLink;
  if (kci < 0 && kc.length === 0) keyLink = 'the subject had no logged key';
  else if (kci < 0 || kc.length !== 1 || index.get(kc[0]) !== kci) fail('entries.mismatch', 'the key_created entry is not the one the forget_committed entry names (index ' + kci + ')');
  else if (kc[0].key.generation !== fc.forget.generation) fail('entries.mismatch', 'the key_created entry is of generation ' + kc[0].key.generation + ', the forget destroyed ' + fc.forget.generation);
  else if (kc[0].key.subject === commit) {
    keyLink = 'same subject commitment, and named by index by the forget';
    if (index.get(kc[0]) >= index.get(fc)) fail('entries.mismatch', 'the key was logged as created after its forget');
  } else keyLink = 'named by index by the forget (its commitment uses another salt: the key was unreachable when the forget was made)';
  if (kc.length > 1) fail('entries.mismatch', 'more than one key_created entry');
  const acks = events.holder_ack || [];
  if (acks.length !== pred.holder_acks.length) fail('entries.mismatch', acks.length + ' holder_ack entries for the attestation\'s ' + pred.holder_acks.length + ' holder acks');
  for (const h of pred.holder_acks) {
    const msg = hex(await sha256(ackMessage(b.forget, h.holder, h.artifacts)));
    const found = acks.some((ev?: any) => {
      const a = ev.ack;
      return a.forget === b.forget && a.holder === h.holder && a.public_key === h.public_key && a.artifacts === h.artifacts.length &&
        a.message_sha256 === msg && a.signature === h.signature && index.get(ev) > index.get(fc) && index.get(ev) < index.get(ea);
    });
    if (!found) fail('entries.mismatch', 'holder ' + h.holder + '\'s ack is not logged between the forget\'s commit and its attestation');
  }
  const ke = pred.key_evidence;
  if (ke.epoch > 0) {
    const ep = one('epoch_completed');
    const same = ep.epoch.retired_versions.length === ke.retired_root_versions.length && ep.epoch.retired_versions.every((x?: any, i?: any) => x === ke.retired_root_versions[i]);
    if (ep.epoch.epoch !== ke.epoch || !same || index.get(ep) <= index.get(fc) || index.get(ep) >= index.get(ea)) {
      fail('entries.mismatch', 'the epoch_completed entry is not the attestation\'s epoch ' + ke.epoch + ', logged between the commit and the attestation');
    }
  } else if ((events.epoch_completed || []).length !== 0) fail('entries.mismatch', 'an epoch_completed entry for an attestation without an epoch');
  r.ok('key', keyLink);
  if (opts.salt) r.ok('subject', 'the subject id and salt open commitment ' + commit.slice(0, 16) + '...');
  else r.skip('subject', 'not checked (no subject id and salt)');
  // 4. A saved checkpoint: the export's log extends it.
  if (opts.saved) {
    step('consistency');
    const old = await withinAsync('saved checkpoint', (): any => openCheckpoint(opts.saved, v, { format: 'saved.format', signature: 'saved.signature', origin: 'saved.origin' }));
    if (old.size > cp.size) fail('consistency.newer', 'the saved checkpoint (size ' + old.size + ') is newer than the export\'s (size ' + cp.size + '): ask for a new export with since=' + old.size);
    if (old.size === cp.size) {
      if (!equal(old.hash, cp.hash)) fail('consistency.fork', 'the saved checkpoint and the export\'s have the same size ' + cp.size + ' and different trees: the log was forked or rewritten');
    } else {
      if (!b.consistency) fail('consistency.missing', 'no consistency.proof in the export: ask for one with since=' + old.size);
      within('consistency.proof', (): any => checkText(b.consistency));
      let p;
      try { p = parseConsistency(b.consistency); } catch (x: any) { if (x instanceof FormatError) fail('consistency.format', 'consistency.proof is malformed'); throw x; }
      if (p.old !== old.size || p.new !== cp.size) fail('consistency.range', 'consistency.proof goes from size ' + p.old + ' to ' + p.new + ', not from the saved ' + old.size + ' to the export\'s ' + cp.size);
      let ok;
      if (old.origin !== cp.origin) ok = false;
      else if (old.size === 0) ok = p.hashes.length === 0 && equal(old.hash, await sha256(new Uint8Array()));
      else ok = await checkConsistency(p.hashes, old.size, old.hash, cp.size, cp.hash);
      if (!ok) fail('consistency.fork', 'the export\'s log does not extend the saved checkpoint (rewritten or forked)');
    }
    r.ok('consistency', 'the log extends the saved checkpoint of size ' + old.size);
  } else r.skip('consistency', 'not checked (no checkpoint saved earlier)');
  r.forget = b.forget;
  r.origin = cp.origin;
  r.statement = st;
}

// SECTIONS is where the spec defines each reason code: the rule of
// docs/transparency.md §10a ("§10a.2" is its rule 2), or §13 for the
// witnesses. The first entry whose code or prefix matches is the one.
const SECTIONS = [
  ['checkpoint.witnesses', '§13'],
  ['text.', '§10a.1'], ['key.', '§10a.1'], ['logkey.', '§10a.1'],
  ['gzip.', '§10a.2'], ['tar.', '§10a.3'], ['bundle.', '§10a.4'], ['json.', '§10a.5'],
  ['envelope.', '§10a.6'], ['statement.', '§10a.6'], ['subject.', '§10a.7'], ['checkpoint.', '§10a.8'],
  ['proof.', '§10a.9'], ['event.', '§10a.9'], ['entries.', '§10a.10'],
  ['saved.', '§10a.11'], ['consistency.', '§10a.11'],
] as const;
// sectionOf names the spec's section of a reason code, '' for a code of
// no section (a check's name, for inputs the verifier could not use).
function sectionOf(code?: any): string {
  const c = String(code || '');
  const hit = SECTIONS.find(([k]) => (k.endsWith('.') ? c.startsWith(k) : c === k));
  return hit ? 'docs/transparency.md ' + hit[1] : '';
}

function finish(r?: any): any {
  r.verified = r.failed === '';
  if (r.verified) r.code = 'ok';
  else if (!r.code) r.code = r.failed;
  r.section = r.verified ? '' : sectionOf(r.code);
  delete r.ok; delete r.skip; delete r.fail;
  return r;
}

// ---- witness cosignatures ----
// The check of `shredd verify --witness KEY --witnesses-required K`
// (translog.CheckCosignatures, docs/transparency.md §13) on a signed
// checkpoint. checkCosignatures(signed, witnessKeys, required) resolves to
// {ok, valid: [{witness, time}], missing: [names], invalid: [names],
// reason}: signed is the checkpoint note (string or bytes) whose log
// signature the caller has checked; witnessKeys are cosignature/v1
// verifier keys ("<name>+<key id>+<base64 of 0x04 ‖ public key>");
// required is how many valid cosignatures of them the checkpoint needs
// (default: all). A witness's line that does not verify counts as none;
// two keys with one public key count once. It rejects (throws) on a
// malformed key, count or note, with a message that names it.
const WITNESS_ALG = 0x04;

function witnessB64decode(s: string): Uint8Array {
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new Error('not base64');
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  if (btoa(bin) !== s) throw new Error('non-canonical base64');
  return out;
}
function validWitnessName(n: string): boolean { return n !== '' && !/[\s+]/u.test(n); }

// parseWitnessKey reads a cosignature/v1 verifier key and checks its
// key ID: SHA-256(name ‖ "\n" ‖ 0x04 ‖ public key)[:4].
async function parseWitnessKey(vkey?: any): Promise<any> {
  // The name and the key ID end at the first two plus signs; the
  // base64 key may hold more.
  const s = String(vkey).trim();
  const i = s.indexOf('+'), j = i < 0 ? -1 : s.indexOf('+', i + 1);
  const parts: string[] = j < 0 ? [] : [s.slice(0, i), s.slice(i + 1, j), s.slice(j + 1)];
  if (parts.length !== 3 || !validWitnessName(parts[0]!) || !/^[0-9a-f]{8}$/.test(parts[1]!)) throw new Error('witness key: not <name>+<key id>+<key>');
  let raw;
  try { raw = witnessB64decode(parts[2]!); } catch (e: any) { throw new Error('witness key: ' + e.message); }
  if (raw.length !== 33 || raw[0] !== WITNESS_ALG) throw new Error('witness key: not a cosignature/v1 Ed25519 key (type 0x04, 32 bytes)');
  const pub = raw.slice(1);
  const id = new Uint8Array(await crypto.subtle.digest('SHA-256', concat(utf8.encode(parts[0] + '\n'), new Uint8Array([WITNESS_ALG]), pub) as any)).slice(0, 4);
  if (hex(id) !== parts[1]) throw new Error('witness key: key id does not match the key');
  let key;
  try {
    key = await crypto.subtle.importKey('raw', pub, { name: 'Ed25519' }, false, ['verify']);
  } catch (e: any) {
    throw new Error('this browser has no Ed25519 in WebCrypto');
  }
  return { name: parts[0], id, pub: parts[2], key };
}

// splitNote returns the note text (ending in a newline) and its
// signature lines [{name, sig}].
function splitNote(signed?: any): any {
  const s = typeof signed === 'string' ? signed : new TextDecoder('utf-8', { fatal: true }).decode(signed);
  const at = s.lastIndexOf('\n\n');
  if (at < 0 || !s.endsWith('\n')) throw new Error('checkpoint: not a signed note');
  const text = s.slice(0, at + 1);
  const lines = s.slice(at + 2, -1).split('\n').map((line) => {
    const m = /^\u2014 (\S+) (\S+)$/u.exec(line);
    if (!m) throw new Error('checkpoint: malformed signature line');
    return { name: m[1], b64: m[2]! };
  });
  return { text, lines };
}

async function checkCosignatures(signed?: any, witnessKeys?: any, required?: any): Promise<any> {
  const { text, lines } = splitNote(signed);
  const keys: any[] = [];
  for (const k of witnessKeys) {
    const w = await parseWitnessKey(k);
    if (!keys.some((x) => x.pub === w.pub)) keys.push(w);
  }
  if (required === undefined) required = keys.length;
  if (!Number.isInteger(required) || required < 0) throw new Error('witnesses required: not a count');
  const r: any = { ok: false, valid: [], missing: [], invalid: [], reason: '' };
  for (const w of keys) {
    // The first line of the witness's name and key ID, as note.Open.
    let sig = null;
    for (const l of lines) {
      if (l.name !== w.name) continue;
      let b;
      try { b = witnessB64decode(l.b64); } catch (e: any) { continue; }
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

/**
 * page is what the generated ui/static/verify.js assigns to
 * globalThis.ShreddVerify: the page's reader (verifyExport resolves to the
 * page's report, with code, section and witnessed) and what the page and
 * its tests use besides.
 */
export const page = {
  verifyExport: verifyExportReport, verifyAttestation, sectionOf,
  // Exposed for the page and its tests.
  isGzip: (b?: any) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b,
  parseCheckpointText: (b?: any) => { const t = text(b) || ''; const i = t.indexOf('\n\n'); return parseCheckpoint(i < 0 ? t : t.slice(0, i + 1)); },
  b64encode, hex,
  // The strict readers, for the differential tests against bundle.
  strict: { gunzip: (b?: any) => gunzipStrict(b, C.maxTotal), untar: untarStrict, readBundle, checkJSON, checkPublicKeyFile, checkLogKeyFile },
};

/** witness is what the generated ui/static/verify.js assigns to globalThis.ShreddWitness. */
export const witness = { parseWitnessKey, checkCosignatures };

/** One check of an export's report, in the order `shredd verify` runs them; ok is null for a check skipped. */
export interface ExportCheck { check: string; ok: boolean | null; detail: string }

/** The verdict on an export. */
export interface ExportReport {
  /** true when every check passed. */
  verified: boolean;
  /** The spec's reason code (docs/transparency.md §10a): "ok" when verified, else e.g. "gzip.deflate", "proof.inclusion". */
  reason: string;
  /** The first failing check ("keys", "archive", "attestation", "subject", "checkpoint", "entry <name>", "entries", "consistency"); "" when verified. */
  failed: string;
  /** Why it failed, in words; "" when verified. */
  detail: string;
  checks: ExportCheck[];
  /** The forget id the export is about, when the checks got that far. */
  forget?: string;
  /** The log's origin line, when the checks got that far. */
  origin?: string;
}

/** What verifyExport checks an export against. */
export interface VerifyExportOptions {
  /** The service's attestation key, the PEM file attestation.pub (text or bytes). */
  key: string | Uint8Array;
  /** The log's verifier key, the file log.vkey (text or bytes). */
  logKey: string | Uint8Array;
  /** The subject id: give it with salt, or neither. */
  subject?: string;
  /** The salt the forget returned, 64 hex digits. */
  salt?: string;
  /** A checkpoint saved earlier (a signed note): the export's log must extend it. */
  checkpoint?: string | Uint8Array;
}

/**
 * verifyExport is `shredd verify EXPORT.tar.gz --key --log-key [--subject
 * --salt] [--checkpoint]`, offline: the same verdict and reason code for the
 * same bytes. It resolves to a report (never rejects on a bad export).
 */
export async function verifyExport(bytes: Uint8Array, opts: VerifyExportOptions): Promise<ExportReport> {
  const r = await verifyExportReport(bytes, { key: opts.key, logKey: opts.logKey, subject: opts.subject, salt: opts.salt, saved: opts.checkpoint });
  const out: ExportReport = { verified: r.verified, reason: r.code, failed: r.failed, detail: r.reason, checks: r.checks };
  if (typeof r.forget === 'string') out.forget = r.forget;
  if (typeof r.origin === 'string') out.origin = r.origin;
  return out;
}
