import { APIError, InvalidArgument, Timeout, TransportError, errorFromProblem } from "./errors.js";

/** Statuses after which an idempotent call is tried again. */
const RETRY = new Set([429, 502, 503, 504]);

/** Response is a 2xx answer. */
export interface Response {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

export interface TransportOptions {
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly userAgent: string;
  readonly maxResponse: number;
  readonly fetch: typeof globalThis.fetch;
}

export interface RequestOptions {
  readonly body?: Uint8Array;
  readonly contentType?: string;
  readonly headers?: ReadonlyArray<readonly [string, string]>;
  readonly query?: Readonly<Record<string, string | number | undefined>>;
  /** idempotent calls only are tried again. */
  readonly idempotent?: boolean;
  readonly auth?: boolean;
}

// fetch takes header values as ByteStrings (each char one byte): a subject
// id in UTF-8 travels as the string of its bytes, as the server reads it.
function byteString(v: string): string {
  let s = "";
  for (const b of new TextEncoder().encode(v)) s += String.fromCharCode(b);
  return s;
}

/** Transport sends one client's requests to one server. */
export class Transport {
  readonly base: string;
  readonly #token: string;
  readonly #o: TransportOptions;

  constructor(baseURL: string, token: string, o: TransportOptions) {
    let u: URL;
    try {
      u = new URL(baseURL);
    } catch {
      throw new InvalidArgument("the base URL is not a URL: want http(s)://host[:port][/prefix]");
    }
    if ((u.protocol !== "http:" && u.protocol !== "https:") || u.search !== "" || u.hash !== "") {
      throw new InvalidArgument("the base URL: want http(s)://host[:port][/prefix]");
    }
    if (u.username !== "" || u.password !== "") throw new InvalidArgument("the base URL must not hold credentials: pass the token");
    if (!(o.timeoutMs > 0) || !(o.retries >= 0) || !(o.backoffMs >= 0) || !(o.maxResponse > 0)) {
      throw new InvalidArgument("timeoutMs and maxResponse must be > 0, retries and backoffMs >= 0");
    }
    if (/[\r\n\0]/.test(token)) throw new InvalidArgument("the token holds a control character");
    this.base = u.origin + u.pathname.replace(/\/+$/, "");
    this.#token = token;
    this.#o = o;
  }

  /**
   * request sends one call and returns its 2xx answer, or throws the
   * APIError of the problem answered, or a TransportError. Only idempotent
   * calls are tried again, after a transport failure or a 429/502/503/504:
   * an encrypt lost in transit may have registered its artifact, and a
   * decrypt issues a lease, so they are never sent twice.
   */
  async request(method: string, path: string, r: RequestOptions = {}): Promise<Response> {
    let target = this.base + path;
    if (r.query !== undefined) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(r.query)) if (v !== undefined && v !== "") q.set(k, String(v));
      const s = q.toString();
      if (s !== "") target += "?" + s;
    }
    const op = `${method} ${path}`;
    const attempts = 1 + (r.idempotent === true ? this.#o.retries : 0);
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) await new Promise((res) => setTimeout(res, Math.min(this.#o.backoffMs * 2 ** (attempt - 1), 5000)));
      try {
        return await this.#once(method, target, op, r);
      } catch (e) {
        const retryable = (e instanceof APIError && RETRY.has(e.status)) || (e instanceof TransportError);
        if (!retryable || attempt + 1 >= attempts) throw e;
      }
    }
  }

  async #once(method: string, target: string, op: string, r: RequestOptions): Promise<Response> {
    const h = new Headers();
    if (r.auth !== false && this.#token !== "") h.set("Authorization", "Bearer " + this.#token);
    h.set("Accept", "application/json, application/problem+json, */*");
    if (this.#o.userAgent !== "") h.set("User-Agent", this.#o.userAgent);
    if (r.body !== undefined) h.set("Content-Type", r.contentType ?? "application/json");
    for (const [k, v] of r.headers ?? []) {
      if (/[\r\n\0]/.test(v)) throw new InvalidArgument(`header ${k} holds a control character`);
      h.append(k, byteString(v));
    }
    let resp: globalThis.Response;
    const signal = AbortSignal.timeout(this.#o.timeoutMs);
    try {
      resp = await this.#o.fetch(target, {
        method, headers: h, signal, redirect: "manual",
        ...(r.body !== undefined ? { body: r.body as Uint8Array<ArrayBuffer> } : method === "POST" || method === "PUT" ? { body: new Uint8Array(0) } : {}),
      });
    } catch (e) {
      if (signal.aborted) throw new Timeout(op, this.#o.timeoutMs);
      throw new TransportError(op, e instanceof Error ? e.message : "fetch failed", "transport", { cause: e });
    }
    let body: Uint8Array;
    try {
      body = await this.#read(resp, op);
    } catch (e) {
      if (signal.aborted) throw new Timeout(op, this.#o.timeoutMs);
      throw e;
    }
    if (resp.status >= 200 && resp.status < 300) return { status: resp.status, headers: resp.headers, body };
    // Anything else, redirects included (following one would send the
    // bearer token wherever it points), is an APIError.
    throw errorFromProblem(resp.status, body, resp.headers.get("X-Request-Id") ?? "", op);
  }

  async #read(resp: globalThis.Response, op: string): Promise<Uint8Array> {
    if (resp.body === null) return new Uint8Array(0);
    const chunks: Uint8Array[] = [];
    let n = 0;
    const reader = resp.body.getReader();
    for (;;) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (e) {
        throw new TransportError(op, "reading the answer failed", "transport", { cause: e });
      }
      if (next.done) break;
      n += next.value.length;
      if (n > this.#o.maxResponse) {
        await reader.cancel();
        throw new TransportError(op, `response body over ${this.#o.maxResponse} bytes`);
      }
      chunks.push(next.value);
    }
    const out = new Uint8Array(n);
    let o = 0;
    for (const c of chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
}
