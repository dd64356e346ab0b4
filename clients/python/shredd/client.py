"""The shredd client: one class per concept of the API (docs/api.md).

    from shredd import Client
    c = Client("http://127.0.0.1:7750", token)
    sealed = c.sealing.encrypt(kind="episodic", subjects=["alice@example.com"], plaintext=b"...")
    opened = c.sealing.decrypt(sealed.ciphertext)

``Client`` holds the transport and these parts:

==============  ==========================================================
``kinds``       :class:`Kinds`: list and register artifact kinds
``sealing``     :class:`Sealing`: encrypt/decrypt, JSON and raw routes, batches, derivatives, client-side sealing
``leases``      :class:`Leases`: release; decrypt as a context manager that releases
``unit()``      :class:`Unit`: a unit of work whose writes name its reads
``artifacts``   :class:`Artifacts`: register plaintext-held artifacts, look one up
``forgets``     :class:`Forgets`: forget, dry run, status, verify, attestation, export
``holders``     :class:`Holders`: register a holder, purge work, signed acks, inventories
``log``         :class:`Log`: checkpoint, verifier key, inclusion and consistency proofs
==============  ==========================================================
"""

from __future__ import annotations

import datetime
import difflib
import functools
import inspect
import json
import secrets
import ssl
import sys
import threading
import time
from contextlib import contextmanager
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar, Union,
                    cast)

from . import _seal
from . import types as t
from ._http import DEFAULT_MAX_RESPONSE, DEFAULT_RETRIES, DEFAULT_TIMEOUT, DEFAULT_URL, Headers, Response, Transport
from .errors import Error, InvalidInput, WaitTimeout, error_from_item

__all__ = ["Client", "Kinds", "Sealing", "Leases", "Unit", "Artifacts", "Forgets", "Holders", "Log", "MAX_BATCH"]

_T = TypeVar("_T")

#: The most items one request of a batch holds (the server's limit); the
#: batch calls send longer lists in parts.
MAX_BATCH = 1000

_JSON = "application/json"
_OCTETS = "application/octet-stream"


_BytesLike = Union[bytes, bytearray, memoryview]


def _json_body(d: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(d, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("shredd: a string of the request is not valid Unicode text (a lone surrogate?)") from None
    except (TypeError, ValueError) as e:
        raise InvalidInput("shredd: a value of the request cannot be sent as JSON: %s" % e) from None


def _str(what: str, v: Any) -> str:
    """_str checks that v is a string the API can carry (UTF-8)."""
    if not isinstance(v, str):
        raise InvalidInput("shredd: %s must be a string, not %s" % (what, type(v).__name__))
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("shredd: %s is not valid Unicode text (a lone surrogate?)" % what) from None
    return v


def _strs(what: str, v: Any) -> List[str]:
    """_strs checks a list of strings (None: none). One string is refused:
    list("abc") would send three one-letter ids."""
    if v is None:
        return []
    if isinstance(v, (str, bytes, bytearray)):
        raise InvalidInput("shredd: %s is a list of ids, not one %s" % (what, type(v).__name__))
    try:
        xs = list(v)
    except TypeError:
        raise InvalidInput("shredd: %s is a list of ids, not %s" % (what, type(v).__name__)) from None
    return [_str(what, x) for x in xs]


def _bytes(what: str, v: Any) -> bytes:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise InvalidInput("shredd: %s must be bytes (encode text first), not %s" % (what, type(v).__name__))
    return bytes(v)


def _subjects(subject: Optional[str], subjects: Optional[Sequence[str]]) -> List[str]:
    out = [_str("subject", subject)] if subject is not None else []
    if isinstance(subjects, str):
        raise InvalidInput("shredd: subjects is a list of subject ids, not one string: use subject=")
    return out + _strs("subjects", subjects)


def _check_id(what: str, v: Any) -> str:
    if not isinstance(v, str) or len(v) != 32 or any(c not in "0123456789abcdef" for c in v):
        raise InvalidInput("shredd: %s ids are 32 lower-case hex digits" % what)
    return v


def _check_item(it: Any, i: int, op: str, allowed: "frozenset[str]", required: Sequence[str]) -> Mapping[str, Any]:
    """_check_item refuses a batch item that is not a mapping, lacks a
    required key or holds a key the API does not know (with the closest
    known key: ``parent`` is ``parents``), before anything is sent."""
    if not isinstance(it, Mapping):
        raise InvalidInput("shredd: %s item %d: a dict, not %s" % (op, i, type(it).__name__))
    for k in it:
        if k not in allowed:
            near = difflib.get_close_matches(str(k), sorted(allowed), n=1)
            raise InvalidInput("shredd: %s item %d: unknown key %r%s (known: %s)" % (
                op, i, k, " (did you mean %r?)" % near[0] if near else "", ", ".join(sorted(allowed))))
    for k in required:
        if k not in it:
            raise InvalidInput("shredd: %s item %d: no %r" % (op, i, k))
    return it


def _chunks(n: int) -> List[Tuple[int, int]]:
    return [(i, min(i + MAX_BATCH, n)) for i in range(0, n, MAX_BATCH)]


def _checked(f: Callable[..., _T]) -> Callable[..., _T]:
    """_checked makes a public method refuse arguments it does not take
    (a misspelt keyword: ``contxt=``) with InvalidInput, naming the
    keyword meant, before its body runs; Python would raise a bare
    TypeError."""
    sig = inspect.signature(f)
    names = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]

    @functools.wraps(f)
    def call(*args: Any, **kw: Any) -> _T:
        try:
            sig.bind(*args, **kw)
        except TypeError as e:
            hint = ""
            for k in kw:
                if k not in sig.parameters:
                    near = difflib.get_close_matches(k, names, n=1)
                    hint = " (did you mean %r?)" % near[0] if near else ""
                    break
            raise InvalidInput("shredd: %s: %s%s" % (f.__qualname__, e, hint)) from None
        return f(*args, **kw)
    return call


def _check_methods(cls: Any) -> None:
    for name, v in list(vars(cls).items()):
        if not name.startswith("_") and inspect.isfunction(v):
            setattr(cls, name, _checked(v))


class _Part:
    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        _check_methods(cls)

    def __init__(self, client: "Client") -> None:
        self._c = client

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None, *,
              idempotent: bool = False, query: Optional[Mapping[str, Any]] = None) -> Response:
        return self._c.request(method, path, body=None if body is None else _json_body(body),
                               content_type=_JSON, idempotent=idempotent, query=query)


class Kinds(_Part):
    """Kinds are the registered artifact types: the closure set of the
    erasure proofs (``GET /v1/kinds``, ``PUT /v1/kinds/{kind}``)."""

    def list(self) -> List[t.Kind]:
        """list returns the registered kinds, by name."""
        return [t.Kind.from_json(k) for k in self._call("GET", "/v1/kinds", idempotent=True).json()["kinds"]]

    def put(self, name: str, description: str = "") -> Tuple[t.Kind, bool]:
        """put registers a kind (admin) and returns it and whether it is
        new; an existing kind gets the new description."""
        r = self._call("PUT", "/v1/kinds/" + _path(name), {"description": description} if description else None,
                       idempotent=True)
        return t.Kind.from_json(r.json()), r.status == 201

    def ensure(self, *names: str) -> None:
        """ensure registers each kind that is not registered yet (admin)."""
        have = {k.name for k in self.list()}
        for n in names:
            if n not in have:
                self.put(n)


def _duration(v: Any) -> str:
    """_duration spells a duration as Go's time.ParseDuration reads it: a
    str as given, seconds (int, float or timedelta) as "<n>s"."""
    if isinstance(v, str):
        return v
    if isinstance(v, datetime.timedelta):
        v = v.total_seconds()
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
        raise InvalidInput("shredd: a duration is a Go duration string (\"10m\"), a positive number of seconds or a timedelta")
    return ("%d" % v if float(v).is_integer() else repr(float(v))) + "s"


def _path(segment: str) -> str:
    import urllib.parse
    return urllib.parse.quote(_str("a path segment", segment), safe="")


_UNIT_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-")


def _unit(v: Any) -> str:
    """_unit checks a unit-of-work label: 1 to 64 of A-Za-z0-9._:- ."""
    u = _str("unit", v)
    if not 1 <= len(u) <= 64 or any(c not in _UNIT_CHARS for c in u):
        raise InvalidInput("shredd: a unit is 1 to 64 characters of A-Za-z0-9._:-")
    return u


def _bool(what: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise InvalidInput("shredd: %s must be True or False, not %s" % (what, type(v).__name__))
    return v


def _source_wire(kind: str, subject: Optional[str], subjects: Optional[Sequence[str]],
                 parents: Optional[Sequence[str]], leases: Optional[Sequence[str]],
                 holder: Optional[str], independent: bool = False, independent_of: Optional[Sequence[str]] = None,
                 unit: Optional[str] = None) -> Dict[str, Any]:
    # What an artifact is made of: the fields of an encrypt request but its
    # plaintext and context (the whole request of POST /v1/datakey).
    w: Dict[str, Any] = {"kind": _str("kind", kind)}
    subs = _subjects(subject, subjects)
    if subs:
        w["subjects"] = subs
    ps = [_check_id("parent", p) for p in _strs("parents", parents)]
    if ps:
        w["parents"] = ps
    ls = [_check_id("lease", x) for x in _strs("leases", leases)]
    if ls:
        w["leases"] = ls
    indep = [_check_id("lease", x) for x in _strs("independent_of", independent_of)]
    if indep:
        w["independent_of"] = indep
    if _bool("independent", independent):
        w["independent"] = True
    if unit is not None:
        w["unit"] = _unit(unit)
    if holder:
        w["holder"] = _str("holder", holder)
    return w


def _encrypt_wire(kind: str, plaintext: _BytesLike, subject: Optional[str], subjects: Optional[Sequence[str]],
                  parents: Optional[Sequence[str]], leases: Optional[Sequence[str]], context: Optional[_BytesLike],
                  holder: Optional[str], independent: bool = False, independent_of: Optional[Sequence[str]] = None,
                  unit: Optional[str] = None) -> Dict[str, Any]:
    pt = _bytes("plaintext", plaintext)
    w = _source_wire(kind, subject, subjects, parents, leases, holder, independent, independent_of, unit)
    w["plaintext"] = t.b64(pt)
    if context is not None:
        ctx = _bytes("context", context)
        if ctx:
            w["context"] = t.b64(ctx)
    return w


def _item_source(it: Mapping[str, Any]) -> Dict[str, Any]:
    return _source_wire(it["kind"], it.get("subject"), it.get("subjects"), it.get("parents"), it.get("leases"),
                        it.get("holder"), it.get("independent", False), it.get("independent_of"), it.get("unit"))


def _item_wire(it: Mapping[str, Any]) -> Dict[str, Any]:
    return _encrypt_wire(it["kind"], it["plaintext"], it.get("subject"), it.get("subjects"), it.get("parents"),
                         it.get("leases"), it.get("context"), it.get("holder"), it.get("independent", False),
                         it.get("independent_of"), it.get("unit"))


def _decrypt_wire(ciphertext: str, context: Optional[_BytesLike], holder: Optional[str],
                  unit: Optional[str] = None) -> Dict[str, Any]:
    w: Dict[str, Any] = {"ciphertext": _str("ciphertext", ciphertext)}
    if context is not None:
        ctx = _bytes("context", context)
        if ctx:
            w["context"] = t.b64(ctx)
    if holder:
        w["holder"] = _str("holder", holder)
    if unit is not None:
        w["unit"] = _unit(unit)
    return w


def _seal_answer(d: Mapping[str, Any], plaintext: Any, context: Optional[Any], op: str) -> t.Sealed:
    """_seal_answer seals plaintext with the data key of one answer of POST
    /v1/datakey and overwrites the key's bytearray, sealed or not."""
    key = bytearray(t.unb64(d["key"]))
    try:
        header = t.unb64(d["header"])
        try:
            artifact, count, _ = _seal.parse_header(header)
        except ValueError as e:
            raise Error("shredd: %s: the server answered a header this client cannot seal with: %s" % (op, e)) from None
        if artifact != d["artifact"] or count != int(d["lineage_size"]):
            raise Error("shredd: %s: the header is not that of the artifact answered" % op)
        env = _seal.seal(header, key, plaintext, context)
    finally:
        _seal.zero(key)
    return t.Sealed(envelope=env, artifact=d["artifact"], lineage_size=int(d["lineage_size"]),
                    inherited=t._ids(d.get("inherited")))


_R = TypeVar("_R")


class Sealing(_Part):
    """Sealing encrypts and decrypts artifacts (``POST /v1/encrypt``,
    ``/v1/decrypt``, their batches and their raw-body routes) and seals
    them on the client (``POST /v1/datakey``). None of these calls is
    retried: an encrypt lost in transit may have registered its artifact,
    and a decrypt issues a lease.

    Reads are lineage: every write (encrypt, seal, their batches and raw
    route, Artifacts.register) made while its token holds attributable
    reads (decrypt leases until their expiry, released or not) of the
    same holder and unit must name them (``leases``), declare itself
    independent of them (``independent_of``) or of every read it does not
    name (``independent=True``); otherwise the token's policy refuses it
    (UndeclaredDerivation, with the leases) or gives it those reads'
    lineage (``inherited`` in the answer). ``unit`` labels a call with a
    unit of work; Client.unit does all of this for one task."""

    def encrypt(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
                subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
                holder: Optional[str] = None, independent: bool = False,
                independent_of: Optional[Sequence[str]] = None, unit: Optional[str] = None) -> t.Encrypted:
        """encrypt seals a new artifact of a registered kind about the
        given subjects and/or derived from parents (their lineage is
        inherited) or from the artifacts of leases. ``context`` is bound
        into the ciphertext and needed again to decrypt.
        ``independent_of`` (lease ids) and ``independent`` declare reads
        the artifact was not made from; ``unit`` is the unit of work's
        label (see the class). Raises UndeclaredDerivation when the token
        holds reads the write neither names nor declares."""
        w = _encrypt_wire(kind, plaintext, subject, subjects, parents, leases, context, holder, independent,
                          independent_of, unit)
        return t.Encrypted.from_json(self._call("POST", "/v1/encrypt", w).json())

    def derive(self, kind: str, plaintext: _BytesLike, parents: Sequence[str], *,
               context: Optional[_BytesLike] = None, holder: Optional[str] = None,
               leases: Optional[Sequence[str]] = None, independent: bool = False,
               independent_of: Optional[Sequence[str]] = None, unit: Optional[str] = None) -> t.Encrypted:
        """derive seals a derivative (a summary, a profile) of the parent
        artifacts: its lineage is the union of theirs, so forgetting any
        subject of any parent makes it unreadable too."""
        if not _strs("parents", parents):
            raise InvalidInput("shredd: derive needs at least one parent")
        return self.encrypt(kind, plaintext, parents=parents, leases=leases, context=context, holder=holder,
                            independent=independent, independent_of=independent_of, unit=unit)

    def decrypt(self, ciphertext: str, *, context: Optional[_BytesLike] = None, holder: Optional[str] = None,
                hold: bool = True, unit: Optional[str] = None) -> t.Decrypted:
        """decrypt opens a ``shredd:v1:`` ciphertext; raises Shredded when a
        subject of its lineage was forgotten.

        Every decrypt issues a lease, which decrypt returns unreleased: a
        forget of a subject of the lineage waits for it, and until its
        expiry the read is attributable to this token (and ``holder``,
        ``unit``): a write the token makes meanwhile names it
        (``leases=[d.lease.id]``) or declares itself independent of it.
        Release it (Leases.release) once the plaintext is dropped, or
        decrypt through Leases.open, or read and write in a unit of work
        (Client.unit), which names its reads and releases them at the end.
        ``hold`` is kept for the callers of the earlier clients, which
        released the lease right after reading unless ``hold=True``: every
        decrypt now holds its lease, and ``hold=False`` is refused."""
        _hold(hold)
        return t.Decrypted.from_json(self._call("POST", "/v1/decrypt",
                                                _decrypt_wire(ciphertext, context, holder, unit)).json())

    def _batched(self, path: str, wire: List[Dict[str, Any]], op: str,
                 one: Callable[[int, Dict[str, Any], str], _R], failed: Callable[[Error], _R]) -> List[_R]:
        # Sends wire in parts of MAX_BATCH items. When the first part fails
        # as a whole nothing took effect and its exception is raised; when a
        # later one does, the earlier parts took effect: their results are
        # kept, and each item of the failed part and of the parts not sent
        # gets that exception.
        out: List[_R] = []
        for lo, hi in _chunks(len(wire)):
            try:
                r = self._call("POST", path, {"batch_input": wire[lo:hi]})
                results = r.json()["batch_results"]
                if len(results) != hi - lo:
                    raise Error("shredd: %s: %d results for %d items" % (op, len(results), hi - lo))
            except Error as e:
                if lo == 0:
                    raise
                out.extend(failed(e) for _ in range(lo, len(wire)))
                return out
            rid = r.header("X-Request-Id")
            for j, res in enumerate(results):
                out.append(one(lo + j, res, rid))
        return out

    def encrypt_batch(self, items: Sequence[t.EncryptItem]) -> List[t.EncryptResult]:
        """encrypt_batch seals many artifacts, MAX_BATCH per request. Each
        item is an EncryptItem: a dict of encrypt's keyword arguments
        (``kind``, ``plaintext``, ``subject``/``subjects``, ``parents``,
        ``leases``, ``independent``, ``independent_of``, ``unit``,
        ``context``, ``holder``); any other key raises
        InvalidInput before anything is sent. One result per item, in
        order; a failed item has ``error`` set and every other item took
        effect."""
        if not items:
            raise InvalidInput("shredd: an empty batch")
        op = "POST /v1/encrypt"
        wire = [_item_wire(_check_item(it, i, op, t.ENCRYPT_ITEM_KEYS, ("kind", "plaintext")))
                for i, it in enumerate(items)]

        def one(i: int, res: Dict[str, Any], rid: str) -> t.EncryptResult:
            if "error" in res:
                return t.EncryptResult(error=error_from_item(res["error"], "%s item %d" % (op, i), rid))
            return t.EncryptResult(value=t.Encrypted.from_json(res))
        return self._batched("/v1/encrypt", wire, op, one, lambda e: t.EncryptResult(error=e))

    def seal(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
             subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
             leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
             holder: Optional[str] = None, independent: bool = False,
             independent_of: Optional[Sequence[str]] = None, unit: Optional[str] = None) -> t.Sealed:
        """seal is encrypt with the plaintext sealed here, on the client:
        the keywords and the errors are encrypt's, and the plaintext and
        context never leave this process. See seal_many."""
        _seal.aesgcm()  # before anything is registered
        _check_sizes(plaintext, context, "")
        r = self._call("POST", "/v1/datakey", _source_wire(kind, subject, subjects, parents, leases, holder,
                                                            independent, independent_of, unit))
        return _seal_answer(r.json(), plaintext, context, "POST /v1/datakey")

    def seal_many(self, items: Sequence[t.EncryptItem]) -> List[t.SealResult]:
        """seal_many seals many artifacts on the client, MAX_BATCH per
        request. Items are the EncryptItems of encrypt_batch (``kind``,
        ``plaintext``, ``subject``/``subjects``, ``parents``, ``leases``,
        ``independent``, ``independent_of``, ``unit``, ``context``,
        ``holder``; any other key raises InvalidInput before
        anything is sent). A POST /v1/datakey batch registers the
        artifacts, with the checks of encrypt (the forget barrier, the
        kind, forgotten parents), and answers for each its envelope header
        and artifact key; each plaintext is then sealed here (AES-256-GCM,
        from the ``cryptography`` package) into exactly the envelope
        encrypt would have answered, which decrypt opens. The plaintexts
        and contexts never cross the network.

        One result per item, in order: a failed item has ``error`` set (it
        was not registered), every other item was registered and sealed.
        Plaintexts over 64 MiB and contexts over 4,096 bytes raise
        InvalidInput (a ValueError) before anything is sent. A header the
        client cannot seal with raises shredd.Error for the whole call.

        An artifact key is as secret as the plaintext it seals, and seals
        one plaintext only. Each key is held in a bytearray that is
        overwritten once its plaintext is sealed (or the call fails), but
        Python cannot promise that no other copy exists: the response body
        and its decoded JSON hold the key in base64, as immutable objects
        that are freed, not wiped, and ``cryptography`` may copy the key
        internally. A writer that must bound where key material can linger
        should seal in a short-lived process. The writer drops its
        plaintext too: a forget cannot reach a copy the writer kept."""
        if not items:
            raise InvalidInput("shredd: an empty batch")
        _seal.aesgcm()  # before anything is registered
        op = "POST /v1/datakey"
        wire = []
        for i, it in enumerate(items):
            _check_item(it, i, op, t.ENCRYPT_ITEM_KEYS, ("kind", "plaintext"))
            _check_sizes(it["plaintext"], it.get("context"), " (item %d)" % i)
            wire.append(_item_source(it))

        def one(i: int, res: Dict[str, Any], rid: str) -> t.SealResult:
            if "error" in res:
                return t.SealResult(error=error_from_item(res["error"], "%s item %d" % (op, i), rid))
            it = items[i]
            return t.SealResult(value=_seal_answer(res, it["plaintext"], it.get("context"), "%s item %d" % (op, i)))
        return self._batched("/v1/datakey", wire, op, one, lambda e: t.SealResult(error=e))

    def decrypt_batch(self, items: Sequence[Union[str, t.DecryptItem]], *, hold: bool = True,
                      unit: Optional[str] = None) -> List[t.DecryptResult]:
        """decrypt_batch opens many ciphertexts, MAX_BATCH per request
        (each a string, or a DecryptItem: a dict with ``ciphertext``,
        ``context``, ``holder``, ``unit``; any other key raises
        InvalidInput before anything is sent). One result per item, in
        order. Each lease is returned unreleased, as decrypt's is;
        ``unit`` labels the items that name none."""
        _hold(hold)
        if not items:
            raise InvalidInput("shredd: an empty batch")
        op = "POST /v1/decrypt"
        wire = []
        for i, it in enumerate(items):
            if isinstance(it, str):
                wire.append(_decrypt_wire(it, None, None, unit))
            else:
                d = _check_item(it, i, op, t.DECRYPT_ITEM_KEYS, ("ciphertext",))
                wire.append(_decrypt_wire(d["ciphertext"], d.get("context"), d.get("holder"), d.get("unit", unit)))

        def one(i: int, res: Dict[str, Any], rid: str) -> t.DecryptResult:
            if "error" in res:
                return t.DecryptResult(error=error_from_item(res["error"], "%s item %d" % (op, i), rid))
            return t.DecryptResult(value=t.Decrypted.from_json(res))
        return self._batched("/v1/decrypt", wire, op, one, lambda e: t.DecryptResult(error=e))

    def encrypt_raw(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
                    subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                    leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
                    holder: Optional[str] = None, independent: bool = False,
                    independent_of: Optional[Sequence[str]] = None, unit: Optional[str] = None) -> t.RawEncrypted:
        """encrypt_raw seals a large plaintext through POST /v1/encrypt/raw
        (bytes on the wire, no base64; up to 64 MiB) and returns the binary
        envelope. Subject ids travel in request headers: one with CR, LF or
        NUL, or with leading or trailing blanks, needs encrypt. The other
        keywords are encrypt's."""
        body = _bytes("plaintext", plaintext)
        h: List[Tuple[str, str]] = [("Shredd-Kind", _str("kind", kind))]
        h += [("Shredd-Subject", s) for s in _subjects(subject, subjects)]
        h += [("Shredd-Parent", _check_id("parent", p)) for p in _strs("parents", parents)]
        h += [("Shredd-Lease", _check_id("lease", x)) for x in _strs("leases", leases)]
        h += [("Shredd-Independent-Of", _check_id("lease", x)) for x in _strs("independent_of", independent_of)]
        if _bool("independent", independent):
            h.append(("Shredd-Independent", "true"))
        if unit is not None:
            h.append(("Shredd-Unit", _unit(unit)))
        if context is not None and len(context):
            h.append(("Shredd-Context", t.b64(_bytes("context", context))))
        if holder:
            h.append(("Shredd-Holder", _str("holder", holder)))
        r = self._c.request("POST", "/v1/encrypt/raw", body=body, content_type=_OCTETS, headers=h)
        inherited = [x.strip() for x in r.header("Shredd-Inherited").split(",") if x.strip()]
        return t.RawEncrypted(envelope=r.body, artifact=r.header("Shredd-Artifact"),
                              lineage_size=int(r.header("Shredd-Lineage-Size") or 0), inherited=inherited)

    def decrypt_raw(self, envelope: _BytesLike, *, context: Optional[_BytesLike] = None,
                    holder: Optional[str] = None, hold: bool = True, unit: Optional[str] = None) -> t.RawDecrypted:
        """decrypt_raw opens a binary envelope through POST /v1/decrypt/raw;
        its lease (``lease_id``) is returned unreleased, as decrypt's is."""
        _hold(hold)
        body = _bytes("envelope", envelope)
        h: List[Tuple[str, str]] = []
        if context is not None and len(context):
            h.append(("Shredd-Context", t.b64(_bytes("context", context))))
        if holder:
            h.append(("Shredd-Holder", _str("holder", holder)))
        if unit is not None:
            h.append(("Shredd-Unit", _unit(unit)))
        r = self._c.request("POST", "/v1/decrypt/raw", body=body, content_type=_OCTETS, headers=h)
        return t.RawDecrypted(plaintext=r.body, artifact=r.header("Shredd-Artifact"), kind=r.header("Shredd-Kind"),
                              lease_id=r.header("Shredd-Lease"),
                              lease_expires=t.parse_time(r.header("Shredd-Lease-Expires")))


def _hold(hold: Any) -> None:
    if hold is not True:
        raise InvalidInput("shredd: decrypts no longer release their leases (hold=False): release them with "
                           "leases.release once the plaintext is dropped, or use leases.open or a unit")


def _check_sizes(plaintext: Any, context: Any, where: str) -> None:
    try:
        _seal.check_sizes(plaintext, context)
    except (TypeError, ValueError) as e:
        raise InvalidInput("%s%s" % (e, where)) from None


def _note(e: BaseException, note: str) -> None:
    # PEP 678 notes (Python 3.11+) show under the traceback; earlier
    # Pythons keep the text on the exception only.
    add = getattr(e, "add_note", None)
    if add is not None:
        add(note)
    else:
        e.__dict__.setdefault("__notes__", []).append(note)


class Leases(_Part):
    """Leases: every decrypt issues one; a forget waits for the leases
    issued before its barrier, so release them as soon as the plaintext
    is dropped. Releasing says "I dropped the plaintext", not "forget that
    I read it": the read stays attributable to the writes of its token
    until the lease's expiry."""

    def release(self, lease: Union[str, t.Lease]) -> t.Lease:
        """release ends a lease early (idempotent: releasing again changes
        nothing) and returns it with ``released_at``."""
        lid = lease.id if isinstance(lease, t.Lease) else lease
        return t.Lease.from_json(self._call("POST", "/v1/leases/%s/release" % _check_id("lease", lid),
                                            idempotent=True).json())

    def _release_after(self, lease: Union[str, t.Lease], failed: Optional[BaseException]) -> None:
        # The block's own exception wins: a failed release is added to it
        # as a note (the lease then ends at its TTL), never raised instead.
        if failed is None:
            self.release(lease)
            return
        try:
            self.release(lease)
        except Error as e:
            lid = lease.id if isinstance(lease, t.Lease) else lease
            _note(failed, "shredd: lease %s was not released (it ends at its TTL): %s" % (lid, e))

    @contextmanager
    def open(self, ciphertext: str, *, context: Optional[_BytesLike] = None,
             holder: Optional[str] = None) -> Iterator[t.Decrypted]:
        """open decrypts, holding the lease, and releases it when the block
        ends, also on an exception:

            with c.leases.open(ct, holder="summarizer-1") as d:
                summary = summarize(d.plaintext)

        When the block raises and the release fails too, the block's
        exception is raised, with the release's failure as a note."""
        d = self._c.sealing.decrypt(ciphertext, context=context, holder=holder)
        try:
            yield d
        except BaseException as e:
            self._release_after(d.lease, e)
            raise
        self._release_after(d.lease, None)

    @contextmanager
    def held(self, lease: Union[str, t.Lease]) -> Iterator[Union[str, t.Lease]]:
        """held releases a lease the caller already has when the block
        ends (a lease of decrypt, decrypt_raw or decrypt_batch); as open,
        it never masks the block's exception."""
        if not isinstance(lease, t.Lease):
            _check_id("lease", lease)
        try:
            yield lease
        except BaseException as e:
            self._release_after(lease, e)
            raise
        self._release_after(lease, None)


def _merge(unit: Sequence[str], own: Optional[Sequence[str]]) -> List[str]:
    out = list(unit)
    for x in _strs("leases", own):
        if x not in out:
            out.append(x)
    return out


class Unit:
    """Unit is a unit of work: the reads (decrypts) of one task and the
    writes it makes from them (a summarizer's pass, an agent's step),
    made with ``Client.unit``::

        with c.unit() as u:
            rows = [u.decrypt(ct).plaintext for ct in cts]
            u.encrypt("summary", summarize(rows), subject="bob@example.com")
        # the unit's leases are released here

    Every call through the unit carries its random label (``id``, sent as
    ``unit``); each decrypt records its lease (``leases``); each write
    (encrypt, derive, seal, their batches and raw route, register) names
    every lease recorded so far, merged with the caller's own ``leases``,
    so that the write has the lineage of what the unit read and shredd
    never sees an undeclared derivation. The label also keeps the unit's
    writes from answering for the reads of the token's other units.

    The block's end (or ``close``) releases the unit's leases: the
    plaintexts are dropped, and a forget no longer waits for them; the
    reads stay in the lineage of what the unit wrote. When the block
    raises, its exception is the one raised, with any failed release as a
    note (that lease then ends at its expiry); otherwise the first failed
    release is raised, after every lease was tried. A closed unit refuses
    further calls (InvalidInput). Safe to share between threads; a write
    names the leases of the decrypts that returned before it. A write names
    at most 256 leases (the server's limit): a unit is one task's reads."""

    def __init__(self, client: "Client", unit_id: Optional[str] = None) -> None:
        self._c = client
        self.id = _unit(unit_id) if unit_id is not None else secrets.token_hex(8)
        self._lock = threading.Lock()
        self._leases: List[str] = []
        self._closed = False

    @property
    def leases(self) -> List[str]:
        """leases are the ids of the leases the unit's decrypts took, in
        the order they were recorded."""
        with self._lock:
            return list(self._leases)

    def _begin(self) -> List[str]:
        with self._lock:
            if self._closed:
                raise InvalidInput("shredd: unit %s is closed" % self.id)
            return list(self._leases)

    def _record(self, *ids: str) -> None:
        with self._lock:
            for i in ids:
                if i and i not in self._leases:
                    self._leases.append(i)

    def _label(self, unit: Optional[Any]) -> str:
        if unit is not None and unit != self.id:
            raise InvalidInput("shredd: the request names unit %r, not the unit's own %r" % (unit, self.id))
        return self.id

    def decrypt(self, ciphertext: str, *, context: Optional[_BytesLike] = None,
                holder: Optional[str] = None) -> t.Decrypted:
        """decrypt is Sealing.decrypt as a read of the unit: its lease is
        recorded."""
        self._begin()
        d = self._c.sealing.decrypt(ciphertext, context=context, holder=holder, unit=self.id)
        self._record(d.lease.id)
        return d

    def decrypt_batch(self, items: Sequence[Union[str, t.DecryptItem]]) -> List[t.DecryptResult]:
        """decrypt_batch is Sealing.decrypt_batch as reads of the unit: the
        lease of every item that opened is recorded."""
        self._begin()
        for it in items:
            if isinstance(it, Mapping):
                self._label(it.get("unit"))
        out = self._c.sealing.decrypt_batch(items, unit=self.id)
        self._record(*[r.value.lease.id for r in out if r.value is not None])
        return out

    def decrypt_raw(self, envelope: _BytesLike, *, context: Optional[_BytesLike] = None,
                    holder: Optional[str] = None) -> t.RawDecrypted:
        """decrypt_raw is Sealing.decrypt_raw as a read of the unit."""
        self._begin()
        d = self._c.sealing.decrypt_raw(envelope, context=context, holder=holder, unit=self.id)
        self._record(d.lease_id)
        return d

    def encrypt(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
                subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
                holder: Optional[str] = None, independent: bool = False,
                independent_of: Optional[Sequence[str]] = None) -> t.Encrypted:
        """encrypt is Sealing.encrypt as a write of the unit: it names the
        unit's leases."""
        ls = _merge(self._begin(), leases)
        return self._c.sealing.encrypt(kind, plaintext, subject=subject, subjects=subjects, parents=parents,
                                       leases=ls, context=context, holder=holder, independent=independent,
                                       independent_of=independent_of, unit=self.id)

    def derive(self, kind: str, plaintext: _BytesLike, parents: Sequence[str], *,
               context: Optional[_BytesLike] = None, holder: Optional[str] = None,
               leases: Optional[Sequence[str]] = None, independent: bool = False,
               independent_of: Optional[Sequence[str]] = None) -> t.Encrypted:
        """derive is Sealing.derive as a write of the unit."""
        ls = _merge(self._begin(), leases)
        return self._c.sealing.derive(kind, plaintext, parents, context=context, holder=holder, leases=ls,
                                      independent=independent, independent_of=independent_of, unit=self.id)

    def _items(self, items: Sequence[t.EncryptItem], op: str) -> List[t.EncryptItem]:
        unit = self._begin()
        out: List[t.EncryptItem] = []
        for i, it in enumerate(items):
            _check_item(it, i, op, t.ENCRYPT_ITEM_KEYS, ("kind", "plaintext"))
            self._label(it.get("unit"))
            d = cast(t.EncryptItem, dict(it))
            d["leases"] = _merge(unit, it.get("leases"))
            d["unit"] = self.id
            out.append(d)
        return out

    def encrypt_batch(self, items: Sequence[t.EncryptItem]) -> List[t.EncryptResult]:
        """encrypt_batch is Sealing.encrypt_batch as writes of the unit:
        each item names the unit's leases."""
        return self._c.sealing.encrypt_batch(self._items(items, "POST /v1/encrypt"))

    def encrypt_raw(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
                    subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                    leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
                    holder: Optional[str] = None, independent: bool = False,
                    independent_of: Optional[Sequence[str]] = None) -> t.RawEncrypted:
        """encrypt_raw is Sealing.encrypt_raw as a write of the unit."""
        ls = _merge(self._begin(), leases)
        return self._c.sealing.encrypt_raw(kind, plaintext, subject=subject, subjects=subjects, parents=parents,
                                           leases=ls, context=context, holder=holder, independent=independent,
                                           independent_of=independent_of, unit=self.id)

    def seal(self, kind: str, plaintext: _BytesLike, *, subject: Optional[str] = None,
             subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
             leases: Optional[Sequence[str]] = None, context: Optional[_BytesLike] = None,
             holder: Optional[str] = None, independent: bool = False,
             independent_of: Optional[Sequence[str]] = None) -> t.Sealed:
        """seal is Sealing.seal as a write of the unit."""
        ls = _merge(self._begin(), leases)
        return self._c.sealing.seal(kind, plaintext, subject=subject, subjects=subjects, parents=parents, leases=ls,
                                    context=context, holder=holder, independent=independent,
                                    independent_of=independent_of, unit=self.id)

    def seal_many(self, items: Sequence[t.EncryptItem]) -> List[t.SealResult]:
        """seal_many is Sealing.seal_many as writes of the unit."""
        return self._c.sealing.seal_many(self._items(items, "POST /v1/datakey"))

    def register(self, kind: str, holder: str, *, subject: Optional[str] = None,
                 subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                 leases: Optional[Sequence[str]] = None, independent: bool = False,
                 independent_of: Optional[Sequence[str]] = None) -> t.Artifact:
        """register is Artifacts.register as a write of the unit: the
        plaintext-held artifact names the unit's leases."""
        ls = _merge(self._begin(), leases)
        return self._c.artifacts.register(kind, holder, subject=subject, subjects=subjects, parents=parents,
                                          leases=ls, independent=independent, independent_of=independent_of,
                                          unit=self.id)

    def close(self) -> None:
        """close ends the unit and releases its leases (see the class);
        closing again does nothing."""
        self._close(None)

    def _close(self, failed: Optional[BaseException]) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            leases = list(self._leases)
        first: Optional[Error] = None
        for lid in leases:
            try:
                self._c.leases.release(lid)
            except Error as e:
                note = "shredd: lease %s of unit %s was not released (it ends at its expiry): %s" % (lid, self.id, e)
                if failed is not None:
                    _note(failed, note)
                elif first is None:
                    first = e
                else:
                    _note(first, note)
        if first is not None:
            raise first

    def __enter__(self) -> "Unit":
        return self

    def __exit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        self._close(exc)


_check_methods(Unit)


class Artifacts(_Part):
    """Artifacts: registering plaintext-held artifacts (an ANN vector, a
    cached prompt, which live outside shredd and which their holder must
    purge) and looking artifacts up."""

    def register(self, kind: str, holder: str, *, subject: Optional[str] = None,
                 subjects: Optional[Sequence[str]] = None, parents: Optional[Sequence[str]] = None,
                 leases: Optional[Sequence[str]] = None, independent: bool = False,
                 independent_of: Optional[Sequence[str]] = None, unit: Optional[str] = None) -> t.Artifact:
        """register records a plaintext-held artifact of holder; raises
        Shredded when its lineage holds a forgotten subject. A
        registration is a write: ``leases``, ``independent``,
        ``independent_of`` and ``unit`` are encrypt's (Sealing), and so is
        UndeclaredDerivation."""
        if not holder:
            raise InvalidInput("shredd: a plaintext-held artifact needs its holder")
        w = _source_wire(kind, subject, subjects, parents, leases, holder, independent, independent_of, unit)
        return t.Artifact.from_json(self._call("POST", "/v1/artifacts", w).json())

    def get(self, artifact: str) -> t.Artifact:
        """get returns a registered artifact; NotFound when unknown."""
        return t.Artifact.from_json(self._call("GET", "/v1/artifacts/" + _check_id("artifact", artifact),
                                               idempotent=True).json())


class Forgets(_Part):
    """Forgets: erasure requests, their dry run, status, verification,
    signed attestation and regulator export."""

    def forget(self, subject: str) -> t.Forget:
        """forget commits the forget of a subject (every later encrypt,
        decrypt or registration touching it raises Shredded) and returns
        the pending-erasure token. Idempotent: forgetting the same subject
        again returns the same forget, so the call is retried; only the
        answer of the call that created it holds ``commitment_salt``."""
        return t.Forget.from_json(self._call("POST", "/v1/forget", {"subject": _str("subject", subject)},
                                             idempotent=True).json())

    def preview(self, subject: str) -> t.Preview:
        """preview is the dry run of forget: what it would make unreadable,
        collateral included. It changes nothing."""
        return t.Preview.from_json(self._call("POST", "/v1/forget", {"subject": _str("subject", subject), "dry_run": True},
                                              idempotent=True).json())

    def reinstate(self, subject: str, reason: str = "") -> t.Reinstatement:
        """reinstate gives a forgotten subject a new key generation (an
        admin token): nothing else does, an encrypt of a forgotten subject
        stays Shredded. Its forget must be erased (NotErased before); a
        subject without a committed forget to follow (live, reinstated
        already, never seen) raises NotForgotten, so a call is never
        retried here and a repeated one starts no other generation. The
        old generation's data stays erased; ``reason`` is kept with the
        reinstatement and never logged (put no personal data in it)."""
        body: Dict[str, Any] = {"subject": _str("subject", subject)}
        if reason:
            body["reason"] = _str("reason", reason)
        return t.Reinstatement.from_json(self._call("POST", "/v1/subjects/reinstate", body).json())

    def get(self, forget: str) -> t.Forget:
        """get returns a forget, current."""
        return t.Forget.from_json(self._call("GET", "/v1/forgets/" + _check_id("forget", forget), idempotent=True).json())

    def page(self, state: Optional[str] = None, limit: Optional[int] = None,
             cursor: Optional[str] = None) -> t.ForgetPage:
        """page returns one page of forgets, newest first: in one state (or
        all), at most limit (1 to 1,000; default 1,000), after cursor (the
        ``next`` of the page before, with the same state and limit)."""
        q = {"state": state or None, "limit": limit, "cursor": cursor or None}
        return t.ForgetPage.from_json(self._call("GET", "/v1/forgets", idempotent=True, query=q).json())

    def list(self, state: Optional[str] = None) -> List[t.Forget]:
        """list returns the first page of forgets (in one state, or all),
        newest first, at most 1,000; iterate walks them all."""
        return self.page(state).forgets

    def iterate(self, state: Optional[str] = None, limit: int = 1000) -> Iterator[t.Forget]:
        """iterate yields every forget (in one state, or all), newest
        first, a page of limit at a time."""
        cursor: Optional[str] = None
        while True:
            p = self.page(state, limit, cursor)
            yield from p.forgets
            if not p.next:
                return
            cursor = p.next

    def verify(self, forget: str) -> t.Forget:
        """verify evaluates the forget's conditions now and returns it,
        ``erased`` once every condition holds."""
        return t.Forget.from_json(self._call("POST", "/v1/forgets/%s/verify" % _check_id("forget", forget),
                                             idempotent=True).json())

    def wait(self, forget: str, state: str = "erased", *, timeout: float = 60.0, interval: float = 0.25,
             verify: bool = True) -> t.Forget:
        """wait polls the forget (verifying it when ``verify``) until it
        reaches state, and returns it. After timeout seconds it raises
        WaitTimeout (a shredd.Error and a TimeoutError) naming the
        conditions still pending with the server's reasons: a lease that
        keeps the forget waiting is named there, with its holder."""
        if state not in t.STATES:
            raise InvalidInput("shredd: unknown state %r" % state)
        _check_id("forget", forget)
        deadline = time.monotonic() + timeout
        while True:
            f = self.verify(forget) if verify else self.get(forget)
            if f.state == state:
                return f
            if time.monotonic() >= deadline:
                pending = [c for c in f.conditions + f.verification if c.status != "ok"]
                said = "; ".join("%s (%s)" % (c.name, c.reason) if c.reason else c.name for c in pending)
                raise WaitTimeout("shredd: forget %s is %s after %gs, not %s; pending: %s"
                                  % (forget, f.state, timeout, state, said or "none"),
                                  forget=f, state=state, pending=pending)
            time.sleep(interval)

    def attestation(self, forget: str) -> bytes:
        """attestation returns the signed erasure attestation (a DSSE
        envelope) byte for byte, as logged; NotErased before erasure."""
        return self._call("GET", "/v1/forgets/%s/attestation" % _check_id("forget", forget), idempotent=True).body

    def export(self, forget: str, since: int = 0) -> bytes:
        """export returns the regulator export (a .tar.gz); since > 0 adds
        a consistency proof from that tree size."""
        q = {"since": since} if since else None
        return self._call("GET", "/v1/forgets/%s/export" % _check_id("forget", forget), idempotent=True, query=q).body


class Holders(_Part):
    """Holders: components or peers that keep plaintext-held artifacts,
    purge them on forget and sign acks. The holder kit (shredd.holder)
    drives these calls; see there."""

    def register(self, holder: str, public_key: bytes) -> Tuple[t.Holder, bool]:
        """register records a holder and its raw 32-byte Ed25519 public key
        (admin); returns it and whether it is new. The same key again is
        fine; another key raises Conflict."""
        r = self._call("POST", "/v1/holders", {"holder": _str("holder", holder),
                                               "public_key": t.b64(_bytes("public_key", public_key))},
                       idempotent=True)
        return t.Holder.from_json(r.json()), r.status == 201

    def page(self, limit: Optional[int] = None, cursor: Optional[str] = None) -> t.HolderPage:
        """page returns one page of the registered holders, by id, each
        with its pending purge work, last ack and latest inventory: at most
        limit (1 to 1,000; default 1,000), after cursor (the ``next`` of
        the page before). A holder-bound token sees its own holder only."""
        q = {"limit": limit, "cursor": cursor or None}
        return t.HolderPage.from_json(self._call("GET", "/v1/holders", idempotent=True, query=q).json())

    def list(self) -> List[t.HolderStatus]:
        """list returns the first page of holders (at most 1,000), by id;
        iterate walks them all."""
        return self.page().holders

    def iterate(self, limit: int = 1000) -> Iterator[t.HolderStatus]:
        """iterate yields every registered holder, by id, a page of limit
        at a time."""
        cursor: Optional[str] = None
        while True:
            p = self.page(limit, cursor)
            yield from p.holders
            if not p.next:
                return
            cursor = p.next

    def purges(self, holder: str) -> List[t.PurgeWork]:
        """purges returns the holder's purge work: per open forget, its
        artifacts still to purge and acknowledge."""
        r = self._call("GET", "/v1/holders/%s/purges" % _path(holder), idempotent=True)
        return [t.PurgeWork(forget=p["forget"], artifacts=list(p["artifacts"])) for p in r.json()["purges"]]

    def ack(self, forget: str, holder: str, artifacts: Sequence[str], signature: bytes) -> t.AckResult:
        """ack sends a signed purge ack (the signature over
        shredd.verify.ack_message). The same ack again is a no-op, so the
        call is retried (Ed25519 signatures are deterministic); another ack
        naming an artifact an earlier ack closed raises Conflict."""
        r = self._call("POST", "/v1/forgets/%s/acks" % _check_id("forget", forget),
                       {"holder": _str("holder", holder), "artifacts": _strs("artifacts", artifacts),
                        "signature": t.b64(_bytes("signature", signature))},
                       idempotent=True)
        d = r.json()
        return t.AckResult(closed=list(d["closed"]), missing=list(d["missing"]))

    def declare_probes(self, holder: str, compact_interval: Union[str, float, "datetime.timedelta"]) -> str:
        """declare_probes records that the holder answers probes through
        its retrieval path (``PUT /v1/holders/{id}/probe``), with its
        compaction interval: how long its index and caches may still return
        a deleted row (a Go duration such as ``"10m"``, seconds, or a
        timedelta; 1 s to 30 days). Returns the interval as shredd spells
        it (``"10m0s"``). Declaring again replaces the interval."""
        r = self._call("PUT", "/v1/holders/%s/probe" % _path(holder), {"compact_interval": _duration(compact_interval)},
                       idempotent=True)
        ci: str = r.json()["compact_interval"]
        return ci

    def withdraw_probes(self, holder: str) -> None:
        """withdraw_probes withdraws the declaration (``DELETE
        /v1/holders/{id}/probe``): the holder's later acks close its
        artifacts alone again, and attestations say so
        (``ack_only_holders``)."""
        self._call("DELETE", "/v1/holders/%s/probe" % _path(holder), idempotent=True)

    def probes(self, holder: str) -> List[t.ProbeWork]:
        """probes returns the probes the holder must answer now (``GET
        /v1/holders/{id}/probes``)."""
        r = self._call("GET", "/v1/holders/%s/probes" % _path(holder), idempotent=True)
        return [t.ProbeWork.from_json(p) for p in r.json()["probes"]]

    def answer_probe(self, holder: str, probe: str, found: Sequence[str], signature: bytes) -> t.ProbeResult:
        """answer_probe sends a holder's signed answer to a probe (``POST
        /v1/holders/{id}/probes/{probe}``): found is what its retrieval
        path returned of what was asked (``[]``: nothing), signature its
        Ed25519 signature over shredd.verify.probe_message. A bad signature
        raises InvalidSignature, a probe not open to the holder NotFound,
        one already answered Conflict (so the call is not retried)."""
        r = self._call("POST", "/v1/holders/%s/probes/%s" % (_path(holder), _check_id("probe", probe)),
                       {"found": _strs("found", found), "signature": t.b64(_bytes("signature", signature))})
        d = r.json()
        return t.ProbeResult(probe=d["probe"], clean=bool(d["clean"]))

    def inventory(self, holder: str, items: Iterable[Union[t.InventoryItem, Tuple[str, str]]]) -> t.InventoryReport:
        """inventory reports what the holder holds: (artifact id, kind)
        pairs. Anything shredd never registered for it, or acked as purged,
        blocks every open forget until a clean inventory."""
        arts = []
        for n, it in enumerate(items):
            if isinstance(it, t.InventoryItem):
                i, k = it.id, it.kind
            elif isinstance(it, tuple) and len(it) == 2:
                i, k = it
            else:
                raise InvalidInput("shredd: inventory item %d: an InventoryItem or an (id, kind) pair, not %s"
                                   % (n, type(it).__name__))
            arts.append({"id": _str("artifact", i), "kind": _str("kind", k)})
        d = self._call("POST", "/v1/holders/%s/inventory" % _path(holder), {"artifacts": arts}, idempotent=True).json()
        return t.InventoryReport(items=int(d["items"]), unknown_artifacts=list(d["unknown_artifacts"]),
                                 unknown_kinds=list(d["unknown_kinds"]), contradicted_acks=list(d["contradicted_acks"]))


class Log(_Part):
    """Log: the transparency log of lifecycle events (docs/transparency.md):
    signed checkpoints, inclusion and consistency proofs, tiles. Check
    what these return offline with shredd.verify."""

    def _text(self, path: str, query: Optional[Mapping[str, Any]] = None) -> bytes:
        return self._c.request("GET", path, idempotent=True, query=query).body

    def checkpoint(self) -> bytes:
        """checkpoint returns the current signed checkpoint (a C2SP signed
        note); keep one to ask later for consistency with it."""
        return self._text("/v1/log/checkpoint")

    def key(self) -> str:
        """key returns the log's signed-note verifier key: the one line of
        the key file the server sends, without its final LF (only that:
        any other byte stays, for open_checkpoint to refuse)."""
        k = self._text("/v1/log/key").decode("utf-8")
        return k[:-1] if k.endswith("\n") else k

    def proof(self, index: int, size: Optional[int] = None) -> bytes:
        """proof returns the c2sp.org/tlog-proof@v1 inclusion proof of entry
        index against the current tree (or the tree of size)."""
        return self._text("/v1/log/proof/%d" % _nonneg("index", index), {"size": size} if size else None)

    def consistency(self, old: int, new: Optional[int] = None) -> bytes:
        """consistency returns the proof (shredd/tlog-consistency@v1) that
        the tree of size new (default: current) extends the one of size old."""
        q: Dict[str, Any] = {"old": _nonneg("old", old)}
        if new:
            q["new"] = _nonneg("new", new)
        return self._text("/v1/log/consistency", q)

    def tile(self, path: str) -> bytes:
        """tile returns a tile in the C2SP tlog-tiles layout, by its path
        under /v1/log/ (``tile/0/000``, ``tile/entries/000.p/5``)."""
        if not path.startswith("tile/"):
            raise InvalidInput("shredd: tile paths start with tile/")
        return self._text("/v1/log/" + path)

    def entries(self, n: int = 0, width: Optional[int] = None) -> List[bytes]:
        """entries returns the entries of entry bundle n (each a signed
        event's DSSE envelope, as logged); width for a partial bundle."""
        path = "tile/entries/" + _tile_index(n) + (".p/%d" % width if width else "")
        b = self.tile(path)
        out, i = [], 0
        while i < len(b):
            ln = int.from_bytes(b[i:i + 2], "big")
            out.append(b[i + 2:i + 2 + ln])
            i += 2 + ln
        return out


def _nonneg(what: str, v: int) -> int:
    if not isinstance(v, int) or v < 0:
        raise InvalidInput("shredd: %s must be a non-negative integer" % what)
    return v


def _tile_index(n: int) -> str:
    # C2SP tlog-tiles: groups of three digits, all but the last prefixed "x".
    groups: List[str] = []
    while True:
        groups.insert(0, "%03d" % (n % 1000))
        n //= 1000
        if n == 0:
            break
    return "/".join(["x" + g for g in groups[:-1]] + [groups[-1]])


class Client:
    """Client calls one shredd server. Safe for concurrent use from
    several threads (each call opens its own connection).

    :param base_url: ``http(s)://host[:port][/prefix]``
    :param token: the bearer token (``shredd token create``); None sends none
    :param timeout: seconds for one attempt of a call (connect and read)
    :param retries: extra attempts of idempotent calls after a transport
        failure or a 429/502/503/504 (never of encrypt, decrypt, register, epoch)
    :param cafile: PEM file of the CA of an https server's certificate
    :param ssl_context: an ssl.SSLContext instead of cafile (client certs ...)
    """

    def __init__(self, base_url: str = DEFAULT_URL, token: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = 0.2, cafile: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, user_agent: str = "",
                 max_response: int = DEFAULT_MAX_RESPONSE) -> None:
        self.transport = Transport(base_url, token, timeout=timeout, retries=retries, backoff=backoff, cafile=cafile,
                                   ssl_context=ssl_context, user_agent=user_agent, max_response=max_response)
        self.kinds = Kinds(self)
        self.sealing = Sealing(self)
        self.leases = Leases(self)
        self.artifacts = Artifacts(self)
        self.forgets = Forgets(self)
        self.holders = Holders(self)
        self.log = Log(self)

    @classmethod
    def from_data_dir(cls, base_url: str, data_dir: str, **kw: Any) -> "Client":
        """from_data_dir returns a client with the admin token of a data
        directory (``<data-dir>/admin.token``)."""
        import os
        with open(os.path.join(data_dir, "admin.token"), encoding="ascii") as f:
            return cls(base_url, f.read().strip(), **kw)

    def request(self, method: str, path: str, *, body: Optional[bytes] = None, content_type: str = "",
                headers: Optional[Headers] = None, query: Optional[Mapping[str, Any]] = None,
                idempotent: bool = False, timeout: Optional[float] = None) -> Response:
        """request is the low-level call the parts use: one request to path
        (under the base URL), its 2xx answer or the APIError of its
        problem. For routes this client does not wrap yet."""
        return self.transport.request(method, path, body=body, content_type=content_type, headers=headers,
                                      query=query, idempotent=idempotent, timeout=timeout)

    def health(self) -> t.Health:
        """health is GET /healthz (no token): the root store answers."""
        d = self.transport.request("GET", "/healthz", idempotent=True, auth=False).json()
        return t.Health(status=d["status"], root_store=d["root_store"], root_version=int(d["root_version"]))

    def live(self) -> bool:
        """live is GET /livez (no token): True when the process serves."""
        return bool(self.transport.request("GET", "/livez", idempotent=True, auth=False).json()["status"] == "ok")

    def ready(self) -> t.Ready:
        """ready is GET /readyz (no token); Unavailable (not_ready) when the
        database does not accept a write or the root store does not answer."""
        d = self.transport.request("GET", "/readyz", idempotent=True, auth=False).json()
        return t.Ready(status=d["status"], database=d["database"], root_store=d["root_store"],
                       root_version=int(d["root_version"]))

    def openapi(self) -> Dict[str, Any]:
        """openapi returns the server's OpenAPI 3.1 document (no token)."""
        doc: Dict[str, Any] = self.transport.request("GET", "/v1/openapi.json", idempotent=True, auth=False).json()
        return doc

    def unit(self, unit_id: Optional[str] = None) -> Unit:
        """unit starts a unit of work (see Unit) with a fresh random label
        (16 hex digits), or ``unit_id`` (1 to 64 of A-Za-z0-9._:-)::

            with c.unit() as u:
                d = u.decrypt(ct)
                u.encrypt("summary", summarize(d.plaintext), subject="bob@example.com")
        """
        return Unit(self, unit_id)

    def epoch(self) -> t.Epoch:
        """epoch runs a root epoch now (admin): re-keys pending buckets,
        rotates the root, destroys the older root versions; the forgets it
        completes become shredded. Not retried."""
        return t.Epoch.from_json(self.transport.request("POST", "/v1/epoch").json())


_check_methods(Client)
