// Starts the real shredd binary for the tests: on 127.0.0.1:0 in a fresh
// data directory; reads the address from its "listening" log line and the
// admin token from the data directory. The binary is $SHREDD_BIN
// (scripts/test-typescript.sh builds it with go build).
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, openSync, closeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const REPO = join(import.meta.dirname, "..", "..", "..", "..");

export function binary(): string {
  const b = process.env["SHREDD_BIN"];
  if (!b) throw new Error("SHREDD_BIN is not set: run scripts/test-typescript.sh, or build one with go build -o ... ./cmd/shredd");
  return b;
}

export class Server {
  readonly dir: string;
  readonly url: string;
  readonly adminToken: string;
  readonly #proc: ChildProcess;
  readonly #tmp: string;
  readonly #log: string;

  private constructor(tmp: string, proc: ChildProcess, url: string, log: string) {
    this.#tmp = tmp;
    this.dir = join(tmp, "d");
    this.#proc = proc;
    this.url = url;
    this.#log = log;
    this.adminToken = readFileSync(join(this.dir, "admin.token"), "ascii").trim();
  }

  static async start(...args: string[]): Promise<Server> {
    const tmp = mkdtempSync(join(tmpdir(), "shredd-tstest-"));
    const log = join(tmp, "log");
    const fd = openSync(log, "w");
    const proc = spawn(binary(), ["serve", "--data-dir", join(tmp, "d"), "--addr", "127.0.0.1:0", ...args], { stdio: ["ignore", fd, fd] });
    closeSync(fd);
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) throw new Error(`shredd exited ${proc.exitCode}:\n${readFileSync(log, "utf8")}`);
      for (const line of readFileSync(log, "utf8").split("\n")) {
        try {
          const rec = JSON.parse(line) as { msg?: string; addr?: string; scheme?: string };
          if (rec.msg === "listening" && rec.addr) return new Server(tmp, proc, `${rec.scheme ?? "http"}://${rec.addr}`, log);
        } catch {
          // not JSON
        }
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    proc.kill();
    throw new Error("shredd did not log 'listening' within 20s:\n" + readFileSync(log, "utf8"));
  }

  logs(): string {
    return readFileSync(this.#log, "utf8");
  }

  /** token creates a token with shredd token create. */
  token(name: string, scopes: string[], holder?: string, ...extra: string[]): string {
    const args = ["token", "create", "--name", name, "--scopes", scopes.join(","), "--data-dir", this.dir, ...(holder ? ["--holder", holder] : []), ...extra];
    return execFileSync(binary(), args, { encoding: "utf8" }).trim().split("\n")[0]!;
  }

  /** cli runs a shredd command and returns its exit status and output. */
  cli(...args: string[]): { status: number; out: string } {
    try {
      return { status: 0, out: execFileSync(binary(), args, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }) };
    } catch (e) {
      const x = e as { status?: number; stdout?: string; stderr?: string };
      return { status: x.status ?? -1, out: (x.stdout ?? "") + (x.stderr ?? "") };
    }
  }

  async stop(): Promise<void> {
    if (this.#proc.exitCode === null) {
      const done = new Promise((r) => this.#proc.once("exit", r));
      this.#proc.kill("SIGTERM");
      await done;
    }
    rmSync(this.#tmp, { recursive: true, force: true });
  }
}
