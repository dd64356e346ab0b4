/**
 * Offline checks of what shredd signs (docs/attestation.md): the erasure
 * attestation (DSSE envelope of an in-toto Statement v1, Ed25519), its
 * holder acks, probes and the subject commitment; and the messages a
 * holder signs: its ack (attestation.md §6) and its probe answer (§6a). verifyAttestation is the strict reader of
 * evidence.ts (the one the page runs as ui/static/verify.js) on a bare
 * attestation, with the TypeScript client's result and errors. Web Crypto
 * only.
 */
import { b64 } from "./envelope.js";
import { InvalidArgument, VerifyError } from "./errors.js";
import { commitment as commitmentOf, pae as paeOf, probeMessage as probeMessageOf, readAttestation } from "./evidence.js";

export const PAYLOAD_TYPE = "application/vnd.in-toto+json";
export const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
export const PREDICATE_TYPE = "https://shredd.dev/attestation/erasure/v1";
export const CLAIM = "cryptographically erased";
export const CONDITIONS = ["cascade_closed", "workers_quiesced", "read_path_converged", "closure_intact", "backups_epoch"] as const;
const LABEL_ACK = "shredd/v1/holder-ack";

const te = new TextEncoder();

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

/**
 * probeMessage returns the exact bytes a holder signs to answer a probe
 * (attest.ProbeMessage, attestation.md §6a): the label, the probe, forget,
 * holder and nonce lines, then one line per artifact asked, per marker
 * asked and per thing found, each group sorted bytewise. It checks
 * nothing: it is the message of what was asked and found, as given.
 */
export function probeMessage(probe: string, forget: string, holder: string, nonce: string, artifacts: readonly string[],
  markers: readonly string[] = [], found: readonly string[] = []): Uint8Array {
  return te.encode(probeMessageOf(probe, forget, holder, nonce, artifacts, markers, found));
}

/** commitment returns hex SHA-256("shredd/v1/subject-commitment" ‖ 0x00 ‖ salt ‖ subject) (attestation.md §5). */
export async function commitment(subject: string, saltHex: string): Promise<string> {
  if (!/^([0-9a-f]{2})+$/.test(saltHex)) throw new VerifyError("the salt is not hex");
  const salt = new Uint8Array(saltHex.length / 2).map((_, i) => parseInt(saltHex.slice(2 * i, 2 * i + 2), 16));
  return (await commitmentOf(subject, salt)) as string;
}

/** pae is DSSE's pre-authentication encoding. */
export function pae(payloadType: string, payload: Uint8Array): Uint8Array {
  return paeOf(payloadType, payload) as Uint8Array;
}

const SPKI_ED25519 = Uint8Array.from([0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00]);

// pemOf gives a raw 32-byte Ed25519 key as the PEM file the reader takes.
function pemOf(raw: Uint8Array): string {
  const der = new Uint8Array(SPKI_ED25519.length + raw.length);
  der.set(SPKI_ED25519);
  der.set(raw, SPKI_ED25519.length);
  return "-----BEGIN PUBLIC KEY-----\n" + b64(der) + "\n-----END PUBLIC KEY-----\n";
}

/** Attestation is a verified erasure attestation. */
export interface Attestation {
  readonly forget: string;
  readonly commitment: string;
  readonly keyId: string;
  readonly conditions: Readonly<Record<string, string>>;
  readonly artifacts: readonly { readonly id: string; readonly kind: string; readonly holder: string; readonly closed_by: string }[];
  readonly holderAcks: readonly { readonly holder: string; readonly artifacts: readonly string[] }[];
  /** The holders' signed clean answers to probes (attestation.md §6a); empty when no holder offers probes. */
  readonly probes: readonly Probe[];
  readonly predicate: Readonly<Record<string, unknown>>;
}

/** Probe is a holder's signed answer to a probe, as an attestation states it: it found nothing. */
export interface Probe {
  readonly holder: string;
  readonly probe: string;
  readonly nonce: string;
  readonly askedAt: string;
  readonly answeredAt: string;
  readonly artifacts: readonly string[];
  readonly markers: readonly string[];
}

/** VerifyAttestationOptions: subject and salt (hex) open the commitment; forget pins the forget id. */
export interface VerifyAttestationOptions {
  readonly subject?: string;
  readonly salt?: string;
  readonly forget?: string;
}

/**
 * verifyAttestation checks an attestation file with the service's public
 * key (the PEM file attestation.pub, or the raw 32 bytes) as `shredd verify
 * FILE --key --subject --salt` does, through the strict reader the page
 * runs (evidence.ts): the DSSE envelope in canonical form, the key id, the
 * signature over PAE, the statement (types, claim, the five conditions ok,
 * timeline, key evidence, every holder ack's signature, every probe
 * answer's (§6a), residuals), the
 * forget id when given, and (given subject and salt) the subject
 * commitment. Throws VerifyError whose reason is the spec's reason code
 * of the refusal (docs/transparency.md §10b: "subject.mismatch",
 * "envelope.signature"...; "usage" for a salt that is not 64 hex digits,
 * or one of subject and salt without the other), and whose message says
 * why.
 */
export async function verifyAttestation(data: Uint8Array | string, publicKey: Uint8Array | string,
  o: VerifyAttestationOptions = {}): Promise<Attestation> {
  for (const k of Object.keys(o)) if (!["subject", "salt", "forget"].includes(k)) throw new InvalidArgument(`verifyAttestation: unknown option "${k}"`);
  if ((o.subject === undefined) !== (o.salt === undefined)) throw new VerifyError("the commitment needs both the subject id and the salt", "usage");
  const key = publicKey instanceof Uint8Array && publicKey.length === 32 ? pemOf(publicKey) : publicKey;
  const bytes = typeof data === "string" ? te.encode(data) : data;
  let r;
  try {
    r = await readAttestation(bytes, { key, subject: o.subject, salt: o.salt }, true);
  } catch (e) {
    throw new VerifyError(e instanceof Error ? e.message : String(e));
  }
  if (!r.verified) throw new VerifyError(`${r.code}: ${r.reason}`, r.code);
  const st = r.statement;
  const p = st.predicate;
  if (o.forget !== undefined && p.forget !== o.forget) throw new VerifyError(`the attestation is about forget ${p.forget}, not ${o.forget}`);
  const env = JSON.parse(new TextDecoder().decode(bytes));
  const conditions: Record<string, string> = {};
  for (const c of p.conditions) conditions[c.name] = c.status;
  return {
    forget: p.forget,
    commitment: st.subject[0].digest.sha256,
    keyId: env.signatures[0].keyid,
    conditions,
    artifacts: p.artifacts ?? [],
    holderAcks: (p.holder_acks ?? []).map((a: { holder: string; artifacts: string[] }) => ({ holder: a.holder, artifacts: a.artifacts })),
    probes: (p.probes ?? []).map((q: { holder: string; probe: string; nonce: string; asked_at: string; answered_at: string; artifacts: string[]; markers?: string[] }) => ({
      holder: q.holder, probe: q.probe, nonce: q.nonce, askedAt: q.asked_at, answeredAt: q.answered_at, artifacts: q.artifacts, markers: q.markers ?? [],
    })),
    predicate: p,
  };
}
