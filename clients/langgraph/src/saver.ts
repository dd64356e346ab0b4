/**
 * ShreddSaver: a LangGraph.js checkpoint saver that seals every checkpoint
 * and every pending write through shredd, under the subjects the
 * application names for a thread, and keeps only the sealed bytes in any
 * inner BaseCheckpointSaver (MemorySaver, PostgresSaver, ...).
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import {
  BaseCheckpointSaver, type ChannelVersions, type Checkpoint, type CheckpointListOptions, type CheckpointMetadata,
  type CheckpointPendingWrite, type CheckpointTuple, type PendingWrite, TASKS,
} from "@langchain/langgraph-checkpoint";
import { type Client, type Decrypted, InvalidArgument, Shredded, envelope } from "@shredd/client";
import { type Declaration, type Rule, type Step, Reads, currentStep } from "./reads.js";

/** SEALED is the one metadata key the inner saver stores: the sealed metadata, the head artifact of a checkpoint. */
export const SEALED = "__shredd_sealed__";

/** Configurable is the `configurable` of a RunnableConfig. */
export type Configurable = Readonly<Record<string, unknown>>;

/**
 * SubjectsOf names the data subjects whose data a thread holds, from its
 * `configurable` (e.g. `(c) => [c.user_id]`, or every participant of a
 * group thread). Every checkpoint and write is sealed under all of them:
 * forgetting any one makes it unreadable.
 */
export type SubjectsOf = (configurable: Configurable) => readonly string[] | Promise<readonly string[]>;

/** ShreddSaverOptions configure a ShreddSaver; unknown keys are refused. */
export interface ShreddSaverOptions {
  /** client calls shredd (a token with the encrypt and decrypt scopes; admin for setup()). */
  readonly client: Client;
  /** inner stores the sealed checkpoints and writes. */
  readonly inner: BaseCheckpointSaver;
  readonly subjects: SubjectsOf;
  /** kinds of the artifacts (default "langgraph-checkpoint" and "langgraph-write"). */
  readonly checkpointKind?: string;
  readonly writeKind?: string;
  /**
   * onShredded: what a read of a forgotten thread's checkpoint does.
   * "throw" (default): getTuple and list throw the client's Shredded (410):
   * the data existed and is erased, which a caller must not mistake for a
   * new, empty thread. "skip": getTuple answers undefined and list leaves
   * such checkpoints out (an empty history), for applications that want a
   * forgotten user's thread to start afresh. The fresh thread can write
   * once an operator reinstated the user (client.forgets.reinstate: a new
   * key generation); until then its writes are Shredded, since nothing
   * reinstates a subject implicitly.
   */
  readonly onShredded?: "throw" | "skip";
  /**
   * reads keeps each thread's unit of work and what its steps read
   * (default Reads.shared): give the saver and the store of one graph the
   * same, so that a checkpoint names what the step read from the store.
   */
  readonly reads?: Reads;
}
const OPTION_KEYS = ["client", "inner", "subjects", "checkpointKind", "writeKind", "onShredded", "reads"];

const te = new TextEncoder();
const td = new TextDecoder();

function ids(config: RunnableConfig): { thread: string; ns: string; id: string | undefined } {
  const c = config.configurable ?? {};
  const thread = c["thread_id"];
  if (typeof thread !== "string" && typeof thread !== "number") throw new InvalidArgument("ShreddSaver: configurable.thread_id is required");
  const ns = typeof c["checkpoint_ns"] === "string" ? c["checkpoint_ns"] : "";
  const id = typeof c["checkpoint_id"] === "string" ? c["checkpoint_id"] : undefined;
  return { thread: String(thread), ns, id };
}

// The context binds an envelope to its place: a sealed checkpoint copied
// into another thread, or a write into another task, does not open there.
// It never leaves this process (sealing is on the client; decrypt sends it
// in the request body).
function metadataContext(thread: string, ns: string, id: string): Uint8Array {
  return te.encode(`langgraph/metadata\0${thread}\0${ns}\0${id}`);
}
// A channel value is stored once per version and shared by the checkpoints
// that did not change it.
function channelContext(thread: string, ns: string, channel: string, version: string): Uint8Array {
  return te.encode(`langgraph/channel\0${thread}\0${ns}\0${channel}\0${version}`);
}
function writeContext(thread: string, ns: string, id: string, task: string, channel: string): Uint8Array {
  return te.encode(`langgraph/write\0${thread}\0${ns}\0${id}\0${task}\0${channel}`);
}

function frame(type: string, body: Uint8Array): Uint8Array {
  const t = te.encode(type);
  const out = new Uint8Array(t.length + 1 + body.length);
  out.set(t);
  out.set(body, t.length + 1);
  return out;
}
function unframe(b: Uint8Array): [string, Uint8Array] {
  const i = b.indexOf(0);
  if (i < 0) throw new InvalidArgument("ShreddSaver: a sealed value without its type");
  return [td.decode(b.subarray(0, i)), b.subarray(i + 1)];
}

/** sourceOf is the lineage a write names: its parent checkpoint and what it declares of its unit's reads. */
function sourceOf(d: Declaration, parent: string | undefined): { unit: string; parents?: string[]; independentOf?: string[] } {
  const parents = [...new Set([...(parent !== undefined ? [parent] : []), ...d.parents])];
  return {
    unit: d.unit,
    ...(parents.length > 0 ? { parents } : {}),
    ...(d.independentOf.length > 0 ? { independentOf: d.independentOf } : {}),
  };
}

function contains(have: unknown, want: unknown): boolean {
  if (want !== null && typeof want === "object" && !Array.isArray(want)) {
    if (have === null || typeof have !== "object") return false;
    return Object.entries(want).every(([k, v]) => contains((have as Record<string, unknown>)[k], v));
  }
  return JSON.stringify(have) === JSON.stringify(want);
}

/**
 * ShreddSaver seals through shredd and stores in an inner saver:
 *
 * - a checkpoint's channel values and metadata are one envelope, sealed on
 *   the client (POST /v1/datakey) under the thread's subjects, with the
 *   parent checkpoint as the lineage's parent, and bound to (thread,
 *   namespace, checkpoint id) by its context. The inner saver gets the
 *   checkpoint with that envelope as its only channel value and empty
 *   metadata; ids, versions and versions_seen stay as they are (they hold
 *   no user data), so any inner saver stores it as usual.
 * - each pending write's value is an envelope of its own under the same
 *   subjects, bound to its thread, checkpoint, task and channel.
 *
 * Reads open the envelopes with one decrypt batch per checkpoint, made
 * with the unit of work of the thread whose step reads (a node reading
 * another thread's checkpoints: the node's thread; otherwise the thread
 * read), and recorded in `reads`: every later checkpoint and pending write
 * of that thread names them (their artifacts as parents) while they are
 * attributable, so what a step read is in the lineage of what it wrote
 * (see Reads). The leases are not released: LangGraph keeps the state;
 * they run to their expiry. Metadata filters of list() apply after
 * opening (the inner saver never sees metadata); what a filter leaves out
 * is released and declared independent. After forget(subject), every
 * checkpoint and write of that subject's threads, and of every thread
 * whose step read one of them, is Shredded (see onShredded); other
 * threads read as before.
 */
export class ShreddSaver extends BaseCheckpointSaver {
  readonly inner: BaseCheckpointSaver;
  readonly #c: Client;
  readonly #subjects: SubjectsOf;
  readonly #ckKind: string;
  readonly #wKind: string;
  readonly #skip: boolean;
  readonly #reads: Reads;
  readonly #artifacts = new Map<string, string>();
  /** #putting: the head artifacts of checkpoints being put, for their pending writes' parent. */
  readonly #putting = new Map<string, Promise<string | undefined>>();

  constructor(o: ShreddSaverOptions) {
    for (const k of Object.keys(o)) if (!OPTION_KEYS.includes(k)) throw new InvalidArgument(`ShreddSaver: unknown option "${k}"`);
    if (typeof o.subjects !== "function") throw new InvalidArgument("ShreddSaver: subjects must be a function of configurable");
    if (o.onShredded !== undefined && o.onShredded !== "throw" && o.onShredded !== "skip") throw new InvalidArgument('ShreddSaver: onShredded is "throw" or "skip"');
    super(o.inner.serde);
    this.inner = o.inner;
    this.#c = o.client;
    this.#subjects = o.subjects;
    this.#ckKind = o.checkpointKind ?? "langgraph-checkpoint";
    this.#wKind = o.writeKind ?? "langgraph-write";
    this.#skip = o.onShredded === "skip";
    if (o.reads !== undefined && !(o.reads instanceof Reads)) throw new InvalidArgument("ShreddSaver: reads must be a Reads");
    this.#reads = o.reads ?? Reads.shared;
  }

  /** setup registers the two kinds (needs an admin token once). */
  async setup(): Promise<void> {
    await this.#c.kinds.ensure(this.#ckKind, this.#wKind);
  }

  async #subjectsOf(config: RunnableConfig): Promise<string[]> {
    const s = await this.#subjects(config.configurable ?? {});
    if (!Array.isArray(s) || s.length === 0 || s.some((x) => typeof x !== "string" || x === "")) {
      // Fail closed: nothing is stored unsealed or under no subject.
      throw new InvalidArgument("ShreddSaver: the subjects function named no subject for this thread");
    }
    return [...new Set(s)];
  }

  #remember(key: string, artifact: string): void {
    if (this.#artifacts.size >= 10_000) this.#artifacts.delete(this.#artifacts.keys().next().value!);
    this.#artifacts.set(key, artifact);
  }

  async #parentArtifact(config: RunnableConfig, thread: string, ns: string, id: string | undefined): Promise<string | undefined> {
    if (id === undefined) return undefined;
    const cached = this.#artifacts.get(`${thread}\0${ns}\0${id}`);
    if (cached !== undefined) return cached;
    const t = await this.inner.getTuple(config);
    const sealed = (t?.metadata as Record<string, unknown> | undefined)?.[SEALED];
    return typeof sealed === "string" && t?.checkpoint.id === id ? envelope.fromText(sealed).header.artifact : undefined;
  }

  /**
   * #writer: the thread whose unit a write of `thread` is made in, and its
   * rule. A node writing another thread's checkpoint: that write derives
   * from its own step's reads.
   */
  #writer(thread: string, own: Rule): [string, Rule] {
    const step = currentStep();
    return step !== undefined && step.thread !== thread ? [step.thread, { kind: "step" }] : [thread, own];
  }

  override async put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions): Promise<RunnableConfig> {
    const { thread, ns, id: parentId } = ids(config);
    const [unitThread, rule] = this.#writer(thread, { kind: "checkpoint", parent: parentId ?? "" });
    const mark = this.#reads.mark(unitThread); // before any await: what the checkpoint can hold
    const key = `${thread}\0${ns}\0${checkpoint.id}`;
    let done!: (a: string | undefined) => void;
    this.#putting.set(key, new Promise((res) => (done = res)));
    try {
      return await this.#put(config, checkpoint, metadata, newVersions, (fn) => this.#reads.write(unitThread, mark, rule, fn));
    } finally {
      done(this.#artifacts.get(key));
      this.#putting.delete(key);
      this.#reads.ended(unitThread);
    }
  }

  async #put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, newVersions: ChannelVersions,
    write: <T>(fn: (d: Declaration) => Promise<T>) => Promise<T>): Promise<RunnableConfig> {
    const { thread, ns, id: parentId } = ids(config);
    const subjects = await this.#subjectsOf(config);
    const parent = await this.#parentArtifact(config, thread, ns, parentId);
    // The metadata first (the checkpoint's head artifact), then each channel
    // value, all in one data-key batch. Every value is sealed on its own and
    // bound to its channel and version, so that the inner saver stores what
    // it would store in plaintext: the changed ones only (PostgresSaver,
    // per newVersions) or all (MemorySaver).
    const changed = Object.keys(checkpoint.channel_values);
    const items = [
      { kind: this.#ckKind, subjects, plaintext: frame(...(await this.serde.dumpsTyped(metadata))), context: metadataContext(thread, ns, checkpoint.id) },
      ...(await Promise.all(changed.map(async (k) => ({
        kind: this.#ckKind, subjects,
        plaintext: frame(...(await this.serde.dumpsTyped((checkpoint.channel_values as Record<string, unknown>)[k]))),
        context: channelContext(thread, ns, k, String(checkpoint.channel_versions[k])),
      })))),
    ];
    const sealed = await write((d) => this.#c.sealing.sealMany(items.map((it) => ({ ...it, ...sourceOf(d, parent) }))));
    for (const it of items) it.plaintext.fill(0);
    const cts = sealed.map((r) => {
      if (!r.ok) throw r.error;
      return r.value;
    });
    this.#remember(`${thread}\0${ns}\0${checkpoint.id}`, cts[0]!.artifact);
    const channel_values: Record<string, unknown> = {};
    changed.forEach((k, i) => (channel_values[k] = cts[i + 1]!.ciphertext));
    const stored: Checkpoint = { ...checkpoint, channel_values };
    return this.inner.put(config, stored, { [SEALED]: cts[0]!.ciphertext } as unknown as CheckpointMetadata, newVersions);
  }

  override async putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string): Promise<void> {
    if (writes.length === 0) return this.inner.putWrites(config, writes, taskId, taskPath);
    const { thread, ns, id } = ids(config);
    if (id === undefined) throw new InvalidArgument("ShreddSaver: putWrites needs configurable.checkpoint_id");
    // The task is done: note where it ran from, before anything awaits,
    // so that a checkpoint older than its step does not name its reads.
    this.#reads.ran(thread, taskId, id);
    const [unitThread, rule] = this.#writer(thread, { kind: "writes", from: id, task: taskId });
    const mark = this.#reads.mark(unitThread);
    try {
      await this.#putWrites(config, writes, taskId, taskPath, (fn) => this.#reads.write(unitThread, mark, rule, fn));
    } finally {
      this.#reads.ended(unitThread);
    }
  }

  async #putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath: string | undefined,
    write: <T>(fn: (d: Declaration) => Promise<T>) => Promise<T>): Promise<void> {
    const { thread, ns, id: cid } = ids(config);
    const id = cid!;
    const subjects = await this.#subjectsOf(config);
    const key = `${thread}\0${ns}\0${id}`;
    const parent = this.#artifacts.get(key) ?? (await this.#putting.get(key));
    const items = await Promise.all(writes.map(async ([channel, value]) => {
      const [type, body] = await this.serde.dumpsTyped(value);
      return {
        kind: this.#wKind, subjects,
        plaintext: frame(type, body), context: writeContext(thread, ns, id, taskId, channel),
      };
    }));
    const sealed = await write((d) => this.#c.sealing.sealMany(items.map((it) => ({ ...it, ...sourceOf(d, parent) }))));
    for (const it of items) it.plaintext.fill(0);
    const stored: PendingWrite[] = sealed.map((r, i) => {
      if (!r.ok) throw r.error;
      return [writes[i]![0], r.value.ciphertext];
    });
    return this.inner.putWrites(config, stored, taskId, taskPath);
  }

  /** #drop releases reads whose plaintext was dropped unseen, and marks them so. */
  async #drop(step: Step | undefined, opened: readonly Decrypted[]): Promise<void> {
    for (const d of opened) d.plaintext.fill(0);
    if (step !== undefined) this.#reads.drop(step.thread, opened.map((d) => d.lease.id));
    await Promise.all(opened.map((d) => d.release()));
  }

  /**
   * #open opens a stored tuple: one decrypt batch with the unit of the
   * reading step's thread, its reads recorded there; with no step, in a
   * unit of its own that no write of the adapters names.
   */
  async #open(t: CheckpointTuple, step: Step | undefined): Promise<{ tuple: CheckpointTuple; opened: Decrypted[] } | undefined> {
    const { thread, ns } = ids(t.config);
    const id = t.checkpoint.id;
    const sealedValue = (v: unknown): string => {
      if (typeof v !== "string") throw new InvalidArgument("ShreddSaver: the inner saver holds a value this saver did not seal");
      return v;
    };
    const meta = sealedValue((t.metadata as Record<string, unknown> | undefined)?.[SEALED]);
    const writes = t.pendingWrites ?? [];
    const migrate = t.checkpoint.v < 4 && t.parentConfig !== undefined;
    // A checkpoint of format v < 4 takes its pending sends from its
    // parent's TASKS writes (as every saver migrates them): the inner
    // saver's copy is sealed, so they are opened here.
    let sends: CheckpointPendingWrite[] = [];
    let sendsParent = "";
    if (migrate) {
      const p = await this.inner.getTuple(t.parentConfig!);
      sendsParent = p?.checkpoint.id ?? "";
      sends = (p?.pendingWrites ?? []).filter(([, ch]) => ch === TASKS);
    }
    const channels = Object.keys(t.checkpoint.channel_values).filter((k) => !(migrate && k === TASKS));
    const reqs = [
      { ciphertext: meta, context: metadataContext(thread, ns, id) },
      ...channels.map((k) => ({
        ciphertext: sealedValue((t.checkpoint.channel_values as Record<string, unknown>)[k]),
        context: channelContext(thread, ns, k, String(t.checkpoint.channel_versions[k])),
      })),
      ...writes.map(([task, channel, v]) => ({ ciphertext: sealedValue(v), context: writeContext(thread, ns, id, task, channel) })),
      ...sends.map(([task, channel, v]) => ({ ciphertext: sealedValue(v), context: writeContext(thread, ns, sendsParent, task, channel) })),
    ];
    const unit = step !== undefined ? await this.#reads.beginRead(step.thread) : this.#reads.oneShot();
    const opened: Decrypted[] = [];
    let failure: unknown;
    try {
      const res = await this.#c.sealing.decryptBatch(reqs.map((r) => ({ ...r, unit })));
      for (const r of res) {
        if (r.ok) opened.push(r.value);
        else failure ??= r.error;
      }
    } finally {
      if (step !== undefined) this.#reads.endRead(step.thread, step.task, opened.map((d) => d.lease), step.carried === true);
    }
    if (failure !== undefined) {
      await this.#drop(step, opened);
      if (this.#skip && failure instanceof Shredded) return undefined;
      throw failure;
    }
    this.#remember(`${thread}\0${ns}\0${id}`, opened[0]!.artifact);
    let i = 0;
    const next = async (): Promise<unknown> => {
      const d = opened[i++]!;
      const [type, body] = unframe(d.plaintext);
      try {
        return await this.serde.loadsTyped(type, body);
      } finally {
        d.plaintext.fill(0);
      }
    };
    const metadata = (await next()) as CheckpointMetadata;
    const channel_values: Record<string, unknown> = {};
    for (const k of channels) channel_values[k] = await next();
    const pendingWrites: CheckpointPendingWrite[] = [];
    for (const [task, channel] of writes) pendingWrites.push([task, channel, await next()]);
    const channel_versions = { ...t.checkpoint.channel_versions };
    if (migrate) {
      const values: unknown[] = [];
      for (let j = 0; j < sends.length; j++) values.push(await next());
      channel_values[TASKS] = values;
    }
    return { tuple: { ...t, checkpoint: { ...t.checkpoint, channel_values, channel_versions }, metadata, pendingWrites }, opened };
  }

  /**
   * getTuple reads for the running step's thread, else for the thread read:
   * LangGraph's loop loads the checkpoint it resumes from with getTuple, so
   * that thread's next checkpoint and writes name what it loaded (pending
   * writes included, whose lineage may exceed the checkpoint's).
   */
  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const t = await this.inner.getTuple(config);
    if (t === undefined) return undefined;
    return (await this.#open(t, currentStep() ?? { thread: ids(t.config).thread, task: "" }))?.tuple;
  }

  /**
   * list reads for the running step's thread; outside a step (an
   * application browsing a history: getStateHistory) in a unit of its own,
   * or for the thread Reads.forThread names: what the application passes
   * from it into that thread's input. Every checkpoint a thread resumes
   * from is loaded by getTuple, or is the parent its next checkpoint names.
   */
  override async *list(config: RunnableConfig, options?: CheckpointListOptions): AsyncGenerator<CheckpointTuple> {
    const { limit, before, filter } = options ?? {};
    const innerOpts: CheckpointListOptions = {
      ...(before !== undefined ? { before } : {}),
      // A filter applies to the metadata, which only opening shows.
      ...(limit !== undefined && filter === undefined ? { limit } : {}),
    };
    const step = currentStep();
    let n = 0;
    for await (const t of this.inner.list(config, innerOpts)) {
      if (limit !== undefined && n >= limit) return;
      const o = await this.#open(t, step);
      if (o === undefined) continue;
      if (filter !== undefined && !contains(o.tuple.metadata ?? {}, filter)) {
        await this.#drop(step, o.opened);
        continue;
      }
      n++;
      yield o.tuple;
    }
  }

  override async deleteThread(threadId: string): Promise<void> {
    return this.inner.deleteThread(threadId);
  }

  override getNextVersion(current: number | undefined): number {
    return this.inner.getNextVersion(current);
  }
}
