/**
 * The shredd client: one part per concept of the API (docs/api.md), over
 * the platform's fetch and Web Crypto, with no other dependency.
 */
import * as envelope from "./envelope.js";
import { EnvelopeError, InvalidArgument, ShreddError, WaitTimeout, errorFromItem } from "./errors.js";
import { Transport, type RequestOptions, type Response } from "./http.js";
import { checkBytes, checkID, checkKeys, checkString, checkStrings, checkUnit } from "./options.js";
import {
  STATES, type AckResult, type Artifact, type Encrypted, type Epoch, type Forget, type ForgetPage, type Health, type Holder,
  type HolderPage, type HolderStatus, type InventoryItem, type InventoryReport, type Kind, type Lease, type Preview, type ProbeResult, type ProbeWork, type PurgeWork,
  type RawEncrypted, type Reinstatement, type Result, type Sealed, type State,
} from "./types.js";

/** MAX_BATCH is the most items one batch call may hold. */
export const MAX_BATCH = 1000;
/** DEFAULT_URL is the address of a server started with no flags. */
export const DEFAULT_URL = "http://127.0.0.1:7750";

/** ClientOptions: every field optional; unknown keys are an InvalidArgument. */
export interface ClientOptions {
  /** token is the bearer token (shredd token create). */
  readonly token?: string;
  /** timeoutMs bounds one attempt of a call (default 60000). */
  readonly timeoutMs?: number;
  /** retries of idempotent calls only (default 2). */
  readonly retries?: number;
  readonly backoffMs?: number;
  readonly userAgent?: string;
  /** maxResponse bounds the bytes read from one answer (default 256 MiB). */
  readonly maxResponse?: number;
  /** fetch replaces globalThis.fetch (a dispatcher with a private CA, ...). */
  readonly fetch?: typeof globalThis.fetch;
}
const CLIENT_KEYS = ["token", "timeoutMs", "retries", "backoffMs", "userAgent", "maxResponse", "fetch"] as const;

/**
 * Source is what an artifact is made of: its kind, and subjects and/or
 * parents and/or leases. Every read (a decrypt's lease) of the same token
 * (and holder, and unit) still attributable must be named here (`leases`,
 * or its artifact in `parents`) or declared independent (`independentOf`,
 * or `independent: true`); otherwise the server refuses the write with
 * UndeclaredDerivation (409), or, for a token created with
 * `--reads inherit`, gives it those reads' lineage (`inherited`).
 */
export interface Source {
  readonly kind: string;
  readonly subjects?: readonly string[];
  readonly parents?: readonly string[];
  /** leases: ids of the decrypt leases it was made from; each acts as a parent. */
  readonly leases?: readonly string[];
  readonly holder?: string;
  /** unit: the unit of work (1-64 of A-Za-z0-9._:-); Client.unit() sets it. */
  readonly unit?: string;
  /** independent: "I derived nothing from any read I do not name here". */
  readonly independent?: boolean;
  /** independentOf: lease ids of reads this artifact was not derived from (wire: independent_of). */
  readonly independentOf?: readonly string[];
}
const SOURCE_KEYS = ["kind", "subjects", "parents", "leases", "holder", "unit", "independent", "independentOf"] as const;

/** EncryptRequest is one artifact to seal. */
export interface EncryptRequest extends Source {
  readonly plaintext: Uint8Array;
  /** context is bound into the ciphertext and needed again to decrypt. */
  readonly context?: Uint8Array;
}
const ENCRYPT_KEYS = [...SOURCE_KEYS, "plaintext", "context"] as const;

/** DecryptRequest is one ciphertext to open. */
export interface DecryptRequest {
  readonly ciphertext: string;
  readonly context?: Uint8Array;
  readonly holder?: string;
  /** unit: the unit of work whose read this is (the lease answers it); Client.unit() sets it. */
  readonly unit?: string;
}
const DECRYPT_KEYS = ["ciphertext", "context", "holder", "unit"] as const;

/** DecryptRawOptions of decryptRaw. */
export interface DecryptRawOptions {
  readonly context?: Uint8Array;
  readonly holder?: string;
  readonly unit?: string;
}

/** RawDecrypted is what decryptRaw answers; `lease` is the lease id. */
export interface RawDecrypted {
  readonly plaintext: Uint8Array;
  readonly artifact: string;
  readonly kind: string;
  readonly lease: string;
  readonly leaseExpires: string;
}

/** RegisterRequest registers a plaintext-held artifact of a holder. */
export interface RegisterRequest extends Source {
  readonly holder: string;
}

/** WaitOptions of forgets.wait. */
export interface WaitOptions {
  readonly timeoutMs?: number;
  readonly intervalMs?: number;
  /** verify (default true) evaluates the conditions on each poll; false only reads. */
  readonly verify?: boolean;
}

const te = new TextEncoder();

function json(r: Response): unknown {
  return JSON.parse(new TextDecoder().decode(r.body));
}

function sourceWire(s: Source, what: string, keys: readonly string[]): Record<string, unknown> {
  checkKeys(s, keys, what);
  const w: Record<string, unknown> = { kind: checkString(s.kind, what + ": kind") };
  if (typeof (s as { subjects?: unknown }).subjects === "string") {
    throw new InvalidArgument(`${what}: subjects is an array of subject ids, not one string`);
  }
  const subjects = checkStrings(s.subjects, what + ": subjects");
  const parents = checkStrings(s.parents, what + ": parents").map((p) => checkID(p, what + ": parent"));
  const leases = checkStrings(s.leases, what + ": leases").map((p) => checkID(p, what + ": lease"));
  if (subjects.length + parents.length + leases.length === 0) {
    throw new InvalidArgument(`${what}: an artifact needs subjects, parents or leases`);
  }
  if (subjects.length) w["subjects"] = subjects;
  if (parents.length) w["parents"] = parents;
  if (leases.length) w["leases"] = leases;
  if (s.holder !== undefined) w["holder"] = checkString(s.holder, what + ": holder");
  if (s.unit !== undefined) w["unit"] = checkUnit(s.unit, what + ": unit");
  if (s.independent !== undefined) {
    if (typeof s.independent !== "boolean") throw new InvalidArgument(`${what}: independent is true or false`);
    if (s.independent) w["independent"] = true;
  }
  const indep = checkStrings(s.independentOf, what + ": independentOf").map((p) => checkID(p, what + ": independentOf lease"));
  if (indep.length) w["independent_of"] = indep;
  return w;
}

function encryptWire(r: EncryptRequest, what: string): Record<string, unknown> {
  const w = sourceWire(r, what, ENCRYPT_KEYS);
  w["plaintext"] = envelope.b64(checkBytes(r.plaintext, what + ": plaintext"));
  if (r.context !== undefined && checkBytes(r.context, what + ": context").length > 0) w["context"] = envelope.b64(r.context);
  return w;
}

function decryptWire(r: DecryptRequest, what: string): Record<string, unknown> {
  checkKeys(r, DECRYPT_KEYS, what);
  const w: Record<string, unknown> = { ciphertext: checkString(r.ciphertext, what + ": ciphertext") };
  if (r.context !== undefined && checkBytes(r.context, what + ": context").length > 0) w["context"] = envelope.b64(r.context);
  if (r.holder !== undefined) w["holder"] = checkString(r.holder, what + ": holder");
  if (r.unit !== undefined) w["unit"] = checkUnit(r.unit, what + ": unit");
  return w;
}

function unb64(s: unknown, what: string): Uint8Array {
  const b = typeof s === "string" ? envelope.unb64(s) : undefined;
  if (b === undefined) throw new ShreddError(`shredd: the server answered ${what} that is not base64`, "invalid_answer");
  return b;
}

function checkBatch(items: readonly unknown[], what: string): void {
  if (!Array.isArray(items) || items.length === 0) throw new InvalidArgument(`${what}: an empty batch`);
}

function chunks<T>(xs: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += MAX_BATCH) out.push(xs.slice(i, i + MAX_BATCH));
  return out;
}

/**
 * Decrypted is an opened artifact and its lease. Release the lease once the
 * plaintext is dropped: `await d.release()`, or declare it with
 * `await using d = await c.sealing.decrypt(...)` and it is released at the
 * end of the block, also when the block throws.
 */
export class Decrypted implements AsyncDisposable {
  readonly plaintext: Uint8Array;
  readonly artifact: string;
  readonly kind: string;
  readonly lease: Lease;
  readonly #client: Client;
  #released = false;
  constructor(c: Client, d: Record<string, unknown>) {
    this.#client = c;
    this.plaintext = unb64(d["plaintext"], "a plaintext");
    this.artifact = d["artifact"] as string;
    this.kind = d["kind"] as string;
    this.lease = d["lease"] as Lease;
  }
  /** text is the plaintext as UTF-8. */
  get text(): string {
    return new TextDecoder().decode(this.plaintext);
  }
  /** release ends the lease (idempotent; once per object). */
  async release(): Promise<Lease | undefined> {
    if (this.#released) return undefined;
    const l = await this.#client.leases.release(this.lease.id);
    this.#released = true;
    return l;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

class Part {
  protected readonly c: Client;
  constructor(c: Client) {
    this.c = c;
  }
  protected async call(method: string, path: string, body?: unknown, o: Omit<RequestOptions, "body"> = {}): Promise<Response> {
    return this.c.request(method, path, { ...o, ...(body === undefined ? {} : { body: te.encode(JSON.stringify(body)) }) });
  }
}

/** Kinds: the registered artifact kinds (GET /v1/kinds, PUT /v1/kinds/{kind}). */
export class Kinds extends Part {
  async list(): Promise<Kind[]> {
    return (json(await this.call("GET", "/v1/kinds", undefined, { idempotent: true })) as { kinds: Kind[] }).kinds;
  }
  /** put registers a kind (admin); created is true when it is new. */
  async put(name: string, description = ""): Promise<{ kind: Kind; created: boolean }> {
    const r = await this.call("PUT", "/v1/kinds/" + encodeURIComponent(checkString(name, "kind")),
      description ? { description } : undefined, { idempotent: true });
    return { kind: json(r) as Kind, created: r.status === 201 };
  }
  /** ensure registers each kind not registered yet (admin). */
  async ensure(...names: string[]): Promise<void> {
    const have = new Set((await this.list()).map((k) => k.name));
    for (const n of names) if (!have.has(n)) await this.put(n);
  }
}

/**
 * Sealing: encrypt/decrypt, batches, raw bodies, and sealing on the client.
 * None of these calls is retried: an encrypt lost in transit may have
 * registered its artifact, and a decrypt issues a lease.
 */
export class Sealing extends Part {
  /** encrypt seals one artifact on the server. */
  async encrypt(r: EncryptRequest): Promise<Encrypted> {
    return json(await this.call("POST", "/v1/encrypt", encryptWire(r, "encrypt"))) as Encrypted;
  }
  /** decrypt opens a ciphertext; Shredded once a subject of its lineage is forgotten. Release the lease it carries. */
  async decrypt(r: DecryptRequest): Promise<Decrypted> {
    return new Decrypted(this.c, json(await this.call("POST", "/v1/decrypt", decryptWire(r, "decrypt"))) as Record<string, unknown>);
  }
  /**
   * read decrypts and answers the plaintext only. The lease is not
   * released: the caller holds the plaintext, and a release says "I
   * dropped it"; the lease runs to its expiry. Either way the read stays
   * attributable until then: a later write of this token (and holder)
   * names it or declares it independent (use a unit: Client.unit()).
   */
  async read(r: DecryptRequest): Promise<Uint8Array> {
    return (await this.decrypt(r)).plaintext;
  }
  /** encryptBatch seals items (split into calls of MAX_BATCH); one result per item, in order. */
  async encryptBatch(items: readonly EncryptRequest[]): Promise<Result<Encrypted>[]> {
    checkBatch(items, "encryptBatch");
    const wire = items.map((it, i) => encryptWire(it, `encryptBatch item ${i}`));
    const out: Result<Encrypted>[] = [];
    for (const chunk of chunks(wire)) {
      const r = await this.call("POST", "/v1/encrypt", { batch_input: chunk });
      out.push(...this.#results<Encrypted>(r, chunk.length, "POST /v1/encrypt", out.length, (d) => d as unknown as Encrypted));
    }
    return out;
  }
  /** decryptBatch opens items (split into calls of MAX_BATCH); each success carries a lease to release. */
  async decryptBatch(items: readonly (string | DecryptRequest)[]): Promise<Result<Decrypted>[]> {
    checkBatch(items, "decryptBatch");
    const wire = items.map((it, i) => decryptWire(typeof it === "string" ? { ciphertext: it } : it, `decryptBatch item ${i}`));
    const out: Result<Decrypted>[] = [];
    for (const chunk of chunks(wire)) {
      const r = await this.call("POST", "/v1/decrypt", { batch_input: chunk });
      out.push(...this.#results(r, chunk.length, "POST /v1/decrypt", out.length, (d) => new Decrypted(this.c, d)));
    }
    return out;
  }
  #results<T>(r: Response, n: number, op: string, base: number, f: (d: Record<string, unknown>) => T): Result<T>[] {
    const res = (json(r) as { batch_results: Record<string, unknown>[] }).batch_results;
    if (!Array.isArray(res) || res.length !== n) throw new ShreddError(`shredd: ${op}: ${res?.length} results for ${n} items`, "invalid_answer");
    const rid = r.headers.get("X-Request-Id") ?? "";
    return res.map((d, i): Result<T> => d["error"] !== undefined
      ? { ok: false, error: errorFromItem(d["error"] as Record<string, unknown>, `${op} item ${base + i}`, rid) }
      : { ok: true, value: f(d) });
  }
  /** encryptRaw seals through POST /v1/encrypt/raw (no base64; subject ids travel in headers, never in the URL). */
  async encryptRaw(r: EncryptRequest): Promise<RawEncrypted> {
    const w = sourceWire(r, "encryptRaw", ENCRYPT_KEYS);
    const h: [string, string][] = [["Shredd-Kind", w["kind"] as string]];
    for (const s of (w["subjects"] as string[] | undefined) ?? []) {
      if (s !== s.trim() || /[\r\n\0]/.test(s)) throw new InvalidArgument("encryptRaw: a subject id with blanks at its ends or a line break needs encrypt");
      h.push(["Shredd-Subject", s]);
    }
    for (const p of (w["parents"] as string[] | undefined) ?? []) h.push(["Shredd-Parent", p]);
    for (const p of (w["leases"] as string[] | undefined) ?? []) h.push(["Shredd-Lease", p]);
    if (r.context !== undefined && r.context.length > 0) h.push(["Shredd-Context", envelope.b64(r.context)]);
    if (r.holder !== undefined) h.push(["Shredd-Holder", r.holder]);
    if (w["unit"] !== undefined) h.push(["Shredd-Unit", w["unit"] as string]);
    if (w["independent"] === true) h.push(["Shredd-Independent", "true"]);
    if (w["independent_of"] !== undefined) h.push(["Shredd-Independent-Of", (w["independent_of"] as string[]).join(",")]);
    const resp = await this.c.request("POST", "/v1/encrypt/raw", {
      body: checkBytes(r.plaintext, "encryptRaw: plaintext"), contentType: "application/octet-stream", headers: h,
    });
    const inherited = resp.headers.get("Shredd-Inherited");
    return {
      envelope: resp.body, artifact: resp.headers.get("Shredd-Artifact") ?? "", lineage_size: Number(resp.headers.get("Shredd-Lineage-Size") ?? 0),
      ...(inherited ? { inherited: inherited.split(",").map((x) => x.trim()).filter((x) => x !== "") } : {}),
    };
  }
  /** decryptRaw opens a binary envelope; the answer's lease id is `lease`: release it. */
  async decryptRaw(env: Uint8Array, o: DecryptRawOptions = {}): Promise<RawDecrypted> {
    checkKeys(o, ["context", "holder", "unit"], "decryptRaw");
    const h: [string, string][] = [];
    if (o.context !== undefined && o.context.length > 0) h.push(["Shredd-Context", envelope.b64(o.context)]);
    if (o.holder !== undefined) h.push(["Shredd-Holder", o.holder]);
    if (o.unit !== undefined) h.push(["Shredd-Unit", checkUnit(o.unit, "decryptRaw: unit")]);
    const r = await this.c.request("POST", "/v1/decrypt/raw", { body: checkBytes(env, "decryptRaw: envelope"), contentType: "application/octet-stream", headers: h });
    const g = (k: string): string => r.headers.get(k) ?? "";
    return { plaintext: r.body, artifact: g("Shredd-Artifact"), kind: g("Shredd-Kind"), lease: g("Shredd-Lease"), leaseExpires: g("Shredd-Lease-Expires") };
  }
  /** seal is encrypt with the plaintext sealed here: one POST /v1/datakey, then AES-256-GCM on the client. */
  async seal(r: EncryptRequest): Promise<Sealed> {
    const [res] = await this.sealMany([r]);
    if (res === undefined) throw new ShreddError("shredd: seal: no result", "invalid_answer");
    if (!res.ok) throw res.error;
    return res.value;
  }
  /**
   * sealMany seals items on the client: POST /v1/datakey batches register
   * every artifact with the checks of encrypt and answer each one's header
   * and artifact key; each plaintext is sealed here into exactly the
   * envelope encrypt would have answered, and the key is zeroed. The
   * plaintexts and contexts never cross the network. One result per item,
   * in order; a failed item was not registered. Sizes are checked before
   * anything is sent.
   */
  async sealMany(items: readonly EncryptRequest[]): Promise<Result<Sealed>[]> {
    checkBatch(items, "sealMany");
    const wire = items.map((it, i) => {
      const w = sourceWire(it, `sealMany item ${i}`, ENCRYPT_KEYS);
      const pt = checkBytes(it.plaintext, `sealMany item ${i}: plaintext`);
      const ctx = it.context === undefined ? new Uint8Array(0) : checkBytes(it.context, `sealMany item ${i}: context`);
      if (pt.length > envelope.MAX_PLAINTEXT) throw new EnvelopeError("too_large", `item ${i}: plaintext over 64 MiB`);
      if (ctx.length > envelope.MAX_CONTEXT) throw new EnvelopeError("too_large", `item ${i}: context over 4096 bytes`);
      return w;
    });
    const out: Result<Sealed>[] = [];
    for (const chunk of chunks(wire)) {
      const base = out.length;
      const r = await this.call("POST", "/v1/datakey", { batch_input: chunk });
      const answers = this.#results(r, chunk.length, "POST /v1/datakey", base, (d) => d);
      for (let i = 0; i < answers.length; i++) {
        const a = answers[i]!;
        const it = items[base + i]!;
        out.push(a.ok ? { ok: true, value: await sealAnswer(a.value, it.plaintext, it.context, `POST /v1/datakey item ${base + i}`) } : a);
      }
    }
    return out;
  }
}

async function sealAnswer(d: Record<string, unknown>, plaintext: Uint8Array, context: Uint8Array | undefined, op: string): Promise<Sealed> {
  const key = unb64(d["key"], "a key");
  try {
    const header = unb64(d["header"], "a header");
    let h: envelope.Header;
    try {
      h = envelope.parseHeader(header);
    } catch (e) {
      throw new ShreddError(`shredd: ${op}: the server answered a header this client cannot seal with`, "invalid_answer", 0, "", { cause: e });
    }
    if (h.artifact !== d["artifact"] || h.lineage.length !== d["lineage_size"]) {
      throw new ShreddError(`shredd: ${op}: the header is not that of the artifact answered`, "invalid_answer");
    }
    const env = await envelope.sealWithKey(header, key, plaintext, context);
    const inherited = d["inherited"];
    return {
      artifact: h.artifact, lineage_size: h.lineage.length, envelope: env, ciphertext: envelope.toText(env),
      ...(Array.isArray(inherited) && inherited.length > 0 ? { inherited: inherited as string[] } : {}),
    };
  } finally {
    key.fill(0);
  }
}

/** Leases: release, and decrypt scoped to a callback. */
export class Leases extends Part {
  /** release ends a lease early; idempotent, so retried. */
  async release(lease: string | Lease): Promise<Lease> {
    const id = checkID(typeof lease === "string" ? lease : lease.id, "lease");
    return json(await this.call("POST", `/v1/leases/${id}/release`, undefined, { idempotent: true })) as Lease;
  }
  /**
   * with decrypts, runs fn with the opened artifact and releases the lease
   * when fn ends, also when it throws. fn's own error wins over a failed
   * release (which is attached to it as `suppressed`).
   */
  async with<T>(r: DecryptRequest, fn: (d: Decrypted) => Promise<T> | T): Promise<T> {
    const d = await this.c.sealing.decrypt(r);
    let result: T;
    try {
      result = await fn(d);
    } catch (e) {
      try {
        await d.release();
      } catch (re) {
        if (e instanceof Error) Object.defineProperty(e, "suppressed", { value: re, enumerable: false });
      }
      throw e;
    }
    await d.release();
    return result;
  }
}

/** Artifacts: plaintext-held artifacts, and look-ups. */
export class Artifacts extends Part {
  /** register records a plaintext-held artifact of a holder (never retried). */
  async register(r: RegisterRequest): Promise<Artifact> {
    const w = sourceWire(r, "register", SOURCE_KEYS);
    if (w["holder"] === undefined) throw new InvalidArgument("register: a plaintext-held artifact needs its holder");
    return json(await this.call("POST", "/v1/artifacts", w)) as Artifact;
  }
  async get(id: string): Promise<Artifact> {
    return json(await this.call("GET", "/v1/artifacts/" + checkID(id, "artifact"), undefined, { idempotent: true })) as Artifact;
  }
}

/** Forgets: forget, dry run, status, verify, wait, attestation, export. The subject id travels in the body only. */
export class Forgets extends Part {
  /** forget commits the forget of a subject; idempotent (the same forget again), so retried. Keep commitment_salt. */
  async forget(subject: string): Promise<Forget> {
    return json(await this.call("POST", "/v1/forget", { subject: checkString(subject, "subject") }, { idempotent: true })) as Forget;
  }
  /**
   * reinstate gives a forgotten subject a new key generation (an admin token);
   * nothing else does: an encrypt of a forgotten subject stays Shredded. Its
   * forget must be erased (NotErased before); a subject without a committed
   * forget to follow (live, reinstated already, never seen) is NotForgotten,
   * so it is never retried and a repeated call starts no other generation.
   * The old generation's data stays erased. `reason` is kept with the
   * reinstatement and never logged: put no personal data in it.
   */
  async reinstate(subject: string, reason?: string): Promise<Reinstatement> {
    const body: Record<string, string> = { subject: checkString(subject, "subject") };
    if (reason !== undefined && reason !== "") body["reason"] = checkString(reason, "reason");
    return json(await this.call("POST", "/v1/subjects/reinstate", body)) as Reinstatement;
  }
  /** preview is the dry run: what forget would make unreadable. Changes nothing. */
  async preview(subject: string): Promise<Preview> {
    return json(await this.call("POST", "/v1/forget", { subject: checkString(subject, "subject"), dry_run: true }, { idempotent: true })) as Preview;
  }
  async get(id: string): Promise<Forget> {
    return json(await this.call("GET", "/v1/forgets/" + checkID(id, "forget"), undefined, { idempotent: true })) as Forget;
  }
  async page(o: { readonly state?: State; readonly limit?: number; readonly cursor?: string } = {}): Promise<ForgetPage> {
    checkKeys(o, ["state", "limit", "cursor"], "forgets.page");
    return json(await this.call("GET", "/v1/forgets", undefined, { idempotent: true, query: { state: o.state, limit: o.limit, cursor: o.cursor } })) as ForgetPage;
  }
  async *iterate(state?: State): AsyncGenerator<Forget> {
    let cursor: string | undefined;
    for (;;) {
      const p = await this.page({ ...(state ? { state } : {}), ...(cursor ? { cursor } : {}) });
      yield* p.forgets;
      if (!p.next) return;
      cursor = p.next;
    }
  }
  async verify(id: string): Promise<Forget> {
    return json(await this.call("POST", `/v1/forgets/${checkID(id, "forget")}/verify`, undefined, { idempotent: true })) as Forget;
  }
  /** wait polls (verifying) until the forget is in state; WaitTimeout naming what is pending otherwise. */
  async wait(id: string, state: State = "erased", o: WaitOptions = {}): Promise<Forget> {
    checkKeys(o, ["timeoutMs", "intervalMs", "verify"], "forgets.wait");
    if (!STATES.includes(state)) throw new InvalidArgument(`forgets.wait: unknown state "${String(state)}"`);
    const timeout = o.timeoutMs ?? 60_000;
    const deadline = Date.now() + timeout;
    for (;;) {
      const f = o.verify === false ? await this.get(id) : await this.verify(id);
      if (f.state === state) return f;
      if (Date.now() >= deadline) {
        const pending = [...(f.conditions ?? []), ...(f.verification ?? [])].filter((c) => c.status !== "ok").map((c) => c.name);
        throw new WaitTimeout(`shredd: forget ${id} is ${f.state} after ${timeout} ms, not ${state}; pending: ${pending.join(", ") || "none"}`, pending);
      }
      await new Promise((res) => setTimeout(res, o.intervalMs ?? 250));
    }
  }
  /** attestation returns the signed attestation (DSSE JSON) byte for byte; NotErased before erasure. */
  async attestation(id: string): Promise<Uint8Array> {
    return (await this.call("GET", `/v1/forgets/${checkID(id, "forget")}/attestation`, undefined, { idempotent: true })).body;
  }
  /** export returns the regulator export (.tar.gz); since > 0 adds a consistency proof from that size. */
  async export(id: string, since = 0): Promise<Uint8Array> {
    return (await this.call("GET", `/v1/forgets/${checkID(id, "forget")}/export`, undefined, { idempotent: true, query: { since: since || undefined } })).body;
  }
}

/** Holders: registration, purge work, signed acks, inventories (the holder kit drives them). */
export class Holders extends Part {
  /** register records a holder and its raw 32-byte Ed25519 public key (admin); idempotent. */
  async register(holder: string, publicKey: Uint8Array): Promise<{ holder: Holder; created: boolean }> {
    if (checkBytes(publicKey, "publicKey").length !== 32) throw new InvalidArgument("an Ed25519 public key is 32 bytes");
    const r = await this.call("POST", "/v1/holders", { holder: checkString(holder, "holder"), public_key: envelope.b64(publicKey) }, { idempotent: true });
    return { holder: json(r) as Holder, created: r.status === 201 };
  }
  async page(o: { readonly limit?: number; readonly cursor?: string } = {}): Promise<HolderPage> {
    checkKeys(o, ["limit", "cursor"], "holders.page");
    return json(await this.call("GET", "/v1/holders", undefined, { idempotent: true, query: { limit: o.limit, cursor: o.cursor } })) as HolderPage;
  }
  async list(): Promise<readonly HolderStatus[]> {
    return (await this.page()).holders;
  }
  async purges(holder: string): Promise<PurgeWork[]> {
    return (json(await this.call("GET", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/purges`, undefined, { idempotent: true })) as { purges: PurgeWork[] }).purges;
  }
  /** ack sends a signed purge ack; the same ack again is a no-op, so retried. */
  async ack(forget: string, holder: string, artifacts: readonly string[], signature: Uint8Array): Promise<AckResult> {
    return json(await this.call("POST", `/v1/forgets/${checkID(forget, "forget")}/acks`,
      { holder, artifacts: [...artifacts], signature: envelope.b64(signature) }, { idempotent: true })) as AckResult;
  }
  /**
   * declareProbes records that the holder answers probes through its
   * retrieval path (PUT /v1/holders/{id}/probe), with its compaction
   * interval: a Go duration such as "10m", or a number of seconds (1 s to
   * 30 days). Resolves to shredd's spelling ("10m0s").
   */
  async declareProbes(holder: string, compactInterval: string | number): Promise<string> {
    let d: string;
    if (typeof compactInterval === "string") d = compactInterval;
    else if (typeof compactInterval === "number" && Number.isFinite(compactInterval) && compactInterval > 0) d = `${compactInterval}s`;
    else throw new InvalidArgument("compactInterval is a Go duration (\"10m\") or a positive number of seconds");
    const r = await this.call("PUT", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/probe`, { compact_interval: d }, { idempotent: true });
    return (json(r) as { compact_interval: string }).compact_interval;
  }
  /** withdrawProbes withdraws the declaration: the holder's acks alone close again (DELETE /v1/holders/{id}/probe). */
  async withdrawProbes(holder: string): Promise<void> {
    await this.call("DELETE", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/probe`, undefined, { idempotent: true });
  }
  /** probes returns the probes the holder must answer now (GET /v1/holders/{id}/probes). */
  async probes(holder: string): Promise<ProbeWork[]> {
    return (json(await this.call("GET", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/probes`, undefined, { idempotent: true })) as { probes: ProbeWork[] }).probes;
  }
  /**
   * answerProbe sends a holder's signed answer (POST
   * /v1/holders/{id}/probes/{probe}): found is what its path returned of
   * what was asked ([]: nothing), signature its Ed25519 signature over
   * verify.probeMessage. Not retried: an answer is taken once (409 after).
   */
  async answerProbe(holder: string, probe: string, found: readonly string[], signature: Uint8Array): Promise<ProbeResult> {
    return json(await this.call("POST", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/probes/${checkID(probe, "probe")}`,
      { found: [...found], signature: envelope.b64(signature) })) as ProbeResult;
  }
  async inventory(holder: string, items: readonly InventoryItem[]): Promise<InventoryReport> {
    return json(await this.call("POST", `/v1/holders/${encodeURIComponent(checkString(holder, "holder"))}/inventory`,
      { artifacts: items.map((i) => ({ id: i.id, kind: i.kind })) }, { idempotent: true })) as InventoryReport;
  }
}

/** Log: the transparency log's checkpoint, key, proofs and tiles, as the server's text. */
export class Log extends Part {
  async checkpoint(): Promise<Uint8Array> {
    return (await this.call("GET", "/v1/log/checkpoint", undefined, { idempotent: true })).body;
  }
  async key(): Promise<string> {
    return new TextDecoder().decode((await this.call("GET", "/v1/log/key", undefined, { idempotent: true })).body).trim();
  }
  async proof(index: number, size?: number): Promise<Uint8Array> {
    return (await this.call("GET", `/v1/log/proof/${index}`, undefined, { idempotent: true, query: { size } })).body;
  }
  async consistency(old: number, nw?: number): Promise<Uint8Array> {
    return (await this.call("GET", "/v1/log/consistency", undefined, { idempotent: true, query: { old, new: nw } })).body;
  }
}

const UNIT_DECRYPT_KEYS = ["ciphertext", "context", "holder"] as const;

/**
 * Unit is a unit of work (Client.unit()): a fresh random unit id sent as
 * `unit` on each of its decrypts and writes. Its decrypts record their
 * lease ids (`leases`); each of its writes (encrypt, seal, register, their
 * batches and raw forms) names every one of them in `leases`, merged with
 * those the caller gives, so what the unit wrote carries the lineage of
 * what it read. A lease the caller declares in `independentOf` is not
 * named. close() releases the unit's leases (say so once its plaintexts
 * are dropped); the reads stay attributable until each lease's expiry
 * either way. Use `await using u = c.unit()` to close at the end of a
 * block. A unit is one task's: share it across concurrent tasks only if
 * each may have derived from the others' reads.
 */
export class Unit implements AsyncDisposable {
  /** id is the unit label: 16 random hex digits. */
  readonly id: string;
  readonly #c: Client;
  readonly #leases: string[] = [];
  #closed = false;

  constructor(c: Client, id?: string) {
    this.#c = c;
    if (id === undefined) {
      const b = crypto.getRandomValues(new Uint8Array(8));
      id = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
    }
    this.id = checkUnit(id, "unit");
  }

  /** leases are the ids of the unit's reads, in the order they were taken. */
  get leases(): readonly string[] {
    return [...this.#leases];
  }
  /** closed is true once close() ran. */
  get closed(): boolean {
    return this.#closed;
  }

  #open(what: string): void {
    if (this.#closed) throw new InvalidArgument(`unit ${this.id}: ${what} after close()`);
  }
  #record(id: string): void {
    if (id !== "" && !this.#leases.includes(id)) this.#leases.push(id);
  }
  #decryptReq(r: DecryptRequest, what: string): DecryptRequest {
    this.#open(what);
    checkKeys(r, UNIT_DECRYPT_KEYS, what);
    return { ...r, unit: this.id };
  }
  #source<S extends Source>(s: S, what: string): S {
    this.#open(what);
    if (s === null || typeof s !== "object") throw new InvalidArgument(`${what}: not an options object`);
    if (s.unit !== undefined && s.unit !== this.id) throw new InvalidArgument(`${what}: unit is set by the unit`);
    const indep = new Set(checkStrings(s.independentOf, what + ": independentOf"));
    const leases = [...checkStrings(s.leases, what + ": leases")];
    for (const l of this.#leases) if (!leases.includes(l) && !indep.has(l)) leases.push(l);
    return { ...s, unit: this.id, ...(leases.length > 0 ? { leases } : {}) };
  }

  /** decrypt opens a ciphertext as sealing.decrypt does, and records its lease. */
  async decrypt(r: DecryptRequest): Promise<Decrypted> {
    const d = await this.#c.sealing.decrypt(this.#decryptReq(r, "unit.decrypt"));
    this.#record(d.lease.id);
    return d;
  }
  /** read decrypts and answers the plaintext; the lease is the unit's until close(). */
  async read(r: DecryptRequest): Promise<Uint8Array> {
    return (await this.decrypt(r)).plaintext;
  }
  /** decryptBatch opens items; each success's lease is recorded. */
  async decryptBatch(items: readonly (string | DecryptRequest)[]): Promise<Result<Decrypted>[]> {
    const reqs = items.map((it, i) => this.#decryptReq(typeof it === "string" ? { ciphertext: it } : it, `unit.decryptBatch item ${i}`));
    const out = await this.#c.sealing.decryptBatch(reqs);
    for (const r of out) if (r.ok) this.#record(r.value.lease.id);
    return out;
  }
  /** decryptRaw opens a binary envelope and records its lease. */
  async decryptRaw(env: Uint8Array, o: Omit<DecryptRawOptions, "unit"> = {}): Promise<RawDecrypted> {
    this.#open("unit.decryptRaw");
    checkKeys(o, ["context", "holder"], "unit.decryptRaw");
    const d = await this.#c.sealing.decryptRaw(env, { ...o, unit: this.id });
    this.#record(d.lease);
    return d;
  }
  /** encrypt seals one artifact naming the unit's reads. */
  async encrypt(r: EncryptRequest): Promise<Encrypted> {
    return this.#c.sealing.encrypt(this.#source(r, "unit.encrypt"));
  }
  async encryptBatch(items: readonly EncryptRequest[]): Promise<Result<Encrypted>[]> {
    return this.#c.sealing.encryptBatch(items.map((it, i) => this.#source(it, `unit.encryptBatch item ${i}`)));
  }
  async encryptRaw(r: EncryptRequest): Promise<RawEncrypted> {
    return this.#c.sealing.encryptRaw(this.#source(r, "unit.encryptRaw"));
  }
  /** seal seals on the client (POST /v1/datakey) naming the unit's reads. */
  async seal(r: EncryptRequest): Promise<Sealed> {
    return this.#c.sealing.seal(this.#source(r, "unit.seal"));
  }
  async sealMany(items: readonly EncryptRequest[]): Promise<Result<Sealed>[]> {
    return this.#c.sealing.sealMany(items.map((it, i) => this.#source(it, `unit.sealMany item ${i}`)));
  }
  /** register records a plaintext-held artifact naming the unit's reads. */
  async register(r: RegisterRequest): Promise<Artifact> {
    return this.#c.artifacts.register(this.#source(r, "unit.register"));
  }

  /**
   * close releases every lease of the unit (idempotent). Each release is
   * tried; the first failure is thrown after all were tried. Releasing
   * says the plaintexts are dropped: the reads stay attributable to this
   * token until each lease's expiry.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    let failure: unknown;
    for (const l of this.#leases) {
      try {
        await this.#c.leases.release(l);
      } catch (e) {
        failure ??= e;
      }
    }
    if (failure !== undefined) throw failure;
  }
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * run runs fn with the unit and closes it when fn ends, also when fn
   * throws; fn's own error wins over a failed release (which is attached
   * to it as `suppressed`).
   */
  async run<T>(fn: (u: Unit) => Promise<T> | T): Promise<T> {
    let result: T;
    try {
      result = await fn(this);
    } catch (e) {
      try {
        await this.close();
      } catch (re) {
        if (e instanceof Error) Object.defineProperty(e, "suppressed", { value: re, enumerable: false });
      }
      throw e;
    }
    await this.close();
    return result;
  }
}

/**
 * Client calls one shredd server. It is safe to share: each call is one
 * fetch. Subject ids travel only in request bodies (and the raw routes'
 * headers), never in a URL; errors and their messages never hold one.
 */
export class Client {
  readonly kinds: Kinds;
  readonly sealing: Sealing;
  readonly leases: Leases;
  readonly artifacts: Artifacts;
  readonly forgets: Forgets;
  readonly holders: Holders;
  readonly log: Log;
  readonly #t: Transport;

  constructor(baseURL: string = DEFAULT_URL, options: ClientOptions = {}) {
    checkKeys(options, CLIENT_KEYS, "Client");
    this.#t = new Transport(baseURL, options.token ?? "", {
      timeoutMs: options.timeoutMs ?? 60_000, retries: options.retries ?? 2, backoffMs: options.backoffMs ?? 200,
      userAgent: options.userAgent ?? "shredd-typescript-client/1", maxResponse: options.maxResponse ?? 256 << 20,
      fetch: options.fetch ?? globalThis.fetch.bind(globalThis),
    });
    this.kinds = new Kinds(this);
    this.sealing = new Sealing(this);
    this.leases = new Leases(this);
    this.artifacts = new Artifacts(this);
    this.forgets = new Forgets(this);
    this.holders = new Holders(this);
    this.log = new Log(this);
  }

  /**
   * unit starts a unit of work: its decrypts are recorded and named by its
   * writes (see Unit). Close it: `await u.close()`, or `await using`.
   * id picks the unit label (1-64 of A-Za-z0-9._:-); default 16 random hex digits.
   */
  unit(id?: string): Unit {
    return new Unit(this, id);
  }

  /** request is the low-level call the parts use, for routes not wrapped yet. */
  request(method: string, path: string, o: RequestOptions = {}): Promise<Response> {
    return this.#t.request(method, path, o);
  }
  async health(): Promise<Health> {
    return json(await this.request("GET", "/healthz", { idempotent: true, auth: false })) as Health;
  }
  /** epoch runs a root epoch now (admin). Not retried. */
  async epoch(): Promise<Epoch> {
    return json(await this.request("POST", "/v1/epoch")) as Epoch;
  }
}

