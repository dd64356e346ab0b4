/**
 * ShreddStore: a LangGraph.js BaseStore whose values are sealed through
 * shredd and whose vector index keeps its embeddings, which are plaintext
 * derived from the values, as registered plaintext-held artifacts that the
 * holder kit purges, with a signed ack, when their subject is forgotten.
 */
import type { EmbeddingsInterface } from "@langchain/core/embeddings";
import {
  BaseStore, type GetOperation, type Item, type ListNamespacesOperation, type Operation, type OperationResults,
  type PutOperation, type SearchItem, type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { type Client, type Decrypted, type HolderKit, type ProbeOutcome, type PurgeOutcome, InvalidArgument, Shredded } from "@shredd/client";
import { type Declaration, type Step, Reads, currentStep, stampSteps, stepOf } from "./reads.js";

const SEALED = "__shredd_sealed__";
const te = new TextEncoder();
const td = new TextDecoder();

/**
 * SubjectsOfItem names the subjects of a memory from its namespace, key and
 * value (e.g. `(ns) => [ns[1]]`; a memory drawn from a group conversation
 * names every participant, so that forgetting any one of them erases it).
 */
export type SubjectsOfItem = (namespace: readonly string[], key: string, value: Readonly<Record<string, unknown>>) =>
  readonly string[] | Promise<readonly string[]>;

/** StoreIndex configures the vector index: the embeddings and the value fields to embed (default: the whole value as JSON). */
export interface StoreIndex {
  readonly embeddings: EmbeddingsInterface;
  readonly fields?: readonly string[];
}

/** ShreddStoreOptions; unknown keys are refused. */
export interface ShreddStoreOptions {
  readonly client: Client;
  /** inner keeps the sealed values (an InMemoryStore, a PostgresStore, ...), with no index of its own. */
  readonly inner: BaseStore;
  readonly subjects: SubjectsOfItem;
  /** kit is the holder of the index's embeddings (needed with index). */
  readonly kit?: HolderKit;
  readonly index?: StoreIndex;
  /** valueKind and embeddingKind name the artifacts' kinds (default "langgraph-memory", "langgraph-embedding"). */
  readonly valueKind?: string;
  readonly embeddingKind?: string;
  /** reads: each thread's unit of work and what its steps read (default Reads.shared, as the saver's). */
  readonly reads?: Reads;
}
const KEYS = ["client", "inner", "subjects", "kit", "index", "valueKind", "embeddingKind", "reads"];

interface Vector {
  readonly namespace: readonly string[];
  readonly key: string;
  readonly artifact: string;
  readonly vector: readonly number[];
}

const id = (ns: readonly string[], key: string): string => JSON.stringify([ns, key]);

function context(ns: readonly string[], key: string): Uint8Array {
  return te.encode("langgraph/store\0" + id(ns, key));
}

/** lineage is what a write says of its unit's reads, as a Source's fields. */
function lineage(d: Declaration): { unit: string; parents?: string[]; independentOf?: string[] } {
  return {
    unit: d.unit,
    ...(d.parents.length > 0 ? { parents: d.parents } : {}),
    ...(d.independentOf.length > 0 ? { independentOf: d.independentOf } : {}),
  };
}

function cosine(a: readonly number[], b: readonly number[]): number {
  let d = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i]! * (b[i] ?? 0);
    na += a[i]! * a[i]!;
    nb += (b[i] ?? 0) * (b[i] ?? 0);
  }
  return na === 0 || nb === 0 ? 0 : d / Math.sqrt(na * nb);
}

function matches(value: Record<string, unknown>, filter: Record<string, unknown> | undefined): boolean {
  return filter === undefined || Object.entries(filter).every(([k, v]) => JSON.stringify(value[k]) === JSON.stringify(v));
}

/**
 * ShreddStore seals each value (client-side, one envelope per item, bound
 * to its namespace and key) under the subjects the application names, and
 * stores the envelope in the inner store. With an index, it embeds each
 * value, registers the embedding as a plaintext-held artifact of the
 * holder (parent: the value's artifact) before it keeps it, and answers
 * searches from those vectors. purge() runs the holder kit: the
 * embeddings of a forgotten subject are deleted and acked, so the forget
 * reaches erased only once the index no longer answers with them.
 * declareProbes() and probeOnce() let shredd check that by asking: a
 * probe is answered by the index lookup that search() runs, so an
 * embedding it would still score is reported found, and keeps the forget
 * pending, whatever the ack said.
 *
 * What a graph step reads (get, search) becomes lineage of what it
 * writes: each read is made with the unit of work of the step's thread
 * and recorded in `reads` (see Reads), so the checkpoints and pending
 * writes of that thread, and the memories the step puts, name it. The
 * step is LangGraph's run config: the store stamps each operation that
 * LangGraph's AsyncBatchedStore queues with the step that queued it
 * (stampSteps; an operation that arrives unstamped from outside any step
 * is refused). A read outside any step (the application calling get) is a
 * unit of its own that no adapter write names, unless the application
 * makes it in Reads.forThread(thread, fn): then it is that thread's. Leases of what a caller
 * received run to their expiry; those of items read but not answered
 * (filtered out, past the limit, shredded) are released and declared
 * independent.
 *
 * After forget(subject): get() of the subject's items throws Shredded
 * (410); search() leaves them out (their vectors are gone after purge(),
 * and a listing without a query skips what no longer opens).
 */
export class ShreddStore extends BaseStore {
  readonly inner: BaseStore;
  readonly #c: Client;
  readonly #subjects: SubjectsOfItem;
  readonly #kit: HolderKit | undefined;
  readonly #index: StoreIndex | undefined;
  readonly #valueKind: string;
  readonly #embKind: string;
  readonly #reads: Reads;
  readonly #vectors = new Map<string, Vector>();

  constructor(o: ShreddStoreOptions) {
    super();
    for (const k of Object.keys(o)) if (!KEYS.includes(k)) throw new InvalidArgument(`ShreddStore: unknown option "${k}"`);
    if (o.index !== undefined && o.kit === undefined) throw new InvalidArgument("ShreddStore: an index needs the holder kit of its embeddings");
    this.inner = o.inner;
    this.#c = o.client;
    this.#subjects = o.subjects;
    this.#kit = o.kit;
    this.#index = o.index;
    this.#valueKind = o.valueKind ?? "langgraph-memory";
    this.#embKind = o.embeddingKind ?? "langgraph-embedding";
    if (o.reads !== undefined && !(o.reads instanceof Reads)) throw new InvalidArgument("ShreddStore: reads must be a Reads");
    this.#reads = o.reads ?? Reads.shared;
    stampSteps();
  }

  /** setup registers the kinds and the holder (needs an admin token once). */
  async setup(): Promise<void> {
    await this.#c.kinds.ensure(this.#valueKind, this.#embKind);
    if (this.#kit !== undefined) await this.#kit.register();
  }

  /** heldArtifacts lists the embeddings the index holds (for the holder's inventory). */
  heldArtifacts(): { id: string; kind: string }[] {
    return [...this.#vectors.values()].map((v) => ({ id: v.artifact, kind: this.#embKind }));
  }

  /**
   * purge runs one round of the holder kit: for each open forget, deletes
   * the embeddings it names and signs the ack for them; then reports the
   * index's inventory.
   */
  async purge(): Promise<PurgeOutcome[]> {
    if (this.#kit === undefined) return [];
    const out = await this.#kit.purge((work) => {
      const ids = new Set(work.artifacts);
      for (const [k, v] of this.#vectors) if (ids.has(v.artifact)) this.#vectors.delete(k);
      return work.artifacts; // every one named is gone from the index (or never was in it)
    });
    await this.#kit.reportInventory(this.heldArtifacts());
    return out;
  }

  /**
   * declareProbes tells shredd that the index answers probes (PUT
   * /v1/holders/{id}/probe), compactInterval ("10m", or seconds) being how
   * long an embedding may still be returned after its purge; from then on
   * a forget is closed for this holder by a clean probe after that
   * interval, not by the ack alone. Needs the kit. Returns the interval.
   */
  async declareProbes(compactInterval: string | number): Promise<string> {
    if (this.#kit === undefined) throw new InvalidArgument("ShreddStore: probes are answered by the holder kit of the index: none was given");
    return this.#kit.declareProbes(compactInterval);
  }

  /**
   * probe is the index's answer to a probe: of the asked artifact ids,
   * those whose embedding the index lookup of search() still returns (any
   * namespace, before the values are opened: a vector whose value no
   * longer decrypts is plaintext derived from it all the same). The store
   * keeps no other copy (no cache, no replica) to ask. It throws for
   * markers (canary probes): the index keeps vectors, not text, and a
   * marker it cannot look up is left unanswered rather than answered
   * clean.
   */
  probe(_forget: string, artifacts: readonly string[], markers: readonly string[] = []): string[] {
    if (markers.length > 0) throw new InvalidArgument("ShreddStore: the index answers probes by artifact id; it cannot look up markers");
    const held = new Set(this.#indexed([]).map((v) => v.artifact));
    return artifacts.filter((a) => held.has(a));
  }

  /** probeOnce answers the holder's open probes through probe() (kit.probeOnce), signed by the kit. */
  async probeOnce(): Promise<ProbeOutcome[]> {
    if (this.#kit === undefined) return [];
    return this.#kit.probeOnce((forget, artifacts, markers) => this.probe(forget, artifacts, markers));
  }

  /** #indexed is the index lookup of a query under prefix: the vectors search() scores, and probe() asks. */
  #indexed(prefix: readonly string[]): Vector[] {
    return [...this.#vectors.values()].filter((v) => prefix.every((p, i) => v.namespace[i] === p));
  }

  async #subjectsOf(ns: readonly string[], key: string, value: Record<string, unknown>): Promise<string[]> {
    const s = await this.#subjects(ns, key, value);
    if (!Array.isArray(s) || s.length === 0 || s.some((x) => typeof x !== "string" || x === "")) {
      throw new InvalidArgument("ShreddStore: the subjects function named no subject for this item");
    }
    return [...new Set(s)];
  }

  /** #write runs fn, the requests of one write, in the unit of the step's thread (outside a step: a unit of its own, naming nothing). */
  async #write<T>(step: Step | undefined, fn: (d: Declaration) => Promise<T>): Promise<T> {
    if (step === undefined) return fn({ unit: this.#reads.oneShot(), parents: [], independentOf: [] });
    const mark = this.#reads.mark(step.thread);
    try {
      return await this.#reads.write(step.thread, mark, { kind: "step" }, fn);
    } finally {
      this.#reads.ended(step.thread);
    }
  }

  async #put(op: PutOperation, step: Step | undefined): Promise<void> {
    const k = id(op.namespace, op.key);
    if (op.value === null) {
      this.#vectors.delete(k);
      await this.inner.delete(op.namespace, op.key);
      return;
    }
    const subjects = await this.#subjectsOf(op.namespace, op.key, op.value);
    const plaintext = te.encode(JSON.stringify(op.value));
    const sealed = await this.#write(step, (d) =>
      this.#c.sealing.seal({ kind: this.#valueKind, subjects, ...lineage(d), plaintext, context: context(op.namespace, op.key) }));
    plaintext.fill(0);
    await this.inner.put(op.namespace, op.key, { [SEALED]: sealed.ciphertext }, false);
    this.#vectors.delete(k);
    if (this.#index !== undefined && op.index !== false) {
      const fields = Array.isArray(op.index) ? op.index : this.#index.fields;
      const text = fields === undefined ? JSON.stringify(op.value) : fields.map((f) => JSON.stringify(op.value![f] ?? null)).join("\n");
      const [vector] = await this.#index.embeddings.embedDocuments([text]);
      // Registered before it is kept: a forget between the two finds it.
      const art = await this.#write(step, (d) =>
        this.#kit!.registerArtifact({ kind: this.#embKind, ...lineage(d), parents: [sealed.artifact, ...d.parents] }));
      this.#vectors.set(k, { namespace: [...op.namespace], key: op.key, artifact: art.artifact, vector: vector! });
    }
  }

  /** #open decrypts an item with the unit of the reading step's thread (or a unit of its own) and records the read. */
  async #open(item: Item, skipShredded: boolean, step: Step | undefined): Promise<{ item: Item; read: Decrypted } | undefined> {
    const ct = item.value[SEALED];
    if (typeof ct !== "string") throw new InvalidArgument("ShreddStore: the inner store holds a value this store did not seal");
    const unit = step !== undefined ? await this.#reads.beginRead(step.thread) : this.#reads.oneShot();
    let d: Decrypted | undefined;
    try {
      d = await this.#c.sealing.decrypt({ ciphertext: ct, context: context(item.namespace, item.key), unit });
    } catch (e) {
      if (skipShredded && e instanceof Shredded) return undefined;
      throw e;
    } finally {
      if (step !== undefined) this.#reads.endRead(step.thread, step.task, d !== undefined ? [d.lease] : [], step.carried === true);
    }
    const value = JSON.parse(td.decode(d.plaintext)) as Record<string, unknown>;
    d.plaintext.fill(0);
    return { item: { ...item, value }, read: d };
  }

  /** #drop: an item read but not answered: its lease is released and declared independent. */
  async #drop(step: Step | undefined, d: Decrypted): Promise<void> {
    if (step !== undefined) this.#reads.drop(step.thread, [d.lease.id]);
    await d.release();
  }

  async #get(op: GetOperation, step: Step | undefined): Promise<Item | null> {
    const it = await this.inner.get(op.namespace, op.key);
    return it === null ? null : ((await this.#open(it, false, step))?.item ?? null);
  }

  async #search(op: SearchOperation, step: Step | undefined): Promise<SearchItem[]> {
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    const prefix = op.namespacePrefix;
    if (op.query !== undefined && this.#index !== undefined) {
      const q = await this.#index.embeddings.embedQuery(op.query);
      const scored = this.#indexed(prefix)
        .map((v) => ({ v, score: cosine(q, v.vector) })).sort((a, b) => b.score - a.score);
      const out: SearchItem[] = [];
      let skipped = 0;
      for (const { v, score } of scored) {
        if (out.length >= limit) break;
        const it = await this.inner.get([...v.namespace], v.key);
        const opened = it === null ? undefined : await this.#open(it, true, step);
        if (opened === undefined) continue;
        if (!matches(opened.item.value, op.filter) || skipped++ < offset) {
          await this.#drop(step, opened.read);
          continue;
        }
        out.push({ ...opened.item, score });
      }
      return out;
    }
    const out: SearchItem[] = [];
    let skipped = 0;
    for (let page = 0; ; page += 100) {
      const items = await this.inner.search(prefix, { limit: 100, offset: page });
      for (const it of items) {
        const opened = await this.#open(it, true, step);
        if (opened === undefined) continue;
        if (!matches(opened.item.value, op.filter) || skipped++ < offset) {
          await this.#drop(step, opened.read);
          continue;
        }
        out.push(opened.item);
        if (out.length >= limit) return out;
      }
      if (items.length < 100) return out;
    }
  }

  /** #direct counts the store's own get/search/put/delete/listNamespaces calls under way, whose batch runs in the caller's context. */
  #direct = 0;

  #own<T>(f: () => Promise<T>): Promise<T> {
    this.#direct++;
    try {
      return f(); // BaseStore's methods call batch() before their first await
    } finally {
      this.#direct--;
    }
  }

  override get(namespace: string[], key: string): Promise<Item | null> {
    return this.#own(() => super.get(namespace, key));
  }
  override search(namespacePrefix: string[], options?: Parameters<BaseStore["search"]>[1]): Promise<SearchItem[]> {
    return this.#own(() => super.search(namespacePrefix, options));
  }
  override put(namespace: string[], key: string, value: Record<string, unknown>, index?: false | string[]): Promise<void> {
    return this.#own(() => super.put(namespace, key, value, index));
  }
  override delete(namespace: string[], key: string): Promise<void> {
    return this.#own(() => super.delete(namespace, key));
  }

  /**
   * batch runs the operations, each for the step that made it: stamped by
   * LangGraph's AsyncBatchedStore (stampSteps), else the step running in
   * the caller's context (the store's own get, search, put, delete, or a
   * batch called directly). It refuses, before anything runs, an operation
   * that arrives unstamped from outside any step: that is an
   * AsyncBatchedStore of another copy of @langchain/langgraph-checkpoint
   * (a linked or workspace install), whose operations come from graph
   * steps this store cannot see; run without lineage, the step's reads
   * would be named by none of its writes.
   */
  override async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    const direct = this.#direct > 0; // before any await: the caller's own call
    const steps = operations.map((op) => {
      const s = stepOf(op);
      if (s !== "unstamped") return s;
      const now = currentStep();
      if (now === undefined && !direct && ("key" in op || "namespacePrefix" in op)) {
        throw new Error("ShreddStore: a store operation arrived without the graph step that made it: LangGraph's " +
          "AsyncBatchedStore that queued it is not stamped (your @langchain/langgraph loads another copy of " +
          "@langchain/langgraph-checkpoint than @shredd/langgraph does, as a linked or workspace install can). " +
          "Call stampSteps(AsyncBatchedStore) with the AsyncBatchedStore of the @langchain/langgraph-checkpoint " +
          "your @langchain/langgraph imports, or install one copy; outside a graph, call get, search, put or " +
          "delete (or batch inside Reads.forThread). Nothing was read or written.");
      }
      return now;
    });
    const results: unknown[] = [];
    for (const [i, op] of operations.entries()) {
      const step = steps[i];
      if ("value" in op) results.push(await this.#put(op as PutOperation, step));
      else if ("namespacePrefix" in op) results.push(await this.#search(op as SearchOperation, step));
      else if ("key" in op) results.push(await this.#get(op as GetOperation, step));
      else results.push(await this.inner.batch([op as ListNamespacesOperation]).then((r) => r[0]));
    }
    return results as OperationResults<Op>;
  }
}
