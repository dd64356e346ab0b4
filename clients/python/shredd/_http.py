"""The HTTP transport of the shredd client: standard library only
(http.client), with timeouts, retries of idempotent calls, TLS with a CA
file, bounded response bodies and no redirects.

http.client rather than urllib.request: the raw-body routes take one
``Shredd-Subject`` header line per subject (a subject id may hold a comma,
so the lines cannot be joined), which urllib cannot send; and urllib
follows redirects with the bearer token by default."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import time
import urllib.parse
from dataclasses import dataclass, field
from email.message import Message
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Union

from .errors import APIError, InvalidInput, Timeout, TransportError, error_from_problem

DEFAULT_URL = "http://127.0.0.1:7750"
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 2
DEFAULT_MAX_RESPONSE = 256 << 20

# Statuses after which an idempotent call is tried again.
_RETRY_STATUSES = frozenset({429, 502, 503, 504})

Headers = Union[Mapping[str, str], Sequence[Tuple[str, str]]]


@dataclass(frozen=True)
class Response:
    """Response is a 2xx answer: status, headers (names case-insensitive)
    and the body."""

    status: int
    headers: Message
    body: bytes = field(repr=False)

    def json(self) -> Any:
        """json decodes the body as JSON."""
        return json.loads(self.body.decode("utf-8"))

    def header(self, name: str) -> str:
        """header returns the value of a response header, "" when absent."""
        return self.headers.get(name, "") or ""


class Transport:
    """Transport sends the requests of one client to one server. It opens
    a connection per call, so one Transport is safe to share between
    threads."""

    def __init__(self, base_url: str, token: Optional[str], *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = 0.2, cafile: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, user_agent: str = "",
                 max_response: int = DEFAULT_MAX_RESPONSE) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname or u.query or u.fragment:
            raise InvalidInput("shredd: base URL %r: want http(s)://host[:port][/prefix]" % base_url)
        if u.username is not None or u.password is not None:
            raise InvalidInput("shredd: the base URL must not hold credentials: pass the token")
        if retries < 0 or timeout <= 0 or max_response <= 0 or backoff < 0:
            raise InvalidInput("shredd: retries and backoff must be >= 0, timeout and max_response > 0")
        if cafile and u.scheme != "https":
            raise InvalidInput("shredd: cafile needs an https URL")
        self.base = base_url.rstrip("/")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.token = token or ""
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_response = max_response
        self.user_agent = user_agent
        self._ssl: Optional[ssl.SSLContext] = None
        if self._https:
            self._ssl = ssl_context or ssl.create_default_context(cafile=cafile)

    def request(self, method: str, path: str, *, body: Optional[bytes] = None, content_type: str = "",
                headers: Optional[Headers] = None, query: Optional[Mapping[str, Any]] = None,
                idempotent: bool = False, timeout: Optional[float] = None, auth: bool = True) -> Response:
        """request sends one call and returns its 2xx answer, or raises the
        APIError of the problem the server answered, or a TransportError.
        Only calls marked idempotent are tried again (up to ``retries``
        more times, with exponential backoff) after a transport failure or
        a 429/502/503/504 answer: an encrypt lost in transit may still have
        registered its artifact, so it is never sent twice."""
        target = self._prefix + path
        if query:
            q = {k: str(v) for k, v in query.items() if v is not None}
            if q:
                try:
                    target += "?" + urllib.parse.urlencode(q)
                except UnicodeEncodeError:
                    raise InvalidInput("shredd: a query parameter is not valid Unicode text (a lone surrogate?)") from None
        op = "%s %s" % (method, path)
        attempts = 1 + (self.retries if idempotent else 0)
        for attempt in range(attempts):
            if attempt:
                time.sleep(min(self.backoff * (2 ** (attempt - 1)), 5.0))
            try:
                return self._once(method, target, op, body, content_type, headers, timeout, auth)
            except APIError as e:
                if e.status not in _RETRY_STATUSES or attempt + 1 == attempts:
                    raise
            except TransportError:
                if attempt + 1 == attempts:
                    raise
        raise AssertionError("unreachable")

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _once(self, method: str, target: str, op: str, body: Optional[bytes], content_type: str,
              headers: Optional[Headers], timeout: Optional[float], auth: bool) -> Response:
        t = timeout or self.timeout
        lines: List[Tuple[str, str]] = []
        if auth and self.token:
            lines.append(("Authorization", "Bearer " + self.token))
        lines.append(("User-Agent", self.user_agent or "shredd-python-client/1"))
        lines.append(("Accept", "application/json, application/problem+json, */*"))
        if body is not None:
            lines.append(("Content-Type", content_type or "application/json"))
            lines.append(("Content-Length", str(len(body))))
        elif method in ("POST", "PUT", "PATCH"):
            lines.append(("Content-Length", "0"))
        if headers is not None:
            lines.extend(headers.items() if isinstance(headers, Mapping) else headers)
        encoded: List[Tuple[str, bytes]] = []
        for k, v in lines:
            if not isinstance(v, str):
                raise InvalidInput("shredd: header %s: a string, not %s" % (k, type(v).__name__))
            if any(c in v for c in "\r\n\x00"):
                # http.client refuses them too; say which header, not the value.
                raise InvalidInput("shredd: header %s holds a control character" % k)
            try:
                # One line per value, in UTF-8 as the server reads it: given a
                # str, http.client would encode it as Latin-1 (and fail on
                # most non-ASCII subject ids). It takes bytes as they are.
                encoded.append((k, v.encode("utf-8")))
            except UnicodeEncodeError:
                raise InvalidInput("shredd: header %s is not valid Unicode text (a lone surrogate?)" % k) from None
        conn = self._connection(t)
        try:
            conn.putrequest(method, target, skip_accept_encoding=True)
            for k, b in encoded:
                conn.putheader(k, b)  # type: ignore[arg-type]
            try:
                conn.endheaders(body)
            except (BrokenPipeError, ConnectionResetError):
                # The server may have answered and closed before the whole
                # body was sent (a 413 for a body over its limit): read the
                # answer it left, if any.
                pass
            resp = conn.getresponse()
            data = resp.read(self.max_response + 1)
            if len(data) > self.max_response:
                raise TransportError(op, "response body over %d bytes" % self.max_response)
            if 200 <= resp.status < 300:
                return Response(status=resp.status, headers=resp.msg, body=data)
            # Anything else, redirects included (following one would resend
            # the bearer token to wherever it points), is an APIError.
            raise error_from_problem(resp.status, data, resp.msg, op)
        except (socket.timeout, TimeoutError):
            raise Timeout(op, "no answer within %gs" % t) from None
        except ssl.SSLError as e:
            raise TransportError(op, "TLS: %s" % e) from None
        except (http.client.HTTPException, OSError) as e:
            raise TransportError(op, "%s: %s" % (type(e).__name__, e)) from None
        finally:
            conn.close()
