"""The asyncio face of the shredd client: :class:`AsyncClient` has the
parts and methods of :class:`shredd.Client`, each a coroutine, with the
same arguments, answers and exceptions.

    import shredd
    c = shredd.AsyncClient("http://127.0.0.1:7750", token)
    rec = await c.sealing.encrypt("episodic", b"Alice prefers green tea.", subject="alice@example.com")
    async with c.leases.open(rec.ciphertext) as d:
        ...

Standard library only: each call runs the synchronous client's call in a
worker thread (``asyncio.to_thread``), so the event loop never blocks on
the network, and the rules of the synchronous client hold unchanged
(timeouts, retries of idempotent calls only, item checks before anything
is sent, leases held by decrypt until released, units of work whose
writes name their reads: ``async with c.unit() as u``). Cancelling a call stops
the wait, not the request: a cancelled encrypt may still take effect, as
one lost in transit may.
"""

from __future__ import annotations

import asyncio
import functools
from contextlib import asynccontextmanager
import ssl
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, List, Optional, TypeVar, Union, cast

from . import types as t
from ._http import DEFAULT_MAX_RESPONSE, DEFAULT_RETRIES, DEFAULT_TIMEOUT, DEFAULT_URL
from .client import Artifacts, Client, Forgets, Holders, Kinds, Leases, Log, Sealing, Unit, _BytesLike

if TYPE_CHECKING:  # pragma: no cover - typing only (ParamSpec is Python 3.10+)
    from typing import Concatenate, ParamSpec
    _P = ParamSpec("_P")

__all__ = ["AsyncClient", "AsyncKinds", "AsyncSealing", "AsyncLeases", "AsyncUnit", "AsyncArtifacts", "AsyncForgets",
           "AsyncHolders", "AsyncLog"]

_S = TypeVar("_S")
_R = TypeVar("_R")


def _aio(f: "Callable[Concatenate[_S, _P], _R]") -> "Callable[Concatenate[Any, _P], Awaitable[_R]]":
    """_aio makes a coroutine method of the synchronous method f: it runs
    f on the part's synchronous twin in a worker thread."""

    g: Callable[..., Any] = f

    @functools.wraps(f)
    async def call(self: Any, /, *args: Any, **kw: Any) -> Any:
        return await asyncio.to_thread(g, self._sync, *args, **kw)
    return cast("Callable[Concatenate[Any, _P], Awaitable[_R]]", call)


class AsyncKinds:
    """AsyncKinds is :class:`shredd.Kinds`, awaitable."""

    def __init__(self, sync: Kinds) -> None:
        self._sync = sync

    list = _aio(Kinds.list)
    put = _aio(Kinds.put)
    ensure = _aio(Kinds.ensure)


class AsyncSealing:
    """AsyncSealing is :class:`shredd.Sealing`, awaitable."""

    def __init__(self, sync: Sealing) -> None:
        self._sync = sync

    encrypt = _aio(Sealing.encrypt)
    derive = _aio(Sealing.derive)
    decrypt = _aio(Sealing.decrypt)
    encrypt_batch = _aio(Sealing.encrypt_batch)
    decrypt_batch = _aio(Sealing.decrypt_batch)
    seal = _aio(Sealing.seal)
    seal_many = _aio(Sealing.seal_many)
    encrypt_raw = _aio(Sealing.encrypt_raw)
    decrypt_raw = _aio(Sealing.decrypt_raw)


class AsyncLeases:
    """AsyncLeases is :class:`shredd.Leases`, awaitable; ``open`` and
    ``held`` are async context managers."""

    def __init__(self, sync: Leases) -> None:
        self._sync = sync

    release = _aio(Leases.release)

    @asynccontextmanager
    async def open(self, ciphertext: str, *, context: Optional[_BytesLike] = None,
                   holder: Optional[str] = None) -> AsyncIterator[t.Decrypted]:
        """open decrypts, holding the lease, and releases it when the block
        ends, also on an exception (which a failed release never masks):

            async with c.leases.open(ct, holder="summarizer-1") as d:
                summary = await summarize(d.plaintext)
        """
        d = await asyncio.to_thread(self._sync._c.sealing.decrypt, ciphertext, context=context, holder=holder)
        try:
            yield d
        except BaseException as e:
            await asyncio.to_thread(self._sync._release_after, d.lease, e)
            raise
        await asyncio.to_thread(self._sync._release_after, d.lease, None)

    @asynccontextmanager
    async def held(self, lease: Union[str, t.Lease]) -> AsyncIterator[Union[str, t.Lease]]:
        """held releases a lease the caller already has when the block ends."""
        try:
            yield lease
        except BaseException as e:
            await asyncio.to_thread(self._sync._release_after, lease, e)
            raise
        await asyncio.to_thread(self._sync._release_after, lease, None)


class AsyncUnit:
    """AsyncUnit is :class:`shredd.Unit`, awaitable, and an async context
    manager that releases the unit's leases when the block ends::

        async with c.unit() as u:
            d = await u.decrypt(ct)
            await u.encrypt("summary", summarize(d.plaintext), subject="bob@example.com")
    """

    def __init__(self, sync: Unit) -> None:
        self._sync = sync

    @property
    def id(self) -> str:
        """id is the unit's label, sent as ``unit`` on each of its calls."""
        return self._sync.id

    @property
    def leases(self) -> List[str]:
        """leases are the ids of the leases the unit's decrypts took."""
        return self._sync.leases

    decrypt = _aio(Unit.decrypt)
    decrypt_batch = _aio(Unit.decrypt_batch)
    decrypt_raw = _aio(Unit.decrypt_raw)
    encrypt = _aio(Unit.encrypt)
    derive = _aio(Unit.derive)
    encrypt_batch = _aio(Unit.encrypt_batch)
    encrypt_raw = _aio(Unit.encrypt_raw)
    seal = _aio(Unit.seal)
    seal_many = _aio(Unit.seal_many)
    register = _aio(Unit.register)
    close = _aio(Unit.close)

    async def __aenter__(self) -> "AsyncUnit":
        return self

    async def __aexit__(self, typ: Any, exc: Optional[BaseException], tb: Any) -> None:
        await asyncio.to_thread(self._sync._close, exc)


class AsyncArtifacts:
    """AsyncArtifacts is :class:`shredd.Artifacts`, awaitable."""

    def __init__(self, sync: Artifacts) -> None:
        self._sync = sync

    register = _aio(Artifacts.register)
    get = _aio(Artifacts.get)


class AsyncForgets:
    """AsyncForgets is :class:`shredd.Forgets`, awaitable; ``iterate`` is
    an async iterator and ``wait`` sleeps with asyncio between polls."""

    def __init__(self, sync: Forgets) -> None:
        self._sync = sync

    forget = _aio(Forgets.forget)
    preview = _aio(Forgets.preview)
    reinstate = _aio(Forgets.reinstate)
    get = _aio(Forgets.get)
    page = _aio(Forgets.page)
    list = _aio(Forgets.list)
    verify = _aio(Forgets.verify)
    attestation = _aio(Forgets.attestation)
    export = _aio(Forgets.export)
    # wait polls in a worker thread too: it holds no lock, and its sleeps
    # are short (interval).
    wait = _aio(Forgets.wait)

    async def iterate(self, state: Optional[str] = None, limit: int = 1000) -> AsyncIterator[t.Forget]:
        """iterate yields every forget (in one state, or all), newest
        first, a page of limit at a time."""
        cursor: Optional[str] = None
        while True:
            p = await asyncio.to_thread(self._sync.page, state, limit, cursor)
            for f in p.forgets:
                yield f
            if not p.next:
                return
            cursor = p.next


class AsyncHolders:
    """AsyncHolders is :class:`shredd.Holders`, awaitable."""

    def __init__(self, sync: Holders) -> None:
        self._sync = sync

    register = _aio(Holders.register)
    page = _aio(Holders.page)
    list = _aio(Holders.list)
    purges = _aio(Holders.purges)
    ack = _aio(Holders.ack)
    inventory = _aio(Holders.inventory)
    declare_probes = _aio(Holders.declare_probes)
    withdraw_probes = _aio(Holders.withdraw_probes)
    probes = _aio(Holders.probes)
    answer_probe = _aio(Holders.answer_probe)

    async def iterate(self, limit: int = 1000) -> AsyncIterator[t.HolderStatus]:
        """iterate yields every registered holder, by id."""
        cursor: Optional[str] = None
        while True:
            p = await asyncio.to_thread(self._sync.page, limit, cursor)
            for h in p.holders:
                yield h
            if not p.next:
                return
            cursor = p.next


class AsyncLog:
    """AsyncLog is :class:`shredd.Log`, awaitable."""

    def __init__(self, sync: Log) -> None:
        self._sync = sync

    checkpoint = _aio(Log.checkpoint)
    key = _aio(Log.key)
    proof = _aio(Log.proof)
    consistency = _aio(Log.consistency)
    tile = _aio(Log.tile)
    entries = _aio(Log.entries)


class AsyncClient:
    """AsyncClient calls one shredd server from asyncio code. Its
    constructor takes the arguments of :class:`shredd.Client`; ``sync`` is
    the synchronous client it drives (for the holder kit, or code that
    runs in a thread of its own). Safe for concurrent use: each call opens
    its own connection in its own worker thread."""

    def __init__(self, base_url: str = DEFAULT_URL, token: Optional[str] = None, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = 0.2, cafile: Optional[str] = None,
                 ssl_context: Optional[ssl.SSLContext] = None, user_agent: str = "",
                 max_response: int = DEFAULT_MAX_RESPONSE, client: Optional[Client] = None) -> None:
        self.sync = client or Client(base_url, token, timeout=timeout, retries=retries, backoff=backoff,
                                     cafile=cafile, ssl_context=ssl_context, user_agent=user_agent,
                                     max_response=max_response)
        self._sync = self.sync
        self.kinds = AsyncKinds(self.sync.kinds)
        self.sealing = AsyncSealing(self.sync.sealing)
        self.leases = AsyncLeases(self.sync.leases)
        self.artifacts = AsyncArtifacts(self.sync.artifacts)
        self.forgets = AsyncForgets(self.sync.forgets)
        self.holders = AsyncHolders(self.sync.holders)
        self.log = AsyncLog(self.sync.log)

    @classmethod
    def of(cls, client: Client) -> "AsyncClient":
        """of returns the asyncio face of an existing client (they share
        its transport)."""
        return cls(client=client)

    @classmethod
    def from_data_dir(cls, base_url: str, data_dir: str, **kw: Any) -> "AsyncClient":
        """from_data_dir returns a client with the admin token of a data
        directory (``<data-dir>/admin.token``)."""
        return cls.of(Client.from_data_dir(base_url, data_dir, **kw))

    request = _aio(Client.request)
    health = _aio(Client.health)
    live = _aio(Client.live)
    ready = _aio(Client.ready)
    openapi = _aio(Client.openapi)
    epoch = _aio(Client.epoch)

    def unit(self, unit_id: Optional[str] = None) -> AsyncUnit:
        """unit starts a unit of work (:class:`shredd.Unit`), for ``async
        with``."""
        return AsyncUnit(self.sync.unit(unit_id))

