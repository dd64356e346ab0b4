/**
 * The holder kit: a component that keeps plaintext derived from shredd data
 * (an ANN index's vectors, a prompt cache) registers each such artifact,
 * and on a forget purges it and signs an Ed25519 ack that shredd checks
 * before it calls the forget erased (docs/api.md, attestation.md §6). The
 * kit does the protocol; the holder supplies the purge. A holder that
 * declares probes (declareProbes) also answers, through probeOnce, shredd's
 * questions about its retrieval path (attestation.md §6a): the holder
 * supplies the search, its application's own query path.
 */
import type { Client, Source } from "./client.js";
import { InvalidArgument, ShreddError } from "./errors.js";
import { checkKeys } from "./options.js";
import type { AckResult, Artifact, Holder, InventoryItem, InventoryReport, ProbeResult, ProbeWork, PurgeWork } from "./types.js";
import { ackMessage, probeMessage } from "./verify.js";
import { bs } from "./envelope.js";

const subtle = (): SubtleCrypto => globalThis.crypto.subtle;

/** PurgeCallback deletes the plaintext of work.artifacts and returns the ids deleted (undefined: all). */
export type PurgeCallback = (work: PurgeWork) => Promise<readonly string[] | undefined> | readonly string[] | undefined;

/** PurgeOutcome is one open forget handled by a round. */
export type PurgeOutcome =
  | { readonly forget: string; readonly ok: true; readonly ack: AckResult | undefined }
  | { readonly forget: string; readonly ok: false; readonly error: unknown };

/**
 * ProbeFunc runs the holder application's own retrieval path (its index,
 * caches and replicas: not the primary store alone) for a forget's
 * artifact ids and markers and returns those it still returns ([]: none).
 * Throwing answers nothing (the probe is asked again).
 */
export type ProbeFunc = (forget: string, artifacts: string[], markers: string[]) => Promise<readonly string[]> | readonly string[];

/** ProbeOutcome is one probe handled by probeOnce: what the path found and shredd's reading, or the error. */
export type ProbeOutcome =
  | { readonly probe: string; readonly forget: string; readonly ok: true; readonly found: readonly string[]; readonly result: ProbeResult }
  | { readonly probe: string; readonly forget: string; readonly ok: false; readonly error: unknown };

/** HolderKit signs and sends the purge acks (and probe answers) of one holder. */
export class HolderKit {
  readonly holder: string;
  readonly #c: Client;
  readonly #key: CryptoKeyPair;
  #pub: Uint8Array | undefined;

  /** constructor takes an Ed25519 key pair (HolderKit.generateKey, or importKey). */
  constructor(client: Client, holder: string, key: CryptoKeyPair) {
    if (key.privateKey.algorithm.name !== "Ed25519") throw new InvalidArgument("a holder key is an Ed25519 key pair");
    this.#c = client;
    this.holder = holder;
    this.#key = key;
  }

  /** generateKey makes a new Ed25519 key pair (extractable, so that it can be saved with exportKey). */
  static async generateKey(): Promise<CryptoKeyPair> {
    return (await subtle().generateKey({ name: "Ed25519" }, true, ["sign", "verify"])) as CryptoKeyPair;
  }
  /** exportKey returns the private key as PKCS #8 DER (store it like a password). */
  static async exportKey(key: CryptoKeyPair): Promise<Uint8Array> {
    return new Uint8Array(await subtle().exportKey("pkcs8", key.privateKey));
  }
  /** importKey loads a PKCS #8 DER Ed25519 private key saved by exportKey. */
  static async importKey(pkcs8: Uint8Array): Promise<CryptoKeyPair> {
    const privateKey = await subtle().importKey("pkcs8", bs(pkcs8), { name: "Ed25519" }, true, ["sign"]);
    const jwk = await subtle().exportKey("jwk", privateKey);
    const publicKey = await subtle().importKey("jwk", { kty: jwk.kty!, crv: jwk.crv!, x: jwk.x! }, { name: "Ed25519" }, true, ["verify"]);
    return { privateKey, publicKey };
  }

  /** publicKey is the raw 32-byte public key shredd registers. */
  async publicKey(): Promise<Uint8Array> {
    this.#pub ??= new Uint8Array(await subtle().exportKey("raw", this.#key.publicKey));
    return this.#pub;
  }
  /** register records the holder and its key; it needs an admin client once. */
  async register(admin: Client = this.#c): Promise<{ holder: Holder; created: boolean }> {
    return admin.holders.register(this.holder, await this.publicKey());
  }
  /** registerArtifact registers a plaintext-held artifact of this holder, before the plaintext is kept. */
  async registerArtifact(s: Omit<Source, "holder">): Promise<Artifact> {
    checkKeys(s, ["kind", "subjects", "parents", "leases", "unit", "independent", "independentOf"], "registerArtifact");
    return this.#c.artifacts.register({ ...s, holder: this.holder });
  }
  /** signAck signs the ack message of attestation.md §6. */
  async signAck(forget: string, artifacts: readonly string[]): Promise<Uint8Array> {
    return new Uint8Array(await subtle().sign({ name: "Ed25519" }, this.#key.privateKey, bs(ackMessage(forget, this.holder, artifacts))));
  }
  /** ack signs and sends one ack. */
  async ack(forget: string, artifacts: readonly string[]): Promise<AckResult> {
    return this.#c.holders.ack(forget, this.holder, [...new Set(artifacts)], await this.signAck(forget, artifacts));
  }
  /**
   * purge runs one round: fetches the purge work, calls the callback per
   * open forget and acks the ids it returns (never an id the forget did
   * not ask for). A callback that throws acks nothing for that forget: it
   * stays open and comes back next round; the other forgets go on.
   */
  async purge(callback: PurgeCallback): Promise<PurgeOutcome[]> {
    const out: PurgeOutcome[] = [];
    for (const work of await this.#c.holders.purges(this.holder)) {
      try {
        const done = (await callback(work)) ?? work.artifacts;
        const asked = new Set(work.artifacts);
        const stray = done.filter((a) => !asked.has(a));
        if (stray.length > 0) throw new ShreddError(`shredd: purge: the callback returned ${stray.length} id(s) forget ${work.forget} did not ask for`, "invalid_argument");
        out.push({ forget: work.forget, ok: true, ack: done.length > 0 ? await this.ack(work.forget, done) : undefined });
      } catch (error) {
        out.push({ forget: work.forget, ok: false, error });
      }
    }
    return out;
  }
  /** declareProbes records that this holder answers probes, with its compaction interval ("10m", or seconds). */
  async declareProbes(compactInterval: string | number): Promise<string> {
    return this.#c.holders.declareProbes(this.holder, compactInterval);
  }
  /** withdrawProbes withdraws it: acks alone close again. */
  async withdrawProbes(): Promise<void> {
    return this.#c.holders.withdrawProbes(this.holder);
  }
  /** probes returns the probes this holder must answer now. */
  async probes(): Promise<ProbeWork[]> {
    return this.#c.holders.probes(this.holder);
  }
  /** signProbe signs the answer found to probe: the probe message of attestation.md §6a. */
  async signProbe(probe: ProbeWork, found: readonly string[]): Promise<Uint8Array> {
    const m = probeMessage(probe.probe, probe.forget, this.holder, probe.nonce, probe.artifacts, probe.markers, found);
    return new Uint8Array(await subtle().sign({ name: "Ed25519" }, this.#key.privateKey, bs(m)));
  }
  /** answerProbe signs and sends the answer to probe: what the retrieval path returned of what was asked ([]: nothing). */
  async answerProbe(probe: ProbeWork, found: readonly string[]): Promise<ProbeResult> {
    if (typeof found === "string" || !Array.isArray(found)) throw new InvalidArgument("found is a list of ids and markers");
    return this.#c.holders.answerProbe(this.holder, probe.probe, found, await this.signProbe(probe, found));
  }
  /**
   * probeOnce fetches the open probes and answers each: probe(forget,
   * artifacts, markers) runs the application's retrieval path, and the kit
   * signs and sends what it returns (each once). A function that throws,
   * or returns something that was not asked, answers nothing for that
   * probe (it is asked again after its deadline); the others go on.
   */
  async probeOnce(probe: ProbeFunc): Promise<ProbeOutcome[]> {
    const out: ProbeOutcome[] = [];
    for (const w of await this.probes()) {
      try {
        const got = await probe(w.forget, [...w.artifacts], [...(w.markers ?? [])]);
        if (typeof got === "string" || !Array.isArray(got)) throw new InvalidArgument("the probe function returns a list of ids and markers");
        const found = [...new Set(got)];
        const asked = new Set([...w.artifacts, ...(w.markers ?? [])]);
        const stray = found.find((f) => !asked.has(f));
        if (stray !== undefined) throw new ShreddError(`shredd: probe ${w.probe}: the path returned ${JSON.stringify(stray)}, which was not asked: nothing answered`, "invalid_argument");
        out.push({ probe: w.probe, forget: w.forget, ok: true, found, result: await this.answerProbe(w, found) });
      } catch (error) {
        out.push({ probe: w.probe, forget: w.forget, ok: false, error });
      }
    }
    return out;
  }
  /** reportInventory tells shredd everything the holder holds (the whole list). */
  async reportInventory(items: readonly InventoryItem[]): Promise<InventoryReport & { clean: boolean }> {
    const r = await this.#c.holders.inventory(this.holder, items);
    return { ...r, clean: r.unknown_artifacts.length + r.unknown_kinds.length + r.contradicted_acks.length === 0 };
  }
}
