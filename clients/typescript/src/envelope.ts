/**
 * The envelope format v1 (docs/envelope.md): strict parsing of the text and
 * binary forms, the artifact key's derivation (HKDF-SHA256) and AES-256-GCM
 * sealing and opening with Web Crypto, so that it runs in Node >= 20 and in
 * browsers alike. The client uses {@link sealWithKey} to seal on the client
 * (envelope.md §4a); the rest is here so that the vectors in
 * envelope/testdata reproduce byte for byte.
 */
import { EnvelopeError } from "./errors.js";

/** Limits of envelope.md §5. */
export const MAX_KIND_LEN = 64;
export const MAX_LINEAGE = 1024;
export const MAX_PLAINTEXT = 64 * 1024 * 1024;
export const MAX_CONTEXT = 4096;
const TAG = 16;
const PREFIX = "shredd:v1:";
const LABEL_KEY = new TextEncoder().encode("shredd/v1/artifact-key\0");
const LABEL_AAD = new TextEncoder().encode("shredd/v1/aad\0");

/** Ref is one subject of a lineage: sid (32 bytes, hex) and the key's generation. */
export interface Ref {
  readonly sid: string;
  readonly gen: number;
}

/** Header is a parsed envelope header. */
export interface Header {
  readonly artifact: string;
  readonly kind: string;
  readonly lineage: readonly Ref[];
  readonly salt: Uint8Array;
  readonly nonce: Uint8Array;
  /** bytes are the header's bytes exactly as parsed. */
  readonly bytes: Uint8Array;
}

/** Envelope is a parsed envelope: its header and the AES-GCM output. */
export interface Envelope {
  readonly header: Header;
  readonly ciphertext: Uint8Array;
  readonly bytes: Uint8Array;
}

const subtle = (): SubtleCrypto => globalThis.crypto.subtle;

/** bs types bytes as Web Crypto takes them (never a SharedArrayBuffer here). */
export const bs = (u: Uint8Array): Uint8Array<ArrayBuffer> => u as Uint8Array<ArrayBuffer>;

export function hex(b: Uint8Array): string {
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}

export function unhex(s: string): Uint8Array {
  if (s.length % 2 !== 0 || !/^[0-9a-f]*$/.test(s)) throw new EnvelopeError("invalid", "not lower-case hex");
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function cmp(a: Uint8Array, b: Uint8Array): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = (a[i] as number) - (b[i] as number);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}

const malformed = (m: string): EnvelopeError => new EnvelopeError("malformed", m);

/** parseHeaderPrefix parses a header at the start of b and returns it and its length. */
function parseHeaderAt(b: Uint8Array): Header {
  if (b.length < 4 || b[0] !== 0x53 || b[1] !== 0x48 || b[2] !== 0x52 || b[3] !== 0x44) throw malformed("bad magic");
  if (b.length < 6) throw malformed("truncated header");
  if (b[4] !== 1) throw new EnvelopeError("unsupported", `version ${b[4]}`);
  if (b[5] !== 1) throw new EnvelopeError("unsupported", `alg ${b[5]}`);
  if (b.length < 23) throw malformed("truncated header");
  const artifact = hex(b.subarray(6, 22));
  const k = b[22] as number;
  if (k < 1 || k > MAX_KIND_LEN) throw malformed("bad kind length");
  if (b.length < 23 + k + 2) throw malformed("truncated header");
  const kb = b.subarray(23, 23 + k);
  for (let i = 0; i < k; i++) {
    const c = kb[i] as number;
    const alnum = (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39);
    if (!(alnum || (i > 0 && (c === 0x2e || c === 0x5f || c === 0x2d)))) throw malformed("bad kind");
  }
  const kind = new TextDecoder().decode(kb);
  let o = 23 + k;
  const n = ((b[o] as number) << 8) | (b[o + 1] as number);
  o += 2;
  if (n < 1) throw malformed("empty lineage");
  if (n > MAX_LINEAGE) throw new EnvelopeError("malformed", "lineage over 1024 refs");
  if (b.length < o + 36 * n + 44) throw malformed("truncated header");
  const lineage: Ref[] = [];
  let prev: Uint8Array | undefined;
  for (let i = 0; i < n; i++) {
    const sid = b.subarray(o, o + 32);
    if (prev !== undefined && cmp(prev, sid) >= 0) throw malformed("lineage not in strictly ascending sid order");
    prev = sid;
    const dv = new DataView(b.buffer, b.byteOffset + o + 32, 4);
    lineage.push({ sid: hex(sid), gen: dv.getUint32(0) });
    o += 36;
  }
  const salt = b.slice(o, o + 32);
  const nonce = b.slice(o + 32, o + 44);
  o += 44;
  return { artifact, kind, lineage, salt, nonce, bytes: b.slice(0, o) };
}

/** parseHeader parses header bytes alone (nothing may follow the nonce), as POST /v1/datakey answers them. */
export function parseHeader(b: Uint8Array): Header {
  const h = parseHeaderAt(b);
  if (h.bytes.length !== b.length) throw malformed("bytes after the nonce");
  return h;
}

/** parse parses a binary envelope strictly (envelope.md §2). */
export function parse(b: Uint8Array): Envelope {
  const header = parseHeaderAt(b);
  const ct = b.slice(header.bytes.length);
  if (ct.length < TAG) throw malformed("ciphertext shorter than the tag");
  if (ct.length > MAX_PLAINTEXT + TAG) throw new EnvelopeError("malformed", "ciphertext over the limit");
  return { header, ciphertext: ct, bytes: b.slice() };
}

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

function encode64(b: Uint8Array, alpha: string, pad: boolean): string {
  let s = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const v = ((b[i] as number) << 16) | ((b[i + 1] as number) << 8) | (b[i + 2] as number);
    s += alpha[v >> 18]! + alpha[(v >> 12) & 63]! + alpha[(v >> 6) & 63]! + alpha[v & 63]!;
  }
  const r = b.length - i;
  if (r === 1) {
    const v = (b[i] as number) << 16;
    s += alpha[v >> 18]! + alpha[(v >> 12) & 63]! + (pad ? "==" : "");
  } else if (r === 2) {
    const v = ((b[i] as number) << 16) | ((b[i + 1] as number) << 8);
    s += alpha[v >> 18]! + alpha[(v >> 12) & 63]! + alpha[(v >> 6) & 63]! + (pad ? "=" : "");
  }
  return s;
}

/** decode64 decodes strictly: only the alphabet, canonical padding (or none) and zero unused bits. */
function decode64(s: string, alpha: string, pad: boolean): Uint8Array | undefined {
  if (pad) {
    if (s.length % 4 !== 0) return undefined;
    if (s.endsWith("==")) s = s.slice(0, -2);
    else if (s.endsWith("=")) s = s.slice(0, -1);
  }
  if (s.length % 4 === 1) return undefined;
  const out = new Uint8Array(Math.floor((s.length * 3) / 4));
  let acc = 0;
  let bits = 0;
  let o = 0;
  for (let i = 0; i < s.length; i++) {
    const v = alpha.indexOf(s[i]!);
    if (v < 0) return undefined;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
      acc &= (1 << bits) - 1;
    }
  }
  if (acc !== 0) return undefined; // non-zero unused bits
  return out;
}

/** b64 is standard base64 with padding, what the JSON API carries. */
export function b64(b: Uint8Array): string {
  return encode64(b, B64, true);
}

/** unb64 decodes standard padded base64 strictly; undefined when it is not canonical. */
export function unb64(s: string): Uint8Array | undefined {
  return decode64(s, B64, true);
}

/** toText returns the envelope's text form, shredd:v1:<base64url>. */
export function toText(envelope: Uint8Array): string {
  return PREFIX + encode64(envelope, B64URL, false);
}

/** fromText decodes a text form strictly (envelope.md §1) and parses the envelope. */
export function fromText(text: string): Envelope {
  if (!text.startsWith(PREFIX)) {
    const m = /^shredd:v(0|[1-9][0-9]{0,2}):/.exec(text);
    if (m !== null && Number(m[1]) <= 255) throw new EnvelopeError("unsupported", `text prefix of version ${m[1]}`);
    throw malformed("no shredd:v1: prefix");
  }
  const b = decode64(text.slice(PREFIX.length), B64URL, false);
  if (b === undefined) throw malformed("bad base64url");
  return parse(b);
}

function checkSizes(plaintext: Uint8Array, context: Uint8Array): void {
  if (plaintext.length > MAX_PLAINTEXT) throw new EnvelopeError("too_large", "plaintext over 64 MiB");
  if (context.length > MAX_CONTEXT) throw new EnvelopeError("too_large", "context over 4096 bytes");
}

function aad(header: Uint8Array, context: Uint8Array): Uint8Array {
  const len = new Uint8Array(4);
  new DataView(len.buffer).setUint32(0, context.length);
  return concat(LABEL_AAD, header, len, context);
}

/**
 * deriveKey derives the artifact key K_a (envelope.md §3) from a parsed
 * header and one 32-byte subject key per ref, keys[i] the key of lineage[i]
 * in header order.
 */
export async function deriveKey(header: Header, keys: readonly Uint8Array[]): Promise<Uint8Array> {
  if (keys.length !== header.lineage.length || keys.some((k) => k.length !== 32)) {
    throw new EnvelopeError("invalid", "one 32-byte key per lineage ref is needed");
  }
  const ikm = concat(...keys);
  // HKDF-SHA256 (RFC 5869) spelled out with HMAC: one Expand block for
  // L = 32. Web Crypto's HKDF would do, but Node's caps info at 1024 bytes
  // and a header of 1024 refs is 36997.
  let prk: Uint8Array | undefined;
  try {
    prk = await hmac(header.salt, ikm);
    return await hmac(prk, concat(LABEL_KEY, header.bytes, Uint8Array.of(1)));
  } finally {
    ikm.fill(0);
    prk?.fill(0);
  }
}

async function hmac(key: Uint8Array, msg: Uint8Array): Promise<Uint8Array> {
  const k = await subtle().importKey("raw", bs(key), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, bs(msg)));
}

/**
 * sealWithKey seals a plaintext with header bytes and their artifact key
 * (envelope.md §4a) and returns the binary envelope. A data key seals one
 * plaintext: never call it twice with one header.
 */
export async function sealWithKey(headerBytes: Uint8Array, key: Uint8Array, plaintext: Uint8Array,
  context: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
  checkSizes(plaintext, context);
  if (key.length !== 32) throw new EnvelopeError("invalid", "the artifact key is not 32 bytes");
  const h = parseHeader(headerBytes);
  const k = await subtle().importKey("raw", bs(key), "AES-GCM", false, ["encrypt"]);
  const ct = await subtle().encrypt({ name: "AES-GCM", iv: bs(h.nonce), additionalData: bs(aad(h.bytes, context)), tagLength: 128 }, k, bs(plaintext));
  return concat(h.bytes, new Uint8Array(ct));
}

/** openWithKey opens a parsed envelope with its artifact key; EnvelopeError "open_failed" when it does not authenticate. */
export async function openWithKey(env: Envelope, key: Uint8Array, context: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
  if (context.length > MAX_CONTEXT) throw new EnvelopeError("too_large", "context over 4096 bytes");
  const k = await subtle().importKey("raw", bs(key), "AES-GCM", false, ["decrypt"]);
  try {
    const pt = await subtle().decrypt(
      { name: "AES-GCM", iv: bs(env.header.nonce), additionalData: bs(aad(env.header.bytes, context)), tagLength: 128 }, k, bs(env.ciphertext));
    return new Uint8Array(pt);
  } catch {
    throw new EnvelopeError("open_failed", "authentication failed");
  }
}

/**
 * open opens an envelope with the subject keys of its lineage: `keys` pairs
 * each ref (sid hex, gen) with its key, in any order. A missing, extra or
 * other-generation key is EnvelopeError "invalid"; a wrong key, context or
 * byte is "open_failed", never saying which.
 */
export async function open(env: Envelope, keys: ReadonlyArray<{ ref: Ref; key: Uint8Array }>,
  context: Uint8Array = new Uint8Array(0)): Promise<Uint8Array> {
  const ordered: Uint8Array[] = [];
  if (keys.length !== env.header.lineage.length) throw new EnvelopeError("invalid", "the keys do not match the lineage");
  for (const r of env.header.lineage) {
    const k = keys.find((x) => x.ref.sid === r.sid && x.ref.gen === r.gen);
    if (k === undefined) throw new EnvelopeError("invalid", "the keys do not match the lineage");
    ordered.push(k.key);
  }
  const ka = await deriveKey(env.header, ordered);
  try {
    return await openWithKey(env, ka, context);
  } finally {
    ka.fill(0);
  }
}
