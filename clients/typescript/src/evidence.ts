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
 * "timeline", "key evidence", "holder acks", "holder probes", "residuals",
 * "subject"; an
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
  labelHolderProbe: 'shredd/v1/holder-probe',
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
// evidence, ack, probe, residual, key).
class FormatError extends Error {
  kind: string;
  code: string | undefined;
  constructor(kind: string, message: string, code?: string) { super(message); this.kind = kind; this.code = code; }
}
function bad(kind: string, msg: string, code?: string): never { throw new FormatError(kind, msg, code); }

// ---- the spec's character classes (docs/transparency.md §10a) ----
// Listed as the spec lists them, never a language's idea of a space or
// its trim: every reader in every language holds the same lists.

// INVISIBLE: Unicode White_Space, the control (Cc) and format (Cf)
// characters and the default-ignorable code points (Unicode 15.1), as
// inclusive ranges in order.
const INVISIBLE: readonly (readonly [number, number])[] = [
  [0x0000, 0x0020], [0x007f, 0x00a0], [0x00ad, 0x00ad], [0x034f, 0x034f],
  [0x0600, 0x0605], [0x061c, 0x061c], [0x06dd, 0x06dd], [0x070f, 0x070f],
  [0x0890, 0x0891], [0x08e2, 0x08e2], [0x115f, 0x1160], [0x1680, 0x1680],
  [0x17b4, 0x17b5], [0x180b, 0x180f], [0x2000, 0x200f], [0x2028, 0x202f],
  [0x205f, 0x206f], [0x3000, 0x3000], [0x3164, 0x3164], [0xfe00, 0xfe0f],
  [0xfeff, 0xfeff], [0xffa0, 0xffa0], [0xfff0, 0xfffb], [0x110bd, 0x110bd],
  [0x110cd, 0x110cd], [0x13430, 0x1343f], [0x1bca0, 0x1bca3], [0x1d173, 0x1d17a],
  [0xe0000, 0xe0fff],
];
// WS: Unicode White_Space (Go's unicode.IsSpace), the code points a
// signed-note key name may not hold.
const WS: readonly (readonly [number, number])[] = [
  [0x0009, 0x000d], [0x0020, 0x0020], [0x0085, 0x0085], [0x00a0, 0x00a0],
  [0x1680, 0x1680], [0x2000, 0x200a], [0x2028, 0x2029], [0x202f, 0x202f],
  [0x205f, 0x205f], [0x3000, 0x3000],
];
function inRanges(c: number, rs: readonly (readonly [number, number])[]): boolean {
  for (const [lo, hi] of rs) {
    if (c < lo) return false;
    if (c <= hi) return true;
  }
  return false;
}
// blank: every code point of s is INVISIBLE (the empty string too). A
// condition's evidence and a residual's description must not be blank;
// nothing is trimmed: " x " is not blank and is kept as it is.
function blank(s: string): boolean {
  for (const ch of s) if (!inRanges(ch.codePointAt(0)!, INVISIBLE)) return false;
  return true;
}
// hasSpace: s holds a code point of WS.
function hasSpace(s: string): boolean {
  for (const ch of s) if (inRanges(ch.codePointAt(0)!, WS)) return true;
  return false;
}

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
// validPath is the one spelling of a member's path (§10a.3): not empty,
// not absolute, no empty, "." or ".." segment; one final "/" is allowed
// (untarStrict allows it on a directory only).
function validPath(p: string): boolean {
  if (p === '' || p[0] === '/') return false;
  const segs = (p.endsWith('/') ? p.slice(0, -1) : p).split('/');
  return segs.every((c) => c !== '' && c !== '.' && c !== '..');
}
// samePath is the path two spellings of one member share: a directory's
// path without its final "/".
const samePath = (p: string) => (p.endsWith('/') ? p.slice(0, -1) : p);
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
    if (name === null || !validPath(name)) refuse('tar.path', 'an empty, absolute, non-UTF-8 path, or one with an empty, . or .. segment');
    if (typ === '5' && size !== 0) refuse('tar.header', 'a directory with data');
    if (size > C.maxFileSize) refuse('bundle.size', 'a file over ' + C.maxFileSize + ' bytes');
    const end = off + 512 + size, pad = (512 - (size % 512)) % 512;
    if (end + pad > t.length) refuse('tar.truncated', 'tar data cut');
    if (typ !== '5' && name.endsWith('/')) refuse('tar.path', 'a file path ending in /');
    // A directory's path may end in "/" or not: both spellings name one
    // path (§10a.3).
    const key = samePath(name);
    if (seen.has(key)) refuse('tar.duplicate', 'a path twice');
    seen.add(key);
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
// checkLogKeyFile reads the log's verifier key file (§10a.1): UTF-8
// without BOM, one line "<name>+<key hash>+<base64 key>" of a signed-note
// Ed25519 key whose hash is its own, optionally followed by one LF, and
// nothing else. It resolves to the line.
async function checkLogKeyFile(b?: any): Promise<string> {
  checkText(b);
  const s = oneLine(text(b));
  if (s === null || !(await parseKeyLine(s, NOTE_ALG_ED25519))) refuse('logkey.format', 'not one signed-note Ed25519 verifier key line');
  return s;
}
// oneLine is the line of a one-line key file: its text, or its text but
// one final LF; null for an empty line or another LF.
function oneLine(s: string): string | null {
  const line = s.endsWith('\n') ? s.slice(0, -1) : s;
  return line !== '' && !line.includes('\n') ? line : null;
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
// The signed-note type bytes of an Ed25519 log key and of a
// cosignature/v1 witness key, and the most signature lines of a note.
const NOTE_ALG_ED25519 = 0x01;
const COSIGNATURE_ALG = 0x04;
const MAX_NOTE_SIGS = 100;

// validNoteName is the spec's rule for a key name: non-empty, no '+'
// and no code point of WS.
const validNoteName = (n: string) => n !== '' && !n.includes('+') && !hasSpace(n);
// keyHash is the signed-note key hash of a key of type alg, as 8
// lower-case hex digits: SHA-256(name ‖ LF ‖ alg ‖ key)[:4].
async function keyHash(name: string, alg: number, pub: Uint8Array): Promise<string> {
  return hex((await sha256(concat(utf8.encode(name + '\n'), new Uint8Array([alg]), pub))).slice(0, 4));
}
// parseKeyLine reads a verifier key of type alg, "<name>+<key hash>+<base64
// key>": a valid name, exactly 8 lower-case hex digits that are the key's
// hash, the canonical base64 of alg and a 32-byte Ed25519 key; nothing
// before or after. null when it is not one.
async function parseKeyLine(s: string, alg: number): Promise<any> {
  // Split at the first two '+' only: the base64 key may hold more.
  const i = s.indexOf('+'), j = i < 0 ? -1 : s.indexOf('+', i + 1);
  if (j < 0) return null;
  const name = s.slice(0, i), h = s.slice(i + 1, j);
  if (!validNoteName(name) || !/^[0-9a-f]{8}$/.test(h)) return null;
  const raw = b64canon(s.slice(j + 1));
  if (!raw || raw.length !== 33 || raw[0] !== alg) return null;
  const pub = raw.slice(1);
  if ((await keyHash(name, alg, pub)) !== h) return null;
  return { name, hash: h, pub, line: s };
}

// ---- signed notes and checkpoints (§10a.8) ----
// Read byte for byte, not as note.Open does (it skips a second line of a
// key it verified, unchecked).

// parseNote splits a signed note into its text and signature lines
// (§10a.8 rules 1 to 4): no byte below 0x20 but LF, the text up to the
// last empty line, at most 100 lines "— <name> <base64>", each a valid
// name and canonical base64 of at least 5 bytes, and no two lines of one
// name and key hash. Anything else is the format code given. The text is
// checked (text.*) by the caller.
function parseNote(s: string, format: string): any {
  if (hasControl(s)) refuse(format, 'a control character in the note');
  const split = s.lastIndexOf('\n\n');
  if (split < 0) refuse(format, 'no signature block');
  const noteText = s.slice(0, split + 1), block = s.slice(split + 2);
  if (block === '' || !block.endsWith('\n')) refuse(format, 'no signature line, or a last line without LF');
  const sigs: any[] = [];
  const seen = new Set<string>();
  for (const line of block.slice(0, -1).split('\n')) {
    const sl = parseSigLine(line);
    if (!sl) refuse(format, 'a malformed signature line');
    if (sigs.length === MAX_NOTE_SIGS) refuse(format, 'more than ' + MAX_NOTE_SIGS + ' signature lines');
    const k = sl.name + '\n' + sl.hash;
    if (seen.has(k)) refuse(format, 'two signature lines of key ' + sl.name);
    seen.add(k);
    sigs.push(sl);
  }
  return { text: noteText, sigs };
}
// hasControl: s holds a code point below 0x20 other than LF.
function hasControl(s: string): boolean {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) < 0x20 && s.charCodeAt(i) !== 0x0a) return true;
  return false;
}
// parseSigLine reads one signature line: U+2014, one space, a valid name,
// one space, the canonical base64 of at least 5 bytes (a 4-byte key hash
// and the signature). null when it is not one.
function parseSigLine(line: string): any {
  if (!line.startsWith('\u2014 ')) return null;
  const rest = line.slice(2);
  const sp = rest.indexOf(' ');
  if (sp < 0) return null;
  const name = rest.slice(0, sp);
  const b = b64canon(rest.slice(sp + 1));
  if (!validNoteName(name) || !b || b.length < 5) return null;
  return { name, hash: hex(b.slice(0, 4)), sig: b.slice(4) };
}
// findSig is the signature line of key k, or undefined.
const findSig = (sigs: any[], k: any) => sigs.find((l) => l.name === k.name && l.hash === k.hash);

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
// openCheckpoint opens a signed checkpoint with the log key (§10a.8):
// its text (text.*), the note (parseNote: codes.format), the log key's
// line present and valid (codes.signature), the text a checkpoint
// (codes.format) of the key's origin (codes.origin). It resolves to the
// checkpoint with the note's text and lines.
async function openCheckpoint(bytes?: any, v?: any, codes?: any): Promise<any> {
  checkText(bytes);
  const n = parseNote(text(bytes), codes.format);
  const l = findSig(n.sigs, v);
  if (!l || !(await ed25519Verify(v.pub, l.sig, utf8.encode(n.text)))) refuse(codes.signature, 'verification failed: no valid signature by the log key');
  let c;
  try { c = parseCheckpoint(n.text); } catch (e: any) { if (e instanceof FormatError) refuse(codes.format, 'malformed checkpoint'); throw e; }
  if (c.origin !== v.name) refuse(codes.origin, 'verification failed: origin ' + JSON.stringify(c.origin) + ' signed by key ' + JSON.stringify(v.name));
  return { ...c, text: n.text, sigs: n.sigs };
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
  // A probe (attest.Probe): its lists as Go writes them (nil is null, not
  // [] as Statement.Marshal makes the others), markers omitted when empty.
  const omitEmpty = (name: string, v?: any, item?: any) =>
    v === null || v === undefined || (Array.isArray(v) && v.length === 0) ? '' : ',"' + name + '":' + goList(v, item, false);
  const probe = (q?: any) => {
    const x = goObj(q);
    return '{"holder":' + goStr(x.holder) + ',"probe":' + goStr(x.probe) + ',"nonce":' + goStr(x.nonce) +
      ',"asked_at":' + parseTime(x.asked_at).canon + ',"answered_at":' + parseTime(x.answered_at).canon +
      ',"artifacts":' + goList(x.artifacts, goStr, true) + omitEmpty('markers', x.markers, goStr) +
      ',"found":' + goList(x.found, goStr, true) + ',"signature":' + goBytes(x.signature) + '}';
  };
  return '{"_type":' + goStr(o._type) + ',"subject":' + goList(o.subject, subj, true) + ',"predicateType":' + goStr(o.predicateType) +
    ',"predicate":{"forget":' + goStr(p.forget) + ',"claim":' + goStr(p.claim) +
    ',"timeline":{"requested":' + parseTime(tl.requested).canon + ',"committed":' + parseTime(tl.committed).canon +
    ',"shredded":' + parseTime(tl.shredded).canon + ',"erased":' + parseTime(tl.erased).canon + '}' +
    ',"key_evidence":{"root_store":' + goStr(ke.root_store) + ',"retired_root_versions":' + goList(ke.retired_root_versions, int64, true) + rkc +
    ',"epoch":' + int64(ke.epoch) + '}' +
    ',"artifacts":' + goList(p.artifacts, art, true) + ',"conditions":' + goList(p.conditions, cond, true) +
    ',"holder_acks":' + goList(p.holder_acks, ack, true) + ',"residuals":' + goList(p.residuals, res, true) +
    omitEmpty('probes', p.probes, probe) + '}}';
}
function ackMessage(forget?: any, holder?: any, artifacts?: any): any {
  const ids = artifacts.slice().sort((a?: any, b?: any) => (a < b ? -1 : a > b ? 1 : 0)); // byte order: ids are ASCII
  return C.labelHolderAck + '\nforget ' + forget + '\nholder ' + holder + '\n' + ids.map((id?: any) => 'artifact ' + id + '\n').join('');
}
// byteOrder compares strings as Go does, by their UTF-8 bytes (code
// points), not by UTF-16 code units as < does.
function byteOrder(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0)!), y = Array.from(b, (c) => c.codePointAt(0)!);
  for (let i = 0; i < x.length && i < y.length; i++) if (x[i] !== y[i]) return x[i]! < y[i]! ? -1 : 1;
  return x.length - y.length;
}
/**
 * probeMessage returns the exact bytes (as text) a holder signs to answer
 * a probe (attest.ProbeMessage, docs/attestation.md §6a): the label, the
 * probe, forget, holder and nonce lines, then one line per artifact asked,
 * per marker asked and per thing found, each group sorted bytewise.
 */
export function probeMessage(probe: string, forget: string, holder: string, nonce: string,
  artifacts: readonly string[], markers: readonly string[] | null | undefined, found: readonly string[] | null | undefined): string {
  let m = C.labelHolderProbe + '\nprobe ' + probe + '\nforget ' + forget + '\nholder ' + holder + '\nnonce ' + nonce + '\n';
  for (const [word, ids] of [['asked', artifacts], ['marker', markers], ['found', found]] as const) {
    for (const id of (ids || []).slice().sort(byteOrder)) m += word + ' ' + id + '\n';
  }
  return m;
}
const lowerHex = (s: string, n: number) => s.length === n && /^[0-9a-f]*$/.test(s);
const sortedUnique = (xs: readonly string[]) => xs.every((x, i) => i === 0 || byteOrder(xs[i - 1]!, x) < 0);
// validateProbes is attest's validateProbes (§6a), after the acks: each
// probe by a holder with an ack here, under its ack key, about artifacts
// its acks close, asked after the commit and answered before the erasure,
// found nothing.
async function validateProbes(p?: any): Promise<void> {
  // A holder's key (its last ack's, as Go's map) and every artifact its
  // acks close, over all of its acks (a holder may ack a forget in parts).
  const keys = new Map(), closed = new Map();
  for (const h of p.holder_acks) {
    keys.set(h.holder, h.public_key);
    if (!closed.has(h.holder)) closed.set(h.holder, new Set());
    for (const id of h.artifacts) closed.get(h.holder).add(id);
  }
  const committed = parseTime(p.timeline.committed).ns, erased = parseTime(p.timeline.erased).ns;
  const seen = new Set();
  for (const q of p.probes || []) {
    const key = keys.get(q.holder);
    const no = (why: string) => bad('probe', 'probe ' + q.probe + ' of holder ' + q.holder + ': ' + why);
    const arts: string[] = q.artifacts || [], markers: string[] = q.markers || [];
    if (key === undefined) no('the holder has no ack here');
    if (!lowerHex(q.probe, 32) || seen.has(q.probe)) no('the probe id is not 32 lower-case hex digits, or is repeated');
    if (!lowerHex(q.nonce, 64)) no('the nonce is not 64 lower-case hex digits');
    if (arts.length === 0 || !sortedUnique(arts) || !sortedUnique(markers)) no('the artifacts asked are empty, or the artifacts or markers are not sorted and unique');
    if (q.found === null || q.found.length !== 0) no('the probe found something (or its found is null, not [])');
    const asked = parseTime(q.asked_at), answered = parseTime(q.answered_at);
    if (!asked.utc || !answered.utc || asked.ns < committed || answered.ns < asked.ns || answered.ns > erased) {
      no('asked before the commit, answered before it was asked or after the erasure, or a time not in UTC');
    }
    for (const m of markers) if (!validID(m)) no('a marker is not printable ASCII');
    for (const id of arts) if (!closed.get(q.holder).has(id)) no('artifact ' + id + ' is not one its acks close');
    const sig = q.signature === null ? null : b64decode(q.signature, false);
    if (!sig || sig.length !== 64 || !(await ed25519Verify(b64decode(key, false), sig, probeMessage(q.probe, p.forget, q.holder, q.nonce, arts, markers, q.found)))) {
      no('the signature does not verify under the holder\'s ack key');
    }
    seen.add(q.probe);
  }
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
    if (blank(cd.evidence)) bad('condition', 'condition ' + cd.name + ' is ok without evidence');
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
  await validateProbes(p);
  const kinds = new Set();
  for (const r of p.residuals) {
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(r.kind) || blank(r.description)) bad('residual', 'residual ' + JSON.stringify(r.kind) + ': the kind must be lower-case snake_case and the description non-empty');
    kinds.add(r.kind);
  }
  if (!kinds.has('root_store_snapshots')) bad('residual', 'residual root_store_snapshots missing');
  if (p.holder_acks.length > 0 && !kinds.has('holder_trust')) bad('residual', 'residual holder_trust missing: the attestation relies on holder acks');
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
const toBytes = (x?: any) => (x === undefined || x === null ? null : typeof x === 'string' ? utf8.encode(x) : x);
// Usage is a malformed input of the verifier's own (docs/transparency.md §10a: a salt that is not
// 64 hex digits, a subject without a salt, a number of witnesses out of
// range): nothing was checked. Its code is "usage", not a refusal of the
// evidence; check names the input.
class Usage extends FormatError {
  check: string;
  constructor(check: string, message: string) { super('format', message, 'usage'); this.check = check; }
}
function usage(check: string, msg: string): never { throw new Usage(check, msg); }
// failWith records a refusal (a FormatError with its code, a Usage, or a
// CheckError) as the report's failure; anything else is rethrown.
function failWith(r: any, check: string, e: any): void {
  if (e instanceof Usage) { r.fail(e.check, e.message); r.code = e.code; } else if (e instanceof FormatError && e.code) { r.fail(check, e.message); r.code = e.code; } else if (e instanceof CheckError) r.fail(e.check, e.message);
  else throw e;
}

// parseSalt is the verifier's salt (§10a): exactly 64 hex digits (0-9, a-f,
// A-F), nothing else; null otherwise.
function parseSalt(s: string): Uint8Array | null {
  return /^[0-9a-fA-F]{64}$/.test(s) ? unhex(s) : null;
}
// subjectAndSalt reads the subject id (its bytes exactly, §10a.7) and the
// salt (parseSalt) of opts: both or neither (neither only when optional),
// else a usage error. The salt is null when neither is given.
function subjectAndSalt(opts: any, optional: boolean): { subject: string; salt: Uint8Array | null } {
  const subject = opts.subject === undefined || opts.subject === null ? '' : String(opts.subject);
  const saltText = opts.salt === undefined || opts.salt === null ? '' : String(opts.salt);
  if (subject === '' && saltText === '') {
    if (optional) return { subject, salt: null };
    usage('subject', 'give the subject id and the salt the forget returned');
  }
  if ((subject === '') !== (saltText === '')) usage('keys', 'give both the subject id and the salt, or neither');
  const salt = parseSalt(saltText);
  if (!salt) usage('subject', 'the salt must be the 64 hex digits the forget returned, nothing else');
  return { subject, salt };
}

// witnessInputs reads the witnesses of `shredd verify --witness KEY ...
// --witnesses-required K` from opts (§10a.1, §13.1): witnesses is a list of key
// files (bytes, or text taken as a file's bytes), or the text of the
// page's witness field, split at LF only, each piece one key; empty
// pieces are skipped. witnessesRequired is 1 to their number (a count or
// its decimal digits; absent or "": all of them, 0). A count without
// keys, or out of range, is a usage error.
function witnessInputs(opts: any): { files: Uint8Array[]; required: number } {
  const w = opts.witnesses === undefined || opts.witnesses === null ? [] : opts.witnesses;
  const pieces: any[] = typeof w === 'string' ? w.split('\n') : Array.isArray(w) ? w : [w];
  const files = pieces.map((k) => (typeof k === 'string' ? utf8.encode(k) : k)).filter((k) => k.length > 0);
  const rq = opts.witnessesRequired;
  if (rq === undefined || rq === null || rq === '') return { files, required: 0 };
  const n = typeof rq === 'number' ? rq : /^[0-9]+$/.test(String(rq)) ? Number(rq) : NaN;
  if (files.length === 0) usage('keys', 'witnesses required needs the trusted witnesses\' keys');
  if (!Number.isSafeInteger(n) || n < 1 || n > files.length) usage('keys', 'witnesses required ' + String(rq) + ': want 1 to the ' + files.length + ' witness keys given');
  return { files, required: n };
}

// The check a bare attestation's report names for a reason code.
const attestationCheck: Record<string, string> = {
  'envelope.signature': 'signature', 'statement.claim': 'claim', 'statement.conditions': 'conditions', 'statement.timeline': 'timeline',
  'statement.key-evidence': 'key evidence', 'statement.acks': 'holder acks', 'statement.probes': 'holder probes', 'statement.residuals': 'residuals', 'subject.mismatch': 'subject',
};

// verifyAttestation is `shredd verify FILE --key [--subject --salt]`:
// opts {key (PEM), subject, salt (hex)}, the subject and the salt both or
// neither (§10b).
function verifyAttestation(bytes?: any, opts?: any): Promise<any> {
  return readAttestation(bytes, opts, true);
}

/**
 * readAttestation is verifyAttestation, the reader of a bare attestation
 * (docs/transparency.md §10b, bundle.CheckAttestation): the verifier's inputs (usage), the
 * attestation key file (text.*, key.*), the file (at most 64 MiB,
 * bundle.size), the envelope and the statement by the JSON rules and in
 * canonical form (json.*), envelope.format, envelope.signature, the
 * statement's rules (statement.*; no statement.forget: there is no
 * export), then the subject (subject.mismatch). With subjectOptional (the
 * TypeScript client's verify.verifyAttestation) an attestation given
 * neither a subject id nor a salt is checked without its commitment
 * ("subject" skipped). The report's statement is the statement, when its
 * payload is JSON, verified or not.
 */
export async function readAttestation(bytes?: any, opts?: any, subjectOptional?: boolean): Promise<any> {
  const r = report();
  let check = 'keys';
  let payload = null, st = null;
  try {
    const w = witnessInputs(opts);
    if (w.files.length > 0) usage('keys', 'witnesses apply to an export\'s checkpoint, not to an attestation file');
    const { subject, salt } = subjectAndSalt(opts, subjectOptional === true);
    if (opts.key === undefined || opts.key === null) usage('keys', 'no attestation key');
    const pub = within('the attestation key', (): any => checkPublicKeyFile(toBytes(opts.key)));
    check = 'envelope';
    if (bytes.length > C.maxEnvelope) refuse('bundle.size', 'an attestation over ' + C.maxEnvelope + ' bytes');
    payload = await verifyEnvelope(bytes, pub, C.payloadType);
    r.ok('signature', 'Ed25519 by key id ' + (await keyID(pub)));
    check = 'statement';
    st = await openStatement(payload);
    r.ok('statement', 'in-toto Statement v1, predicate ' + st.predicateType);
    r.ok('claim', JSON.stringify(st.predicate.claim) + ', 5 of 5 conditions ok');
    if (salt) {
      check = 'subject';
      if (!(await checkSubject(st, subject, salt))) refuse('subject.mismatch', 'the subject id and salt do not open the statement\'s commitment');
      r.ok('subject', 'the subject id and salt open commitment ' + st.subject[0].digest.sha256.slice(0, 16) + '...');
    } else r.skip('subject', 'not checked (no subject id and salt given)');
  } catch (e: any) {
    failWith(r, e instanceof FormatError && e.code ? attestationCheck[e.code] || check : check, e);
    if (st === null && payload !== null) { try { st = JSON.parse(text(payload)); } catch (e2: any) { st = null; } }
  }
  r.statement = st;
  return finish(r);
}

// verifyExport is `shredd verify EXPORT.tar.gz --key --log-key
// [--subject --salt] [--checkpoint] [--witness ... --witnesses-required]`
// (bundle.CheckExport): opts {key (PEM), logKey, subject, salt (hex),
// saved (a checkpoint), witnesses, witnessesRequired (witnessInputs)}.
// The report's code is the spec's reason code ("ok" when verified), the
// one `shredd verify` prints for the same inputs.
async function verifyExportReport(bytes?: any, opts?: any): Promise<any> {
  const r = report();
  let check = 'keys';
  try {
    const w = witnessInputs(opts);
    const { subject, salt } = subjectAndSalt(opts, true);
    if (opts.key === undefined || opts.key === null) usage('keys', 'no attestation key');
    if (opts.logKey === undefined || opts.logKey === null) usage('keys', 'no log key: an export needs the log\'s verifier key, obtained from the operator');
    const pub = within('the attestation key', (): any => checkPublicKeyFile(toBytes(opts.key)));
    const vline = await withinAsync('the log key', (): any => checkLogKeyFile(toBytes(opts.logKey)));
    const v = await parseKeyLine(vline, NOTE_ALG_ED25519);
    const witnesses = await witnessKeys(w.files);
    check = 'archive';
    const b = readBundle(bytes);
    r.ok('archive', 'shredd-export-' + b.forget + ': ' + b.entries.length + ' log entries');
    const step = (c?: any) => { check = c; };
    await checkBundle(b, pub, v, { subject, salt, saved: toBytes(opts.saved), witnesses, required: w.required }, r, step);
    if (!equal(b.attestationPub, toBytes(opts.key))) r.skip('keys', 'the archive\'s attestation.pub is not the key given; the given key was used');
    let archived = null;
    try { archived = await checkLogKeyFile(b.logKey); } catch (e: any) { if (!(e instanceof FormatError)) throw e; }
    if (archived !== vline) r.skip('keys', 'the archive\'s log.vkey is not the log key given; the given key was used');
  } catch (e: any) {
    failWith(r, check, e);
  }
  return finish(r);
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
  'key evidence': 'statement.key-evidence', ack: 'statement.acks', probe: 'statement.probes', residual: 'statement.residuals' };

// openStatement reads an authenticated statement (§10a.5, §10a.6): the
// JSON rules (json.*), a JSON object in canonical form (json.schema), and
// attest.Validate's rules (statement.*).
async function openStatement(payload: Uint8Array): Promise<any> {
  const { value: s } = parseJSON(payload, 'the statement');
  if (!isObj(s)) refuse('json.schema', 'statement: not a JSON object');
  let canon;
  try { canon = marshalStatement(s); } catch (e: any) { if (e instanceof FormatError) refuse('json.schema', 'statement: ' + e.message); throw e; }
  if (!equal(utf8.encode(canon), payload)) refuse('json.schema', 'statement is not in canonical form');
  try { await validateStatement(s); } catch (e: any) { if (e instanceof FormatError && !e.code) e.code = statementCode[e.kind] || 'statement.format'; throw e; }
  return s;
}

async function checkBundle(b?: any, pub?: any, v?: any, opts?: any, r?: any, step?: any): Promise<any> {
  function fail(code: string, msg: string): never { return refuse(code, msg); }
  // 1. The attestation.
  step('attestation');
  const st = await withinAsync('attestation.json', async (): Promise<any> => {
    return openStatement(await verifyEnvelope(b.attestation, pub, C.payloadType));
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
  if (opts.witnesses.length > 0) {
    // The cosignatures (§10a.8 rule 8, §13.1), as `shredd verify --witness
    // --witnesses-required` checks them.
    step('witnesses');
    const required = opts.required || opts.witnesses.length;
    const w = await checkWitnesses(cp.text, cp.sigs, opts.witnesses);
    r.witnessed = { required, valid: w.valid, missing: w.missing, invalid: w.invalid };
    if (w.valid.length < required) fail('checkpoint.witnesses', 'checkpoint: ' + shortfall(w, required));
    let line = w.valid.length + ' of ' + required + ' required cosignatures valid: ' + w.valid.map((c?: any) => c.witness + ' (' + c.time + ')').join(', ');
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
  ['text.', '§10a.1'], ['key.', '§10a.1'], ['logkey.', '§10a.1'], ['witness.', '§10a.1'],
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

// ---- witness cosignatures (§10a.8 rule 8, §13) ----

// witnessKeys reads the witness key files given (§10a.1, §13.1): each UTF-8 without
// BOM (text.*), one line "<name>+<key ID>+<base64 of 0x04 and the key>"
// optionally followed by one LF (witness.format); two with one public
// key, or one name and key ID, are witness.duplicate (a key under two
// names would count twice: cosignature/v1 does not sign the name).
async function witnessKeys(files: Uint8Array[]): Promise<any[]> {
  const out: any[] = [];
  for (const [i, f] of files.entries()) {
    const k = await withinAsync('witness key ' + (i + 1), async (): Promise<any> => {
      checkText(f);
      const line = oneLine(text(f));
      const k = line === null ? null : await parseKeyLine(line, COSIGNATURE_ALG);
      if (!k) refuse('witness.format', 'not one cosignature/v1 verifier key line');
      return k;
    });
    for (const o of out) {
      if (equal(o.pub, k.pub) || (o.name === k.name && o.hash === k.hash)) refuse('witness.duplicate', 'witness keys ' + o.name + ' and ' + k.name + ': the same key given twice');
    }
    out.push(k);
  }
  return out;
}

// MAX_DATE is 9999-12-31T23:59:59Z in POSIX seconds: a later cosignature
// time is shown as its seconds.
const MAX_DATE = 253402300799n;
// cosignedAt is a cosignature's time: a UTC date when its year is 1 to
// 9999, else "time <POSIX seconds>" (up to 2^63-1); it never throws.
function cosignedAt(t: bigint): string {
  if (t > MAX_DATE) return 'time ' + t.toString();
  return new Date(Number(t) * 1000).toISOString().replace('.000Z', 'Z');
}

// checkWitnesses sorts the trusted witnesses into those whose line
// (their name and key ID) on the note is valid, invalid or missing. Valid:
// exactly 8+64 bytes after the key ID, a timestamp at most 2^63-1, and an
// Ed25519 signature over "cosignature/v1\ntime <t>\n" and the note's text.
// A line that does not verify counts as none. Valid entries carry the
// witness, the time (cosignedAt) and the seconds (decimal).
async function checkWitnesses(noteText: string, sigs: any[], witnesses: any[]): Promise<any> {
  const r: any = { valid: [], missing: [], invalid: [] };
  for (const w of witnesses) {
    const l = findSig(sigs, w);
    if (!l) { r.missing.push(w.name); continue; }
    let t = -1n;
    if (l.sig.length === 8 + 64) {
      const ts = new DataView(l.sig.buffer, l.sig.byteOffset, 8).getBigUint64(0);
      const msg = utf8.encode('cosignature/v1\ntime ' + ts.toString() + '\n' + noteText);
      if (ts <= 0x7fffffffffffffffn && (await ed25519Verify(w.pub, l.sig.slice(8), msg))) t = ts;
    }
    if (t >= 0n) r.valid.push({ witness: w.name, time: cosignedAt(t), seconds: t.toString() });
    else r.invalid.push(w.name);
  }
  return r;
}
// shortfall says why fewer cosignatures than required are valid.
function shortfall(w: any, required: number): string {
  const why = [];
  if (w.missing.length) why.push('none from ' + w.missing.join(', '));
  if (w.invalid.length) why.push('an invalid one from ' + w.invalid.join(', '));
  return `${w.valid.length} valid of the ${required} required` + (why.length ? ` (${why.join('; ')})` : '');
}

// checkCosignatures is the witness check alone, for the page's tests:
// signed is a checkpoint note (text or bytes) whose log signature the
// caller checked, read by parseNote (text.*, checkpoint.format);
// witnessKeys are key files (witnessKeys: witness.format,
// witness.duplicate); required is how many valid cosignatures are needed
// (default: all). It resolves to {ok, valid, missing, invalid, reason};
// it rejects with a refusal (its code) on a malformed key or note.
async function checkCosignatures(signed?: any, keyFiles?: any, required?: any): Promise<any> {
  const b = typeof signed === 'string' ? utf8.encode(signed) : signed;
  checkText(b);
  const n = parseNote(text(b), 'checkpoint.format');
  const keys = await witnessKeys(keyFiles.map((k: any) => (typeof k === 'string' ? utf8.encode(k) : k)));
  const need = required === undefined ? keys.length : required;
  if (!Number.isSafeInteger(need) || need < 0) usage('keys', 'witnesses required: not a count');
  const w = await checkWitnesses(n.text, n.sigs, keys);
  const ok = w.valid.length >= need;
  return { ok, ...w, reason: ok ? '' : shortfall(w, need) };
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
export const witness = { checkCosignatures };

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
  /**
   * The witnesses trusted, each a cosignature/v1 verifier key file (text or bytes, its one line
   * and at most one final LF): the checkpoint must carry valid cosignatures of witnessesRequired
   * of them (default: all).
   */
  witnesses?: readonly (string | Uint8Array)[];
  /** How many of the witnesses must have cosigned the checkpoint: 1 to their number. */
  witnessesRequired?: number;
}

/**
 * verifyExport is `shredd verify EXPORT.tar.gz --key --log-key [--subject
 * --salt] [--checkpoint]`, offline: the same verdict and reason code for the
 * same bytes. It resolves to a report (never rejects on a bad export).
 */
export async function verifyExport(bytes: Uint8Array, opts: VerifyExportOptions): Promise<ExportReport> {
  const r = await verifyExportReport(bytes, { key: opts.key, logKey: opts.logKey, subject: opts.subject, salt: opts.salt, saved: opts.checkpoint,
    witnesses: opts.witnesses, witnessesRequired: opts.witnessesRequired });
  const out: ExportReport = { verified: r.verified, reason: r.code, failed: r.failed, detail: r.reason, checks: r.checks };
  if (typeof r.forget === 'string') out.forget = r.forget;
  if (typeof r.origin === 'string') out.origin = r.origin;
  return out;
}
