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
 * caller's step on each operation (and the store refuses an operation that
 * arrives unstamped from outside any step: fail closed). A read made
 * outside any step belongs to the thread read (the saver's getTuple:
 * LangGraph loads the checkpoint it resumes from so), to the thread an
 * application names with forThread() (memory it reads to feed into that
 * thread's input), or to a unit of its own that no write names (the
 * saver's list, the store's get and search from other application code).
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
 *   filtered out, a checkpoint not listed) are declared independent, and
 *   so are reads whose plaintext was handed on after the write was called.
 * A read is forgotten here a minute after its lease expired, but a read
 * made in a step (or handed to a thread with forThread) only once a
 * checkpoint of its thread has named it and no write of the thread is
 * still under way: a step that runs past the lease TTL still names what
 * it read (the server resolves an expired lease's artifact all the same).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { AsyncLocalStorageProviderSingleton } from "@langchain/core/singletons";
import { AsyncBatchedStore } from "@langchain/langgraph-checkpoint";
import type { Lease } from "@shredd/client";

/**
 * Step is a running graph task: its thread and task id ("" when the run
 * config names no task); carried: the reads are the application's, handed
 * to the thread with forThread().
 */
export interface Step {
  readonly thread: string;
  readonly task: string;
  readonly carried?: boolean;
}

/**
 * STEP is the property an operation of a stamped AsyncBatchedStore carries
 * its caller's step under: the Step, or null when it was queued outside any
 * step. An operation without it was not queued by a stamped class.
 */
export const STEP: unique symbol = Symbol.for("@shredd/langgraph/step") as never;

/** scope: the thread an application's reads are for (forThread). */
const scope = new AsyncLocalStorage<string>();

/**
 * currentStep is the graph step running in this async context, from
 * LangGraph's run config; outside a graph task, the thread forThread()
 * names, else the run config's thread (with no task).
 */
export function currentStep(): Step | undefined {
  const c = (AsyncLocalStorageProviderSingleton.getRunnableConfig() as { configurable?: Record<string, unknown> } | undefined)?.configurable;
  const thread = c?.["thread_id"];
  const task = c?.["__pregel_task_id"];
  const ok = typeof thread === "string" || typeof thread === "number";
  if (ok && typeof task === "string" && task !== "") return { thread: String(thread), task };
  const carried = scope.getStore();
  if (carried !== undefined) return { thread: carried, task: "", carried: true };
  return ok ? { thread: String(thread), task: "" } : undefined;
}

/**
 * stepOf is the step an operation was stamped with (undefined: queued
 * outside any step), or "unstamped" when no stamped class queued it.
 */
export function stepOf(op: object): Step | undefined | "unstamped" {
  if (!Object.prototype.hasOwnProperty.call(op, STEP)) return "unstamped";
  return (op as { [STEP]: Step | null })[STEP] ?? undefined;
}

const PATCHED = Symbol.for("@shredd/langgraph/stamped");
/** ORIGINAL keeps the enqueueOperation a stamped class had (for tests that simulate an unstamped copy). */
export const ORIGINAL: unique symbol = Symbol.for("@shredd/langgraph/original") as never;

/**
 * stampSteps makes an AsyncBatchedStore class (LangGraph's wrapper of the
 * store a graph is compiled with) stamp each operation with the step that
 * enqueued it, so that the store's batch, which LangGraph runs outside the
 * node's async context, knows whose read it is. The store calls it with
 * the class of its own @langchain/langgraph-checkpoint; an application
 * whose LangGraph loads another copy (a linked checkout) passes that copy's
 * class too (else the store refuses the operations it gets from that
 * copy: they arrive without their step). Idempotent. Throws when the class
 * has no enqueueOperation (another LangGraph version): the store cannot tie
 * reads to steps then.
 */
export function stampSteps(cls: typeof AsyncBatchedStore = AsyncBatchedStore): void {
  const proto = cls.prototype as unknown as Record<PropertyKey, unknown>;
  if (proto[PATCHED] === true) return;
  const enqueue = proto["enqueueOperation"];
  if (typeof enqueue !== "function") {
    throw new Error("@shredd/langgraph: this AsyncBatchedStore has no enqueueOperation: store reads cannot be tied to graph steps");
  }
  proto["enqueueOperation"] = function (this: unknown, op: unknown): unknown {
    if (op !== null && typeof op === "object") Object.defineProperty(op, STEP, { value: currentStep() ?? null, configurable: true });
    return (enqueue as (op: unknown) => unknown).call(this, op);
  };
  proto[ORIGINAL] = enqueue;
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
  /** seq: when the plaintext was handed on (Reads' counter of ended reads). */
  readonly seq: number;
  /** dropped: the adapter dropped the plaintext before anyone saw it. */
  dropped: boolean;
  /** keep: a read of a step (or carried): kept past its expiry until a checkpoint named it. */
  readonly keep: boolean;
  /** named: a checkpoint of the thread named it. */
  named: boolean;
}

interface Thread {
  readonly unit: string;
  readonly reads: Read[];
  /** from: task id -> the checkpoint id it ran from (learnt from its pending writes). */
  readonly from: Map<string, string>;
  /** reading, writing: decrypts and writes of the unit under way; one kind at a time. */
  reading: number;
  writing: number;
  /** called: writes called (mark) and not ended (ended): a kept read is not forgotten meanwhile. */
  called: number;
  waiters: (() => void)[];
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
 *
 * The server checks a write against the reads of its unit that are live
 * when the write arrives, so a thread's decrypts and writes take turns
 * (any number of either at once, never both): a write is declared once
 * every read begun before it has ended, and no read begins until the
 * write's answer came. A read whose plaintext was handed on after a write
 * was called cannot be in what the write holds: the write declares it
 * independent.
 */
export class Reads {
  /** shared is the default of every adapter. */
  static readonly shared = new Reads();
  readonly #threads = new Map<string, Thread>();
  readonly #now: () => number;
  #seq = 0;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #thread(thread: string): Thread {
    let t = this.#threads.get(thread);
    if (t === undefined) {
      t = { unit: unitID(), reads: [], from: new Map(), reading: 0, writing: 0, called: 0, waiters: [] };
      this.#threads.set(thread, t);
    }
    return t;
  }

  #prune(thread: string): Thread {
    const t = this.#thread(thread);
    const now = this.#now();
    // A read of a step is named by the step's writes whatever the time:
    // it goes once a checkpoint named it and no write called is pending.
    const live = t.reads.filter((r) => r.expires + MARGIN_MS > now || (r.keep && (!r.named || t.called > 0)));
    if (live.length !== t.reads.length) {
      t.reads.splice(0, t.reads.length, ...live);
      const tasks = new Set(live.map((r) => r.task));
      for (const k of t.from.keys()) if (!tasks.has(k)) t.from.delete(k);
    }
    return t;
  }

  #wake(thread: string, t: Thread): void {
    const w = t.waiters.splice(0);
    for (const f of w) f();
    // A thread with nothing live and nothing under way is kept no longer: its next read starts a fresh unit.
    if (t.reads.length === 0 && t.reading === 0 && t.writing === 0 && t.called === 0 && t.waiters.length === 0 && this.#threads.get(thread) === t) {
      this.#threads.delete(thread);
    }
  }

  /**
   * beginRead starts a read for a thread once no write of its unit is under
   * way, and returns the unit to decrypt with (a fresh one once all the
   * thread's reads have expired). End it with endRead(), also when the
   * decrypt fails.
   */
  async beginRead(thread: string): Promise<string> {
    for (;;) {
      const t = this.#prune(thread);
      if (t.writing === 0) {
        t.reading++;
        return t.unit;
      }
      await new Promise<void>((res) => t.waiters.push(res));
    }
  }

  /**
   * endRead ends a read begun with beginRead(), recording the leases its
   * decrypts took (none when they failed); carried: the application's read
   * handed to the thread (forThread), kept as a step's is.
   */
  endRead(thread: string, task: string, leases: readonly Lease[], carried = false): void {
    const t = this.#thread(thread);
    t.reading = Math.max(0, t.reading - 1);
    const seq = ++this.#seq;
    for (const l of leases) {
      const expires = Date.parse(l.expires_at);
      t.reads.push({ lease: l.id, artifact: l.artifact, expires: Number.isFinite(expires) ? expires : this.#now() + 3_600_000, task, seq, dropped: false, keep: task !== "" || carried, named: false });
    }
    this.#wake(thread, t);
  }

  /** oneShot is a unit of its own, for reads and writes outside any thread. */
  oneShot(): string {
    return unitID();
  }

  /** drop marks reads whose plaintext the adapter dropped unseen: later writes declare them independent. */
  drop(thread: string, leaseIDs: readonly string[]): void {
    const ids = new Set(leaseIDs);
    for (const r of this.#threads.get(thread)?.reads ?? []) if (ids.has(r.lease)) r.dropped = true;
  }

  /** ran notes that a task ran from checkpoint `from` (its pending writes name it). Call before any await. */
  ran(thread: string, task: string, from: string): void {
    const t = this.#threads.get(thread);
    if (task !== "" && t !== undefined && t.reads.some((r) => r.task === task)) t.from.set(task, from);
  }

  /**
   * mark is the moment a write of `thread` is called: reads handed on after
   * it are not in what it writes. Until ended(thread), the thread's reads
   * are kept (its declaration may still come). Call before any await.
   */
  mark(thread: string): number {
    this.#thread(thread).called++;
    return this.#seq;
  }

  /** ended ends a write begun with mark(thread), also when it failed before write(). */
  ended(thread: string): void {
    const t = this.#threads.get(thread);
    if (t === undefined) return;
    t.called = Math.max(0, t.called - 1);
    this.#prune(thread);
    this.#wake(thread, t);
  }

  /**
   * forThread runs fn, application code outside any graph step, with the
   * reads the adapters make in it (the store's get and search, the saver's
   * getTuple and list) recorded as reads of `thread`: the thread's next
   * checkpoint, pending writes and memories name them, whenever they come.
   * For memory an application recalls and passes into that thread's input:
   *
   *   const hits = await reads.forThread("bob-1", () => store.search(["memories", "bob"], { query }));
   *   await graph.invoke({ messages: [...] }, { configurable: { thread_id: "bob-1" } });
   *
   * Use the Reads the adapters were given (Reads.shared by default).
   */
  forThread<T>(thread: string | number, fn: () => T): T {
    if ((typeof thread !== "string" && typeof thread !== "number") || String(thread) === "") {
      throw new TypeError("Reads.forThread: thread is a thread_id");
    }
    return scope.run(String(thread), fn);
  }

  /**
   * write runs fn, the request of one write of `thread`, once no read of
   * its unit is under way, with the write's declaration: which reads it
   * names, which it declares independent (see #rule), given `mark`, taken
   * when the write was called.
   */
  async write<T>(thread: string, mark: number, rule: Rule, fn: (d: Declaration) => Promise<T>): Promise<T> {
    for (;;) {
      const t = this.#thread(thread);
      if (t.reading === 0) {
        t.writing++;
        break;
      }
      await new Promise<void>((res) => t.waiters.push(res));
    }
    try {
      const [d, named] = this.#declare(thread, mark, rule);
      const out = await fn(d);
      if (rule.kind === "checkpoint") for (const r of named) r.named = true;
      return out;
    } finally {
      const t = this.#thread(thread);
      t.writing = Math.max(0, t.writing - 1);
      this.#wake(thread, t);
    }
  }

  #declare(thread: string, mark: number, rule: Rule): [Declaration, Read[]] {
    const t = this.#prune(thread);
    const parents = new Set<string>();
    const others: Read[] = [];
    const named: Read[] = [];
    for (const r of t.reads) {
      if (r.dropped || r.seq > mark || independent(rule, r, t)) others.push(r);
      else {
        parents.add(r.artifact);
        named.push(r);
      }
    }
    // A read whose artifact is named through another read's is named too.
    const independentOf = others.filter((r) => !parents.has(r.artifact)).map((r) => r.lease);
    return [{ unit: t.unit, parents: [...parents], independentOf }, named];
  }
}

/**
 * Rule says which of a thread's reads a write may not derive from:
 * - checkpoint (put with parent P, "" for none): those of tasks that ran
 *   from a checkpoint newer than P (the checkpoint was computed before);
 * - writes (pending writes of task T, which ran from X): those of other
 *   tasks of the same step (tasks of one step do not see each other's
 *   data) and of tasks that ran from a checkpoint newer than X;
 * - step (a store write of a running step): none.
 */
export type Rule =
  | { readonly kind: "checkpoint"; readonly parent: string }
  | { readonly kind: "writes"; readonly from: string; readonly task: string }
  | { readonly kind: "step" };

function independent(rule: Rule, r: Read, t: Thread): boolean {
  const from = t.from.get(r.task);
  switch (rule.kind) {
    case "checkpoint":
      return from !== undefined && from > rule.parent;
    case "writes":
      return r.task !== rule.task && from !== undefined && from >= rule.from;
    case "step":
      return false;
  }
}
