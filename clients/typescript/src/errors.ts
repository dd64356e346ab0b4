/**
 * Errors of the shredd client: every failure is a {@link ShreddError} with a
 * stable `code`, the HTTP `status` (0 when no answer came) and the server's
 * `requestId` (the server log has the cause under it). A problem answer
 * (RFC 9457) becomes the class of its code, which extends the class of its
 * status family, so `catch (e) { if (e instanceof InvalidRequest) ... }`
 * catches every 400 and `e instanceof UnknownKind` only that code.
 * Messages never hold a subject id, a plaintext or a key.
 */

/** ShreddError is the base of every error this package throws. */
export class ShreddError extends Error {
  /** code is the problem code ("shredded", "unknown_kind", ...) or a client-side code. */
  readonly code: string;
  /** status is the HTTP status of the answer, 0 when none came. */
  readonly status: number;
  /** requestId is the server's X-Request-Id of the call, "" when none. */
  readonly requestId: string;
  constructor(message: string, code: string, status = 0, requestId = "", options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.status = status;
    this.requestId = requestId;
  }
  override get name(): string {
    return this.constructor.name;
  }
}

/** InvalidArgument: the caller passed something the client refuses before sending anything. */
export class InvalidArgument extends ShreddError {
  constructor(message: string) {
    super("shredd: " + message, "invalid_argument");
  }
}

/** TransportError: the server could not be reached, or its answer could not be read. */
export class TransportError extends ShreddError {
  constructor(op: string, detail: string, code = "transport", options?: { cause?: unknown }) {
    super(`shredd: ${op}: ${detail}`, code, 0, "", options);
  }
}

/** Timeout: no answer within the client's timeout. */
export class Timeout extends TransportError {
  constructor(op: string, ms: number) {
    super(op, `no answer within ${ms} ms`, "timeout");
  }
}

/** WaitTimeout: forgets.wait gave up before the forget reached the state. */
export class WaitTimeout extends ShreddError {
  /** pending names the conditions that were not ok at the last check. */
  readonly pending: readonly string[];
  constructor(message: string, pending: readonly string[]) {
    super(message, "wait_timeout");
    this.pending = pending;
  }
}

/** VerifyError: an offline check (attestation, export, ack) failed; the message says which. */
export class VerifyError extends ShreddError {
  /** The spec's reason code of the refusal (docs/transparency.md §10a, §10b), "usage" for a malformed input of the verifier's own; "" when none applies. */
  readonly reason: string;
  constructor(message: string, reason = "") {
    super("shredd: verify: " + message, "verify_failed");
    this.reason = reason;
  }
}

/** EnvelopeError: an envelope did not parse or open on the client (envelope.md §5). */
export class EnvelopeError extends ShreddError {
  constructor(code: "malformed" | "unsupported" | "too_large" | "invalid" | "open_failed", message: string) {
    super("shredd: envelope: " + message, code);
  }
}

/** Problem fields of an API error. */
export interface ProblemFields {
  readonly status: number;
  readonly code: string;
  readonly title: string;
  readonly detail: string;
  readonly requestId: string;
  readonly type: string;
  readonly op: string;
  /** members are the problem's other members (extension members such as `leases`). */
  readonly members?: Readonly<Record<string, unknown>>;
}

/** APIError is a non-2xx answer; code is "" when it had no problem details (a proxy's page). */
export class APIError extends ShreddError {
  readonly title: string;
  readonly detail: string;
  readonly type: string;
  /** op is the call, as "POST /v1/encrypt" (never with a subject id). */
  readonly op: string;
  constructor(p: ProblemFields) {
    let m = `shredd: ${p.op ? p.op + ": " : ""}${p.status}`;
    if (p.code) m += " " + p.code;
    if (p.title) m += ": " + p.title;
    if (p.detail) m += " (" + p.detail + ")";
    if (p.requestId) m += ` [request ${p.requestId}]`;
    super(m, p.code, p.status, p.requestId);
    this.title = p.title;
    this.detail = p.detail;
    this.type = p.type;
    this.op = p.op;
  }
}

// Families, one per status.
/** 400: the request is malformed. */
export class InvalidRequest extends APIError {}
/** 401: no token, or an unknown, expired or revoked one. */
export class Unauthorized extends APIError {}
/** 403: the token lacks the route's scope. */
export class Forbidden extends APIError {}
/** 404: no such forget, artifact, lease, index or route. */
export class NotFound extends APIError {}
/** 405. */
export class MethodNotAllowed extends APIError {}
/** 409: a conflict with the current state. */
export class Conflict extends APIError {}
/** 410 shredded: a subject of the lineage was forgotten; the data existed and is erased (never a NotFound). */
export class Shredded extends APIError {}
/** 413: a body or a limit was exceeded. */
export class TooLarge extends APIError {}
/** 415. */
export class UnsupportedMediaType extends APIError {}
/** 422 invalid_envelope: not an envelope, or it does not open (tampered, another context). */
export class InvalidEnvelope extends APIError {}
/** 500 internal: the detail is only in the server's log, under requestId. */
export class InternalError extends APIError {}
/** 503: the root store or the database is unavailable; nothing took effect. */
export class Unavailable extends APIError {}

// One class per problem code.
/** 400 invalid_json. */ export class InvalidJSON extends InvalidRequest {}
/** 400 invalid_utf8. */ export class InvalidUTF8 extends InvalidRequest {}
/** 400 invalid_base64. */ export class InvalidBase64 extends InvalidRequest {}
/** 400 missing_field. */ export class MissingField extends InvalidRequest {}
/** 400 invalid_id. */ export class InvalidID extends InvalidRequest {}
/** 400 invalid_state. */ export class InvalidState extends InvalidRequest {}
/** 400 invalid_log_request. */ export class InvalidLogRequest extends InvalidRequest {}
/** 400 invalid_index. */ export class InvalidIndex extends InvalidRequest {}
/** 400 invalid_size. */ export class InvalidSize extends InvalidRequest {}
/** 400 unknown_kind: the artifact kind is not registered. */ export class UnknownKind extends InvalidRequest {}
/** 400 unknown_parent: a parent artifact is not registered. */ export class UnknownParent extends InvalidRequest {}
/** 400 invalid_signature: a purge ack does not verify under the holder's key. */ export class InvalidSignature extends InvalidRequest {}
/** 401 unauthenticated: no token. */ export class Unauthenticated extends Unauthorized {}
/** 401 invalid_token. */ export class InvalidToken extends Unauthorized {}
/** 403 wrong_holder: a holder-bound token named another holder. */ export class WrongHolder extends Forbidden {}
/** 404 no_route. */ export class NoRoute extends NotFound {}
/** 409 not_erased: an attestation or export of a forget not erased yet. */ export class NotErased extends Conflict {}
/**
 * 409 not_forgotten: a reinstatement of a subject without a committed forget
 * to follow: live (never forgotten, or reinstated already: a repeated
 * reinstatement lands here), or never seen.
 */ export class NotForgotten extends Conflict {}
/** 409 not_logged: an export of a forget whose events are not logged. */ export class NotLogged extends Conflict {}
/**
 * 409 undeclared_derivation: the write was made while reads of this token
 * (and holder, and unit) were attributable that it neither named (`leases`,
 * `parents`) nor declared independent (`independentOf`, `independent`).
 * Nothing was written. `leases` lists those reads (at most 100, sorted):
 * name them if the write was derived from them, declare them otherwise,
 * or write through a unit (Client.unit()), which names its own reads.
 */
export class UndeclaredDerivation extends Conflict {
  /** leases are the ids of the undeclared reads. */
  readonly leases: readonly string[];
  constructor(p: ProblemFields) {
    super(p);
    const l = p.members?.["leases"];
    this.leases = Array.isArray(l) ? l.filter((x): x is string => typeof x === "string") : [];
  }
}
/** 413 body_too_large. */ export class BodyTooLarge extends TooLarge {}
/** 503 backend_unavailable. */ export class BackendUnavailable extends Unavailable {}
/** 503 not_ready. */ export class NotReady extends Unavailable {}
/** 503 no_log: the service keeps no transparency log. */ export class NoLog extends Unavailable {}

type APIErrorClass = new (p: ProblemFields) => APIError;

const byCode: Record<string, APIErrorClass> = {
  invalid_json: InvalidJSON, invalid_utf8: InvalidUTF8, invalid_base64: InvalidBase64,
  missing_field: MissingField, invalid_id: InvalidID, invalid_request: InvalidRequest,
  invalid_state: InvalidState, invalid_log_request: InvalidLogRequest, invalid_index: InvalidIndex,
  invalid_size: InvalidSize, unknown_kind: UnknownKind, unknown_parent: UnknownParent,
  invalid_signature: InvalidSignature, unauthenticated: Unauthenticated, invalid_token: InvalidToken,
  forbidden: Forbidden, wrong_holder: WrongHolder, not_found: NotFound, no_route: NoRoute,
  method_not_allowed: MethodNotAllowed, conflict: Conflict, not_erased: NotErased, not_forgotten: NotForgotten, not_logged: NotLogged,
  undeclared_derivation: UndeclaredDerivation,
  shredded: Shredded, body_too_large: BodyTooLarge, too_large: TooLarge,
  unsupported_media_type: UnsupportedMediaType, invalid_envelope: InvalidEnvelope, internal: InternalError,
  backend_unavailable: BackendUnavailable, not_ready: NotReady, no_log: NoLog,
};

const byStatus: Record<number, APIErrorClass> = {
  400: InvalidRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
  409: Conflict, 410: Shredded, 413: TooLarge, 415: UnsupportedMediaType, 422: InvalidEnvelope,
  500: InternalError, 503: Unavailable,
};

/** PROBLEM_CODES lists every problem code that has its own class. */
export const PROBLEM_CODES: readonly string[] = Object.keys(byCode);

function classOf(status: number, code: string): APIErrorClass {
  const c = Object.hasOwn(byCode, code) ? byCode[code] : undefined;
  const fam = byStatus[status];
  // A code's class only when it belongs to the status's family: a proxy
  // answering 502 with someone else's body is no UnknownKind.
  if (c !== undefined && fam !== undefined && (c === fam || c.prototype instanceof fam)) return c;
  return fam ?? APIError;
}

function str(o: Record<string, unknown>, k: string): string {
  const v = o[k];
  return typeof v === "string" ? v : "";
}

/** errorFromProblem returns the error of a non-2xx answer. */
export function errorFromProblem(status: number, body: Uint8Array, requestIdHeader: string, op: string): APIError {
  let doc: Record<string, unknown> = {};
  try {
    const v: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
    if (v !== null && typeof v === "object" && !Array.isArray(v)) doc = v as Record<string, unknown>;
  } catch {
    // not problem details
  }
  const code = str(doc, "code");
  const cls = classOf(status, code);
  return new cls({
    status, code, title: str(doc, "title"), detail: str(doc, "detail"),
    requestId: str(doc, "request_id") || requestIdHeader, type: str(doc, "type"), op, members: doc,
  });
}

/** errorFromItem returns the error of a failed batch item; the request id is the batch's. */
export function errorFromItem(item: Record<string, unknown>, op: string, requestId: string): APIError {
  const status = typeof item["status"] === "number" ? item["status"] : 0;
  const code = str(item, "code");
  const cls = classOf(status, code);
  return new cls({ status, code, title: str(item, "title"), detail: str(item, "detail"), requestId, type: str(item, "type"), op, members: item });
}
