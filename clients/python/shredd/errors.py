"""Exceptions of the shredd client.

Every answer of the server that is not 2xx becomes an :class:`APIError`
subclass carrying the RFC 9457 problem details (``status``, ``code``,
``title``, ``detail``, ``request_id``): one class per documented code
family of docs/api.md, so that callers write ``except shredd.Shredded``
instead of comparing status numbers. A failure to reach the server at all
(refused connection, timeout, TLS) is a :class:`TransportError`.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Type

__all__ = [
    "Error",
    "InvalidInput",
    "TransportError",
    "Timeout",
    "WaitTimeout",
    "APIError",
    "InvalidRequest",
    "UnknownKind",
    "UnknownParent",
    "InvalidSignature",
    "Unauthorized",
    "Forbidden",
    "WrongHolder",
    "NotFound",
    "MethodNotAllowed",
    "Conflict",
    "NotErased",
    "NotForgotten",
    "NotLogged",
    "UndeclaredDerivation",
    "Shredded",
    "TooLarge",
    "UnsupportedMediaType",
    "InvalidEnvelope",
    "Unavailable",
    "NoLog",
    "InternalError",
    "error_from_problem",
]


class Error(Exception):
    """Error is the base of every exception the client raises."""


class InvalidInput(Error, ValueError, TypeError):
    """InvalidInput: the client refused an argument before anything was
    sent: an unknown or misspelt key of a batch item, a value of the wrong
    type (text where bytes are due, one string where a list of ids is),
    a string that is not valid Unicode (a lone surrogate), an id of the
    wrong shape. It is also a ValueError and a TypeError, so code written
    against either keeps working."""


class TransportError(Error):
    """TransportError: the server could not be reached or did not answer
    (connection refused or reset, TLS failure, a body over the client's
    limit). The call may or may not have taken effect on the server."""

    def __init__(self, op: str, reason: str) -> None:
        super().__init__("shredd: %s: %s" % (op, reason))
        self.op = op
        self.reason = reason


class Timeout(TransportError, TimeoutError):
    """Timeout: the server did not answer within the client's timeout.
    It is also the builtin TimeoutError."""


class WaitTimeout(Error, TimeoutError):
    """WaitTimeout: Forgets.wait gave up before the forget reached the
    state it waited for. ``forget`` is the forget as last seen, ``pending``
    its conditions that do not hold, each with the server's reason (a
    lease still live is named there, with its holder). It is also the
    builtin TimeoutError; it is not a TransportError: the server answered
    every poll."""

    def __init__(self, message: str, forget: Any = None, state: str = "", pending: Optional[List[Any]] = None) -> None:
        super().__init__(message)
        self.forget = forget
        self.state = state
        self.pending = list(pending or [])


class APIError(Error):
    """APIError is an answer of the server other than 2xx: its problem
    details. ``code`` is stable and meant for machines (``"shredded"``,
    ``"not_found"`` ...); it is ``""`` when the response held no problem
    details (a proxy's error page). ``request_id`` names the request in
    the server's log, which holds the full cause."""

    def __init__(self, status: int, code: str = "", title: str = "", detail: str = "",
                 request_id: str = "", type: str = "", op: str = "") -> None:
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.request_id = request_id
        self.type = type
        self.op = op
        super().__init__(self._message())

    def _message(self) -> str:
        parts = ["shredd: "]
        if self.op:
            parts.append(self.op + ": ")
        parts.append(str(self.status))
        if self.code:
            parts.append(" " + self.code)
        if self.title:
            parts.append(": " + self.title)
        if self.detail:
            parts.append(" (" + self.detail + ")")
        if self.request_id:
            parts.append(" [request " + self.request_id + "]")
        return "".join(parts)

    def __repr__(self) -> str:
        return "%s(status=%d, code=%r, request_id=%r)" % (type(self).__name__, self.status, self.code, self.request_id)


class InvalidRequest(APIError):
    """400: the request is malformed (``invalid_json``, ``invalid_utf8``,
    ``invalid_base64``, ``missing_field``, ``invalid_id``,
    ``invalid_request``, ``invalid_state``, ``invalid_log_request``,
    ``invalid_index``, ``invalid_size``)."""


class UnknownKind(InvalidRequest):
    """400 ``unknown_kind``: the artifact kind is not registered."""


class UnknownParent(InvalidRequest):
    """400 ``unknown_parent``: a parent artifact is not registered."""


class InvalidSignature(InvalidRequest):
    """400 ``invalid_signature``: a purge ack does not verify under the
    holder's registered key."""


class Unauthorized(APIError):
    """401 (``unauthenticated``, ``invalid_token``): no token, or an
    unknown, expired or revoked one."""


class Forbidden(APIError):
    """403 ``forbidden``: the token lacks the route's scope."""


class WrongHolder(Forbidden):
    """403 ``wrong_holder``: a holder-bound token named another holder."""


class NotFound(APIError):
    """404 (``not_found``, ``no_route``): no such forget, artifact, lease,
    log index or tree size; or no such route."""


class MethodNotAllowed(APIError):
    """405 ``method_not_allowed``."""


class Conflict(APIError):
    """409 ``conflict``: another key for a registered holder, or an
    artifact already closed by an earlier ack."""


class NotErased(Conflict):
    """409 ``not_erased``: an attestation or export of a forget that is
    not erased yet."""


class NotForgotten(Conflict):
    """409 ``not_forgotten``: a reinstatement of a subject without a
    committed forget to follow: live (never forgotten, or reinstated
    already, so a retried reinstatement lands here), or never seen."""


class NotLogged(Conflict):
    """409 ``not_logged``: an export of a forget whose events are not in
    the transparency log."""


class UndeclaredDerivation(Conflict):
    """409 ``undeclared_derivation``: a write made while its token held
    reads (decrypt leases, attributable until their expiry, released or
    not) that it neither named nor declared independent of, refused by the
    token's policy. ``leases`` lists those reads' ids (at most 100,
    sorted): name them in the write's ``leases`` when it was made from
    them, or in ``independent_of`` when it was not. A unit of work
    (``Client.unit``) names its own reads on every write."""

    def __init__(self, status: int, code: str = "", title: str = "", detail: str = "",
                 request_id: str = "", type: str = "", op: str = "", leases: Optional[List[str]] = None) -> None:
        self.leases: List[str] = list(leases or [])
        super().__init__(status, code, title, detail, request_id, type, op)


class Shredded(APIError):
    """410 ``shredded``: a subject of the data's lineage was forgotten; the
    data existed and is cryptographically erased. Distinct from
    :class:`NotFound`."""


class TooLarge(APIError):
    """413 (``body_too_large``, ``too_large``): a body or a limit
    (plaintext, context, lineage, parents, batch items) was exceeded."""


class UnsupportedMediaType(APIError):
    """415 ``unsupported_media_type``."""


class InvalidEnvelope(APIError):
    """422 ``invalid_envelope``: the ciphertext is not a shredd envelope,
    does not open (tampered, another context) or names a subject key that
    never existed."""


class Unavailable(APIError):
    """503 (``backend_unavailable``, ``not_ready``): the root store or the
    database is unavailable; nothing was encrypted or decrypted."""


class NoLog(Unavailable):
    """503 ``no_log``: the service keeps no transparency log."""


class InternalError(APIError):
    """500 ``internal``: the detail is only in the server's log, under
    ``request_id``."""


_BY_CODE: Dict[str, Type[APIError]] = {
    "unknown_kind": UnknownKind,
    "unknown_parent": UnknownParent,
    "invalid_signature": InvalidSignature,
    "wrong_holder": WrongHolder,
    "not_erased": NotErased,
    "not_forgotten": NotForgotten,
    "not_logged": NotLogged,
    "undeclared_derivation": UndeclaredDerivation,
    "no_log": NoLog,
}

_BY_STATUS: Dict[int, Type[APIError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Shredded,
    413: TooLarge,
    415: UnsupportedMediaType,
    422: InvalidEnvelope,
    500: InternalError,
    503: Unavailable,
}


def _error_class(status: int, code: str) -> Type[APIError]:
    cls = _BY_CODE.get(code)
    if cls is not None and _BY_STATUS.get(status) in cls.__mro__:
        return cls
    return _BY_STATUS.get(status, APIError)


def error_from_problem(status: int, body: bytes, headers: Optional[Any] = None,
                       op: str = "") -> APIError:
    """error_from_problem returns the exception for an answer of the given
    status and body: the class of its code family, with the problem's
    fields when the body is problem+json (else only the status, and the
    request id from the ``X-Request-Id`` header when there is one).
    headers is any mapping with ``get`` (a dict, an http.client message)."""
    fields: Dict[str, Any] = {}
    try:
        doc = json.loads(body.decode("utf-8")) if body else None
        if isinstance(doc, dict):
            fields = doc
    except (UnicodeDecodeError, ValueError):
        pass

    def s(name: str) -> str:
        v = fields.get(name)
        return v if isinstance(v, str) else ""

    code = s("code")
    request_id = s("request_id")
    if not request_id and headers is not None:
        request_id = headers.get("X-Request-Id", "") or ""
    cls = _error_class(status, code)
    return _make(cls, fields, status=status, code=code, title=s("title"), detail=s("detail"), request_id=request_id,
                 type=s("type"), op=op)


def _make(cls: Type[APIError], fields: Mapping[str, Any], **kw: Any) -> APIError:
    # The extension members of a problem go to the classes that carry them.
    if issubclass(cls, UndeclaredDerivation):
        ls = fields.get("leases")
        return cls(leases=[x for x in ls if isinstance(x, str)] if isinstance(ls, list) else [], **kw)
    return cls(**kw)


def error_from_item(item: Mapping[str, Any], op: str, request_id: str = "") -> APIError:
    """error_from_item returns the exception of a failed batch item (its
    ``error`` object); the request id is the batch's."""
    st = item.get("status")
    status = st if isinstance(st, int) else 0
    def s(name: str) -> str:
        v = item.get(name)
        return v if isinstance(v, str) else ""
    cls = _error_class(status, s("code"))
    return _make(cls, item, status=status, code=s("code"), title=s("title"), detail=s("detail"),
                 request_id=request_id, type=s("type"), op=op)
