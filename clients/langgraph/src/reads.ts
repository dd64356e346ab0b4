/**
 * Reads: what each graph step read through the adapters, so that the
 * checkpoints and writes the step produces carry its lineage.
 *
 * shredd counts every decrypt's lease as a read of the token that made it,
 * attributable until the lease's expiry: a later write of the same token
 * (and unit of work) must name it, or declare itself independent of it, or
 * the server refuses the write (409 undeclared_derivation; docs/api.md).
 * The adapters keep one unit of work per thread (`thread_id`): every
 * decrypt made for a thread's step is sent with the thread's unit and
 * recorded here, and every write for the thread (a checkpoint, a pending
 * write, a memory, an embedding) names the reads it may derive from, by
 * their artifacts in `parents`, and declares the others in `independent_of`.
 *
 * Which step is running comes from LangGraph's run config, which LangGraph
 * keeps in an AsyncLocalStorage while a node runs (what `getConfig()`
 * answers): its `thread_id` and task id (`__pregel_task_id`). Store calls
 * from a node go through LangGraph's AsyncBatchedStore, which runs the
 * batch later, outside the node's context; stampSteps() makes it record the
 * caller's step on each operation. A read made outside any step (the
 * application's own getState or store.get) belongs to the thread read (the
 * saver) or to a unit of its own (the store).
 *
 * Which writes name which reads (a write never names fewer than it may
 * derive from; "independent" only where LangGraph's order proves it):
 * - a checkpoint put(parent P): every read, except those of tasks that ran
 *   from a checkpoint newer than P (the checkpoint's state was computed
 *   before they ran);
 * - a task's pending writes from checkpoint X: every read, except those of
 *   other tasks of the same step (tasks of one step do not see each
 *   other's data) and of tasks that ran from a checkpoint newer than X;
 * - a store write from a step: every read of the thread;
 * - reads the adapter dropped before the caller saw them (a search hit
 *   filtered out, a checkpoint not listed) are declared independent.
 * A read is forgotten here a minute after its lease expired.
 */
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { AsyncBatchedStore } from "@langchain/langgraph-checkpoint";
import type { Lease } from "@shredd/client";

/** Step is a running graph task: its thread and task id ("" when the run config names no task). */
export interface Step {
  readonly thread: string;
  readonly task: string;
}

/** STEP is the property an operation of a stamped AsyncBatchedStore carries its caller's step under. */
export const STEP: unique symbol = Symbol.for("@shredd/langgraph/step") as never;

/** currentStep is the graph step running in this async context, from LangGraph's run config. */
export function currentStep(): Step | undefined {
  const c = (AsyncLocalStorageProviderSingleton.getRunnableConfig() as { configurable?: Record<string, unknown> } | undefined)?.configurable;
  const thread = c?.["thread_id"];
  if (typeof thread !== "string" && typeof thread !== "number") return undefined;
  const task = c?.["__pregel_task_id"];
  return { thread: String(thread), task: typeof task === "string" ? task : "" };
}

/** stepOf is the step an operation was stamped with, else the one running now. */
export function stepOf(op: object): Step | undefined {
  return (op as { [STEP]?: Step })[STEP] ?? currentStep();
}

const PATCHED = Symbol.for("@shredd/langgraph/stamped");

/**
 * stampSteps makes an AsyncBatchedStore class (LangGraph's wrapper of the
 * store a graph is compiled with) stamp each operation with the step that
 * enqueued it, so that the store's batch, which LangGraph runs outside the
 * node's async context, knows whose read it is. The store calls it with
 * the class of its own @langchain/langgraph-checkpoint; an application
 * whose LangGraph loads another copy (a linked checkout) passes that copy's
 * class too. Idempotent. Throws when the class has no enqueueOperation
 * (another LangGraph version): the store cannot tie reads to steps then.
 */
export function stampSteps(cls: typeof AsyncBatchedStore = AsyncBatchedStore): void {
  const proto = cls.prototype as unknown as Record<PropertyKey, unknown>;
  if (proto[PATCHED] === true) return;
  const enqueue = proto["enqueueOperation"];
  if (typeof enqueue !== "function") {
    throw new Error("@shredd/langgraph: this AsyncBatchedStore has no enqueueOperation: store reads cannot be tied to graph steps");
  }
  proto["enqueueOperation"] = function (this: unknown, op: unknown): unknown {
    const step = currentStep();
    if (step !== undefined && op !== null && typeof op === "object") Object.defineProperty(op, STEP, { value: step });
    return (enqueue as (op: unknown) => unknown).call(this, op);
  };
  proto[PATCHED] = true;
}

/** Declaration is what a write says about the reads of its unit. */
export interface Declaration {
  readonly unit: string;
  /** parents: the artifacts of the reads it names (each once). */
  readonly parents: string[];
  /** independentOf: the lease ids of the reads it declares independent. */
  readonly independentOf: string[];
}

interface Read {
  readonly lease: string;
  readonly artifact: string;
  readonly expires: number;
  /** task: the task that read, "" for a read outside a task. */
  readonly task: string;
  /** dropped: the adapter dropped the plaintext before anyone saw it. */
  dropped: boolean;
}

interface Thread {
  readonly unit: string;
  readonly reads: Read[];
  /** from: task id -> the checkpoint id it ran from (learnt from its pending writes). */
  readonly from: Map<string, string>;
}

/** Keep a read this long after its lease's expiry (clock skew between client and server). */
const MARGIN_MS = 60_000;

function unitID(): string {
  const b = crypto.getRandomValues(new Uint8Array(8));
  return Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/**
 * Reads holds each thread's unit of work and what its steps read. One is
 * shared by every ShreddSaver and ShreddStore of the process
 * (Reads.shared) unless an adapter is given its own: the saver and the
 * store of one graph must share one, or the checkpoints would not name
 * what the store read.
 */
export class Reads {
  /** shared is the default of every adapter. */
  static readonly shared = new Reads();
  readonly #threads = new Map<string, Thread>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #thread(thread: string): Thread {
    let t = this.#threads.get(thread);
    if (t === undefined) {
      t = { unit: unitID(), reads: [], from: new Map() };
      this.#threads.set(thread, t);
    }
    return t;
  }

  #prune(thread: string): Thread {
    const t = this.#thread(thread);
    const now = this.#now();
    const live = t.reads.filter((r) => r.expires + MARGIN_MS > now);
    if (live.length !== t.reads.length) {
      t.reads.splice(0, t.reads.length, ...live);
      const tasks = new Set(live.map((r) => r.task));
      for (const k of t.from.keys()) if (!tasks.has(k)) t.from.delete(k);
    }
    return t;
  }

  /** unit is the thread's unit of work for a read (a fresh one once all its reads have expired). */
  unit(thread: string): string {
    return this.#prune(thread).unit;
  }

  /** oneShot is a unit of its own, for reads and writes outside any thread. */
  oneShot(): string {
    return unitID();
  }

  /** record adds a thread's reads (the leases of its decrypts, made with its unit). */
  record(thread: string, task: string, leases: readonly Lease[], dropped = false): void {
    const t = this.#thread(thread);
    for (const l of leases) {
      const expires = Date.parse(l.expires_at);
      t.reads.push({ lease: l.id, artifact: l.artifact, expires: Number.isFinite(expires) ? expires : this.#now() + 3_600_000, task, dropped });
    }
  }

  /** drop marks reads whose plaintext the adapter dropped unseen: later writes declare them independent. */
  drop(thread: string, leaseIDs: readonly string[]): void {
    const ids = new Set(leaseIDs);
    for (const r of this.#thread(thread).reads) if (ids.has(r.lease)) r.dropped = true;
  }

  /** ran notes that a task ran from checkpoint `from` (its pending writes name it). Call before any await. */
  ran(thread: string, task: string, from: string): void {
    const t = this.#threads.get(thread);
    if (task !== "" && t !== undefined && t.reads.some((r) => r.task === task)) t.from.set(task, from);
  }

  #declare(thread: string, independent: (r: Read, t: Thread) => boolean): Declaration {
    const t = this.#prune(thread);
    // A thread with no live read is kept no longer: its next read starts a fresh unit.
    if (t.reads.length === 0) this.#threads.delete(thread);
    const parents = new Set<string>();
    const independentOf: string[] = [];
    const others: Read[] = [];
    for (const r of t.reads) {
      if (r.dropped || independent(r, t)) others.push(r);
      else parents.add(r.artifact);
    }
    // A read whose artifact is named through another read's is named too.
    for (const r of others) if (!parents.has(r.artifact)) independentOf.push(r.lease);
    return { unit: t.unit, parents: [...parents], independentOf };
  }

  /** forCheckpoint declares a checkpoint put with parent checkpoint `parent` ("" for none). */
  forCheckpoint(thread: string, parent: string): Declaration {
    return this.#declare(thread, (r, t) => {
      const from = t.from.get(r.task);
      return from !== undefined && from > parent;
    });
  }

  /** forWrites declares the pending writes of `task`, which ran from checkpoint `from`. */
  forWrites(thread: string, from: string, task: string): Declaration {
    return this.#declare(thread, (r, t) => {
      if (r.task === task) return false;
      const f = t.from.get(r.task);
      return f !== undefined && f >= from;
    });
  }

  /** forStep declares a write made by a running step (a store put): every read of its thread. */
  forStep(thread: string): Declaration {
    return this.#declare(thread, () => false);
  }
}
