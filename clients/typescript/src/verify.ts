/**
 * Offline checks of what shredd signs (docs/attestation.md): the erasure
 * attestation (DSSE envelope of an in-toto Statement v1, Ed25519), its
 * holder acks and the subject commitment; and the holder ack message
 * (attestation.md §6). Web Crypto only.
 */
import { b64, bs, hex, unb64 } from "./envelope.js";
import { InvalidArgument, VerifyError } from "./errors.js";

export const PAYLOAD_TYPE = "application/vnd.in-toto+json";
export const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
export const PREDICATE_TYPE = "https://shredd.dev/attestation/erasure/v1";
export const CLAIM = "cryptographically erased";
export const CONDITIONS = ["cascade_closed", "workers_quiesced", "read_path_converged", "closure_intact", "backups_epoch"] as const;
const LABEL_ACK = "shredd/v1/holder-ack";
const LABEL_COMMITMENT = "shredd/v1/subject-commitment\0";

const te = new TextEncoder();
const subtle = (): SubtleCrypto => globalThis.crypto.subtle;

function checkIdent(what: string, v: string): void {
  if (typeof v !== "string" || v.length < 1 || v.length > 256 || !/^[\x21-\x7e]+$/.test(v)) {
    throw new InvalidArgument(`the ${what} id must be 1 to 256 printable ASCII characters without spaces`);
  }
}

function byteCmp(a: string, b: string): number {
  // ids are ASCII: UTF-16 order is byte order.
  return a < b ? -1 : a > b ? 1 : 0;
}

/** ackMessage returns the exact bytes a holder signs to ack a purge (attestation.md §6). */
export function ackMessage(forget: string, holder: string, artifacts: readonly string[]): Uint8Array {
  checkIdent("forget", forget);
  checkIdent("holder", holder);
  const ids = [...new Set(artifacts)].sort(byteCmp);
  if (ids.length === 0) throw new InvalidArgument("an ack names at least one artifact");
  for (const a of ids) checkIdent("artifact", a);
  const lines = [LABEL_ACK, "forget " + forget, "holder " + holder, ...ids.map((a) => "artifact " + a)];
  return te.encode(lines.join("\n") + "\n");
}

/** commitment returns hex SHA-256("shredd/v1/subject-commitment" ‖ 0x00 ‖ salt ‖ subject) (attestation.md §5). */
export async function commitment(subject: string, saltHex: string): Promise<string> {
  if (!/^([0-9a-f]{2})+$/.test(saltHex)) throw new VerifyError("the salt is not hex");
  const salt = new Uint8Array(saltHex.length / 2).map((_, i) => parseInt(saltHex.slice(2 * i, 2 * i + 2), 16));
  const s = te.encode(subject);
  const l = te.encode(LABEL_COMMITMENT);
  const msg = new Uint8Array(l.length + salt.length + s.length);
  msg.set(l);
  msg.set(salt, l.length);
  msg.set(s, l.length + salt.length);
  return hex(new Uint8Array(await subtle().digest("SHA-256", bs(msg))));
}

/** pae is DSSE's pre-authentication encoding. */
export function pae(payloadType: string, payload: Uint8Array): Uint8Array {
  const t = te.encode(payloadType);
  const head = te.encode(`DSSEv1 ${t.length} `);
  const mid = te.encode(` ${payload.length} `);
  const out = new Uint8Array(head.length + t.length + mid.length + payload.length);
  out.set(head);
  out.set(t, head.length);
  out.set(mid, head.length + t.length);
  out.set(payload, head.length + t.length + mid.length);
  return out;
}

const SPKI_ED25519 = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

/** publicKeyRaw returns the raw 32-byte Ed25519 key of a PEM PUBLIC KEY (attestation.pub) or raw bytes. */
export function publicKeyRaw(key: Uint8Array | string): Uint8Array {
  if (key instanceof Uint8Array && key.length === 32) return key;
  const pem = typeof key === "string" ? key : new TextDecoder().decode(key);
  const m = /-----BEGIN PUBLIC KEY-----([\s\S]*?)-----END PUBLIC KEY-----/.exec(pem);
  const der = m ? unb64(m[1]!.replace(/\s+/g, "")) : undefined;
  if (der === undefined || der.length !== 44 || SPKI_ED25519.some((b, i) => der[i] !== b)) throw new VerifyError("not an Ed25519 public key");
  return der.slice(12);
}

async function verifySig(pub: Uint8Array, sig: Uint8Array, msg: Uint8Array, what: string): Promise<void> {
  let ok = false;
  try {
    const k = await subtle().importKey("raw", bs(pub), { name: "Ed25519" }, false, ["verify"]);
    ok = await subtle().verify({ name: "Ed25519" }, k, bs(sig), bs(msg));
  } catch {
    ok = false;
  }
  if (!ok) throw new VerifyError(`${what}: the signature does not verify`);
}

function canon64(s: unknown, what: string): Uint8Array {
  if (typeof s !== "string") throw new VerifyError(`${what} is not a string`);
  const b = unb64(s);
  if (b === undefined || b64(b) !== s) throw new VerifyError(`${what} is not canonical base64`);
  return b;
}

function obj(v: unknown, what: string): Record<string, unknown> {
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new VerifyError(`${what} is not an object`);
  return v as Record<string, unknown>;
}

/** Attestation is a verified erasure attestation. */
export interface Attestation {
  readonly forget: string;
  readonly commitment: string;
  readonly keyId: string;
  readonly conditions: Readonly<Record<string, string>>;
  readonly artifacts: readonly { readonly id: string; readonly kind: string; readonly holder: string; readonly closed_by: string }[];
  readonly holderAcks: readonly { readonly holder: string; readonly artifacts: readonly string[] }[];
  readonly predicate: Readonly<Record<string, unknown>>;
}

/** VerifyAttestationOptions: subject and salt (hex) open the commitment; forget pins the forget id. */
export interface VerifyAttestationOptions {
  readonly subject?: string;
  readonly salt?: string;
  readonly forget?: string;
}

/**
 * verifyAttestation checks an attestation file with the service's public
 * key (PEM or raw): the DSSE envelope, the key id, the signature over PAE,
 * the statement's types, the claim, the five conditions ok, every holder
 * ack's signature, the forget id when given, and (given subject and salt)
 * the subject commitment. Throws VerifyError naming the check that failed.
 */
export async function verifyAttestation(data: Uint8Array | string, publicKey: Uint8Array | string,
  o: VerifyAttestationOptions = {}): Promise<Attestation> {
  for (const k of Object.keys(o)) if (!["subject", "salt", "forget"].includes(k)) throw new InvalidArgument(`verifyAttestation: unknown option "${k}"`);
  const pub = publicKeyRaw(publicKey);
  let env: Record<string, unknown>;
  try {
    env = obj(JSON.parse(typeof data === "string" ? data : new TextDecoder("utf-8", { fatal: true }).decode(data)), "the attestation");
  } catch (e) {
    if (e instanceof VerifyError) throw new VerifyError("the attestation is not a DSSE envelope");
    throw new VerifyError("the attestation is not JSON");
  }
  const keys = Object.keys(env).sort().join(",");
  if (keys !== "payload,payloadType,signatures") throw new VerifyError("the attestation is not a DSSE envelope");
  if (env["payloadType"] !== PAYLOAD_TYPE) throw new VerifyError(`payload type ${JSON.stringify(env["payloadType"])}, want ${PAYLOAD_TYPE}`);
  const sigs = env["signatures"];
  if (!Array.isArray(sigs) || sigs.length !== 1) throw new VerifyError("an attestation holds exactly one signature");
  const sig = obj(sigs[0], "the signature");
  const keyId = hex(new Uint8Array(await subtle().digest("SHA-256", bs(pub))));
  if (sig["keyid"] !== keyId) throw new VerifyError(`signed by key id ${JSON.stringify(sig["keyid"])}, not by the given key ${keyId}`);
  const payload = canon64(env["payload"], "payload");
  await verifySig(pub, canon64(sig["sig"], "sig"), pae(PAYLOAD_TYPE, payload), "attestation");
  let st: Record<string, unknown>;
  try {
    st = obj(JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload)), "the statement");
  } catch {
    throw new VerifyError("the statement is not JSON");
  }
  if (st["_type"] !== STATEMENT_TYPE || st["predicateType"] !== PREDICATE_TYPE) throw new VerifyError(`not an in-toto Statement v1 of predicate ${PREDICATE_TYPE}`);
  const subj = st["subject"];
  const s0 = Array.isArray(subj) && subj.length === 1 ? obj(subj[0], "the subject") : undefined;
  const digest = s0 !== undefined && s0["name"] === "subject-commitment" ? obj(s0["digest"], "the digest") : undefined;
  if (digest === undefined || Object.keys(digest).join() !== "sha256" || typeof digest["sha256"] !== "string") {
    throw new VerifyError("the statement's subject is not one subject-commitment");
  }
  const commit = digest["sha256"];
  const p = obj(st["predicate"], "the predicate");
  if (p["claim"] !== CLAIM) throw new VerifyError(`claim ${JSON.stringify(p["claim"])}, want ${JSON.stringify(CLAIM)}`);
  const forget = p["forget"];
  if (typeof forget !== "string") throw new VerifyError("the predicate names no forget");
  if (o.forget !== undefined && forget !== o.forget) throw new VerifyError(`the attestation is about forget ${forget}, not ${o.forget}`);
  const conds: Record<string, string> = {};
  for (const c of Array.isArray(p["conditions"]) ? p["conditions"] : []) {
    const co = obj(c, "a condition");
    if (typeof co["name"] === "string" && typeof co["status"] === "string") conds[co["name"]] = co["status"];
  }
  for (const name of CONDITIONS) if (conds[name] !== "ok") throw new VerifyError(`condition ${name} is ${JSON.stringify(conds[name] ?? null)}, not ok`);
  const acks: { holder: string; artifacts: string[] }[] = [];
  const rawAcks = p["holder_acks"] ?? [];
  if (!Array.isArray(rawAcks)) throw new VerifyError("holder_acks is not a list");
  for (const [i, a] of rawAcks.entries()) {
    const ack = obj(a, `holder ack ${i}`);
    const holder = ack["holder"];
    const arts = ack["artifacts"];
    if (typeof holder !== "string" || !Array.isArray(arts) || arts.some((x) => typeof x !== "string")) throw new VerifyError(`holder ack ${i} is malformed`);
    let msg: Uint8Array;
    try {
      msg = ackMessage(forget, holder, arts as string[]);
    } catch {
      throw new VerifyError(`holder ack ${i} is malformed`);
    }
    await verifySig(canon64(ack["public_key"], "holder key"), canon64(ack["signature"], "ack signature"), msg, `holder ack ${i} (${holder})`);
    acks.push({ holder, artifacts: arts as string[] });
  }
  if (o.subject !== undefined || o.salt !== undefined) {
    if (o.subject === undefined || o.salt === undefined) throw new VerifyError("the commitment needs both the subject id and the salt");
    if ((await commitment(o.subject, o.salt)) !== commit) throw new VerifyError("the subject id and salt do not open the commitment");
  }
  const artifacts = (Array.isArray(p["artifacts"]) ? p["artifacts"] : []) as Attestation["artifacts"];
  return { forget, commitment: commit, keyId, conditions: conds, artifacts, holderAcks: acks, predicate: p };
}
