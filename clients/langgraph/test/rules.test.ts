// Which write names which read (Reads), without a server: the rules of
// src/reads.ts on leases made up here, and that a thread's reads and
// writes take turns.
import type { Lease } from "@shredd/client";
import { Reads, currentStep } from "../src/index.js";

let n = 0;
function lease(artifact: string, expiresIn = 60_000, now = Date.now()): Lease {
  n++;
  return { id: `lease-${n}`, artifact, issued_at: new Date(now).toISOString(), expires_at: new Date(now + expiresIn).toISOString() };
}

async function read(r: Reads, thread: string, task: string, ...leases: Lease[]): Promise<string> {
  const unit = await r.beginRead(thread);
  r.endRead(thread, task, leases);
  return unit;
}

/** declare is one whole write of thread t, called now: what it names and declares. */
async function declare(r: Reads, rule: Parameters<Reads["write"]>[2], thread = "t") {
  const mark = r.mark(thread);
  try {
    return await r.write(thread, mark, rule, async (d) => d);
  } finally {
    r.ended(thread);
  }
}

test("a checkpoint names the reads of the steps it follows; pending writes not those of other tasks of their step", async () => {
  const r = new Reads();
  const loaded = lease("art-loaded");
  const a = lease("art-a");
  const b = lease("art-b");
  const c = lease("art-c");
  const unit = await read(r, "t", "", loaded); // the loop's getTuple: no task
  expect(await read(r, "t", "task-a", a)).toBe(unit);
  await read(r, "t", "task-b", b); // task-b ran in the same step as task-a, from checkpoint c1
  r.ran("t", "task-a", "c1");
  r.ran("t", "task-b", "c1");
  await read(r, "t", "task-c", c); // the next step, from c2
  r.ran("t", "task-c", "c2");
  const mark = r.mark("t");
  const declare = (rule: Parameters<Reads["write"]>[2]) => r.write("t", mark, rule, async (d) => d);

  // The checkpoint after the step from c1: a's and b's reads, not c's (it ran later).
  const ck = await declare({ kind: "checkpoint", parent: "c1" });
  expect(ck.unit).toBe(unit);
  expect(ck.parents.sort()).toEqual(["art-a", "art-b", "art-loaded"]);
  expect(ck.independentOf).toEqual([c.id]);
  // task-a's pending writes: not b's (same step) nor c's (later step).
  const wa = await declare({ kind: "writes", from: "c1", task: "task-a" });
  expect(wa.parents.sort()).toEqual(["art-a", "art-loaded"]);
  expect(wa.independentOf.sort()).toEqual([b.id, c.id].sort());
  // task-c's writes from c2: everything before, its own.
  const wc = await declare({ kind: "writes", from: "c2", task: "task-c" });
  expect(wc.parents.sort()).toEqual(["art-a", "art-b", "art-c", "art-loaded"]);
  // A store write of a running step names every read.
  expect((await declare({ kind: "step" })).independentOf).toEqual([]);
});

test("reads handed on after the write was called, dropped ones, and a task not known yet", async () => {
  const r = new Reads();
  const early = lease("art-early");
  await read(r, "t", "task-x", early); // task-x has not written yet: where it ran from is unknown
  const mark = r.mark("t");
  const late = lease("art-late");
  await read(r, "t", "task-y", late);
  const dropped = lease("art-dropped");
  await read(r, "t", "task-x", dropped);
  r.drop("t", [dropped.id]);
  const d = await r.write("t", mark, { kind: "checkpoint", parent: "" }, async (x) => x);
  // Unknown provenance is named (never fewer than it may derive from).
  expect(d.parents).toEqual(["art-early"]);
  expect(d.independentOf.sort()).toEqual([late.id, dropped.id].sort());
});

test("a read is forgotten a minute after its lease expired, and the thread then starts a fresh unit", async () => {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const r = new Reads(() => now);
  const unit = await read(r, "t", "", lease("art-1", 5 * 60_000, now));
  now += 5 * 60_000 + 30_000;
  expect((await declare(r, { kind: "step" })).parents).toEqual(["art-1"]);
  now += 60_000;
  const d = await declare(r, { kind: "step" });
  expect(d.parents).toEqual([]);
  expect(await r.beginRead("t")).not.toBe(unit);
});

test("a thread's reads and writes take turns", async () => {
  const r = new Reads();
  const order: string[] = [];
  await r.beginRead("t");
  const w = r.write("t", r.mark("t"), { kind: "step" }, async (d) => {
    order.push("write");
    return d;
  });
  await new Promise((res) => setTimeout(res, 10));
  order.push("read ends");
  r.endRead("t", "task", [lease("art")]);
  const d = await w;
  expect(order).toEqual(["read ends", "write"]);
  expect(d.independentOf).toHaveLength(1); // handed on after the write was called
  // Another thread does not wait.
  await r.beginRead("t");
  await expect(r.write("u", r.mark("u"), { kind: "step" }, async () => "other thread")).resolves.toBe("other thread");
  r.endRead("t", "task", []);
});

test("a step's reads are named by its writes however long the step ran, and forgotten only once a checkpoint named them", async () => {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const r = new Reads(() => now);
  const unit = await read(r, "t", "task-a", lease("art-recalled", 1_000, now));
  now += 3_600_000; // the step runs an hour: its lease expired long ago
  // Its pending writes (called now, declared while the checkpoint is in flight) and the checkpoint after the step name it.
  const writesMark = r.mark("t");
  r.ran("t", "task-a", "c1");
  const ck = await declare(r, { kind: "checkpoint", parent: "c1" });
  expect(ck.parents).toEqual(["art-recalled"]);
  expect(ck.unit).toBe(unit);
  now += 3_600_000;
  const w = await r.write("t", writesMark, { kind: "writes", from: "c1", task: "task-a" }, async (d) => d);
  expect(w.parents).toEqual(["art-recalled"]);
  r.ended("t");
  // Named by a checkpoint and no write pending: forgotten, and the thread starts afresh.
  expect((await declare(r, { kind: "step" })).parents).toEqual([]);
  expect(await r.beginRead("t")).not.toBe(unit);
});

test("a read outside a step handed to a thread (forThread) is kept until a checkpoint named it", async () => {
  let now = Date.parse("2026-01-01T00:00:00Z");
  const r = new Reads(() => now);
  const l = lease("art-app", 1_000, now);
  await r.forThread("t", async () => {
    const step = currentStep();
    expect(step).toEqual({ thread: "t", task: "", carried: true });
    await r.beginRead(step!.thread);
    r.endRead(step!.thread, step!.task, [l], step!.carried);
  });
  expect(currentStep()).toBeUndefined();
  now += 3_600_000;
  expect((await declare(r, { kind: "writes", from: "c0", task: "task-x" })).parents).toEqual(["art-app"]);
  expect((await declare(r, { kind: "checkpoint", parent: "c0" })).parents).toEqual(["art-app"]);
  expect((await declare(r, { kind: "checkpoint", parent: "c1" })).parents).toEqual([]);
});
