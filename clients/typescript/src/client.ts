/**
 * The shredd client: one part per concept of the API (docs/api.md), over
 * the platform's fetch and Web Crypto, with no other dependency.
 */
import * as envelope from "./envelope.js";
import { EnvelopeError, InvalidArgument, ShreddError, WaitTimeout, errorFromItem } from "./errors.js";
import { Transport, type RequestOptions, type Response } from "./http.js";
import { checkBytes, checkID, checkKeys, checkString, checkStrings } from "./options.js";
import {
  STATES, type AckResult, type Artifact, type Encrypted, type Epoch, type Forget, type ForgetPage, type Health, type Holder,
  type HolderPage, type HolderStatus, type InventoryItem, type InventoryReport, type Kind, type Lease, type Preview, type PurgeWork,
  type RawEncrypted, type Result, type Sealed, type State,
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

/** Source is what an artifact is made of: its kind, and subjects and/or parents and/or leases. */
export interface Source {
  readonly kind: string;
  readonly subjects?: readonly string[];
  readonly parents?: readonly string[];
  readonly leases?: readonly string[];
  readonly holder?: string;
}
const SOURCE_KEYS = ["kind", "subjects", "parents", "leases", "holder"] as const;

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
}
const DECRYPT_KEYS = ["ciphertext", "context", "holder"] as const;

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
   * read decrypts and releases the lease at once, for a caller that keeps
   * no copy of the plaintext beyond its own use of the returned bytes.
   * A failed release is thrown after the plaintext is cleared.
   */
  async read(r: DecryptRequest): Promise<Uint8Array> {
    const d = await this.decrypt(r);
    try {
      await d.release();
    } catch (e) {
      d.plaintext.fill(0);
      throw e;
    }
    return d.plaintext;
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
    const resp = await this.c.request("POST", "/v1/encrypt/raw", {
      body: checkBytes(r.plaintext, "encryptRaw: plaintext"), contentType: "application/octet-stream", headers: h,
    });
    return { envelope: resp.body, artifact: resp.headers.get("Shredd-Artifact") ?? "", lineage_size: Number(resp.headers.get("Shredd-Lineage-Size") ?? 0) };
  }
  /** decryptRaw opens a binary envelope; the answer's lease id is `lease`: release it. */
  async decryptRaw(env: Uint8Array, o: { readonly context?: Uint8Array; readonly holder?: string } = {}):
    Promise<{ plaintext: Uint8Array; artifact: string; kind: string; lease: string; leaseExpires: string }> {
    checkKeys(o, ["context", "holder"], "decryptRaw");
    const h: [string, string][] = [];
    if (o.context !== undefined && o.context.length > 0) h.push(["Shredd-Context", envelope.b64(o.context)]);
    if (o.holder !== undefined) h.push(["Shredd-Holder", o.holder]);
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
    return { artifact: h.artifact, lineage_size: h.lineage.length, envelope: env, ciphertext: envelope.toText(env) };
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

