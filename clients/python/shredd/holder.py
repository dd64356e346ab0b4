"""The holder kit: what a component that keeps plaintext-held artifacts
(an embedding index, a prompt cache, a peer agent) needs to take part in
erasure (docs/api.md "Holders", docs/attestation.md §6).

    kit = HolderKit(client, "ann-index-1", HolderKit.generate_key())
    kit.register(admin_client)                     # once: the holder and its Ed25519 key
    art = client.artifacts.register("embedding", "ann-index-1", parents=[record_id])
    ...
    kit.purge(lambda work: index.delete(work.artifacts))   # on a schedule, or kit.run(...)

``purge`` fetches the holder's purge work, calls the holder's callback for
each open forget, and signs and sends the ack for the artifacts the
callback says it purged. An ack is a claim signed under the holder's key:
call it only once the plaintext is really gone.

A holder that answers probes (docs/attestation.md §6a) declares it once
(``kit.declare_probes("10m")``, its compaction interval) and runs
``probe_once(search)`` on a schedule (or passes ``probe`` to ``run``):
shredd asks, at times it chooses, whether the holder's retrieval path still
returns artifacts it acked; ``search(forget, artifacts, markers)`` runs the
application's own query path (its index, caches, replicas: not the
primary store alone) and returns what it still finds, and the kit signs
and sends that answer.

Signing needs the ``cryptography`` package (an optional extra:
``pip install './clients/python[holder]'``); the rest of the client does
not.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Sequence, Tuple, Union

from . import types as t
from .errors import APIError, Error, InvalidInput
from .verify import ack_message, probe_message

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["HolderKit", "PurgeOutcome", "ProbeOutcome", "ack_message", "probe_message"]

#: PurgeCallback purges the artifacts of one forget's purge work and
#: returns the ids it purged (None: all of them). Raising acks nothing.
PurgeCallback = Callable[[t.PurgeWork], Optional[Iterable[str]]]

#: ProbeFunc runs the holder application's own retrieval path for a
#: forget's artifact ids and markers and returns those it still returns
#: (``[]``: none). Raising answers nothing (the probe is asked again).
ProbeFunc = Callable[[str, List[str], List[str]], Iterable[str]]


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("shredd: the holder kit needs the 'cryptography' package "
                          "(pip install './clients/python[holder]', or apt-get install python3-cryptography)") from e
    return ed25519, serialization


@dataclass(frozen=True)
class PurgeOutcome:
    """PurgeOutcome is what purge did for one forget: the artifacts the
    callback purged, and the server's answer to the ack (None when it
    purged nothing, or ``error`` when the callback or the ack failed)."""
    forget: str
    purged: List[str]
    ack: Optional[t.AckResult] = None
    error: Optional[BaseException] = None


@dataclass(frozen=True)
class ProbeOutcome:
    """ProbeOutcome is what probe_once did for one probe: what the
    retrieval path found, and shredd's reading of the signed answer (None
    with ``error`` when the probe function or the answer failed)."""
    probe: str
    forget: str
    found: List[str]
    result: Optional[t.ProbeResult] = None
    error: Optional[BaseException] = None


class HolderKit:
    """HolderKit is one holder: its id, its Ed25519 private key and a
    client whose token may act as it (a token with the ``register`` scope,
    ideally bound to this holder: ``shredd token create --holder ID``)."""

    def __init__(self, client: "Client", holder: str, private_key: Any) -> None:
        ed25519, _ = _crypto()
        if isinstance(private_key, (bytes, bytearray)):
            private_key = ed25519.Ed25519PrivateKey.from_private_bytes(bytes(private_key))
        if not isinstance(private_key, ed25519.Ed25519PrivateKey):
            raise InvalidInput("shredd: the holder key is an Ed25519 private key (or its 32-byte seed)")
        self.client = client
        self.holder = holder
        self._key = private_key

    # --- keys -------------------------------------------------------------

    @staticmethod
    def generate_key() -> Any:
        """generate_key returns a new Ed25519 private key."""
        ed25519, _ = _crypto()
        return ed25519.Ed25519PrivateKey.generate()

    @staticmethod
    def load_key(path: str) -> Any:
        """load_key reads a PEM PKCS #8 Ed25519 private key."""
        ed25519, serialization = _crypto()
        with open(path, "rb") as f:
            k = serialization.load_pem_private_key(f.read(), password=None)
        if not isinstance(k, ed25519.Ed25519PrivateKey):
            raise TypeError("shredd: %s is not an Ed25519 private key" % path)
        return k

    def save_key(self, path: str) -> None:
        """save_key writes the private key as PEM PKCS #8, mode 0600,
        refusing to overwrite a file."""
        _, serialization = _crypto()
        pem = self._key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)

    @property
    def public_key(self) -> bytes:
        """public_key is the raw 32-byte Ed25519 public key, as registered."""
        _, serialization = _crypto()
        raw: bytes = self._key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return raw

    # --- calls ------------------------------------------------------------

    def register(self, admin: Optional["Client"] = None) -> Tuple[t.Holder, bool]:
        """register records the holder and its public key with shredd. It
        needs the admin scope: pass an admin client when this kit's own
        token is a holder token. Registering the same key again is fine."""
        return (admin or self.client).holders.register(self.holder, self.public_key)

    def register_artifact(self, kind: str, *, subject: Optional[str] = None, subjects: Optional[Sequence[str]] = None,
                          parents: Optional[Sequence[str]] = None, leases: Optional[Sequence[str]] = None) -> t.Artifact:
        """register_artifact records a plaintext-held artifact of this holder
        (register it before keeping the plaintext: Shredded means the
        lineage holds a forgotten subject, and the data must not be kept)."""
        return self.client.artifacts.register(kind, self.holder, subject=subject, subjects=subjects,
                                              parents=parents, leases=leases)

    def purges(self) -> List[t.PurgeWork]:
        """purges returns this holder's open purge work."""
        return self.client.holders.purges(self.holder)

    def sign_ack(self, forget: str, artifacts: Sequence[str]) -> bytes:
        """sign_ack returns the Ed25519 signature over ack_message."""
        sig: bytes = self._key.sign(ack_message(forget, self.holder, artifacts))
        return sig

    def ack(self, forget: str, artifacts: Sequence[str]) -> t.AckResult:
        """ack signs and sends the ack that this holder purged artifacts for
        forget."""
        if isinstance(artifacts, str):
            raise InvalidInput("shredd: artifacts is a list of artifact ids, not one string")
        ids = sorted(set(artifacts))
        return self.client.holders.ack(forget, self.holder, ids, self.sign_ack(forget, ids))

    def purge(self, callback: PurgeCallback) -> List[PurgeOutcome]:
        """purge runs one round: for each open forget of the holder's purge
        work, callback(work) purges the plaintext and returns the ids it
        purged (None: all of work.artifacts); purge then acks them. A
        callback that raises leaves its forget open (it is asked again next
        round) and is reported in the outcome; ids the callback returns
        that were not in the work are not acked."""
        out: List[PurgeOutcome] = []
        for work in self.purges():
            try:
                done = callback(work)
                ids = list(work.artifacts) if done is None else [a for a in done if a in set(work.artifacts)]
            except Exception as e:  # the holder's own failure: no ack
                out.append(PurgeOutcome(forget=work.forget, purged=[], error=e))
                continue
            if not ids:
                out.append(PurgeOutcome(forget=work.forget, purged=[]))
                continue
            try:
                out.append(PurgeOutcome(forget=work.forget, purged=ids, ack=self.ack(work.forget, ids)))
            except Error as e:
                out.append(PurgeOutcome(forget=work.forget, purged=ids, error=e))
        return out

    def declare_probes(self, compact_interval: Union[str, float, Any]) -> str:
        """declare_probes records that this holder answers probes, with its
        compaction interval (a Go duration such as ``"10m"``, seconds or a
        timedelta; 1 s to 30 days): how long after a delete its index and
        caches may still return the row. Returns shredd's spelling."""
        return self.client.holders.declare_probes(self.holder, compact_interval)

    def withdraw_probes(self) -> None:
        """withdraw_probes withdraws it: acks alone close again."""
        self.client.holders.withdraw_probes(self.holder)

    def probes(self) -> List[t.ProbeWork]:
        """probes returns the probes this holder must answer now."""
        return self.client.holders.probes(self.holder)

    def sign_probe(self, probe: t.ProbeWork, found: Sequence[str]) -> bytes:
        """sign_probe returns the Ed25519 signature over probe_message for
        this answer to probe."""
        sig: bytes = self._key.sign(probe_message(probe.probe, probe.forget, self.holder, probe.nonce, probe.artifacts,
                                                  probe.markers, found))
        return sig

    def answer_probe(self, probe: t.ProbeWork, found: Sequence[str]) -> t.ProbeResult:
        """answer_probe signs and sends the answer to probe: found is what
        the retrieval path returned of what was asked (``[]``: nothing)."""
        if isinstance(found, str):
            raise InvalidInput("shredd: found is a list of ids and markers, not one string")
        ids = list(found)
        return self.client.holders.answer_probe(self.holder, probe.probe, ids, self.sign_probe(probe, ids))

    def probe_once(self, probe: ProbeFunc) -> List[ProbeOutcome]:
        """probe_once fetches the open probes and answers each:
        probe(forget, artifacts, markers) runs the application's retrieval
        path and returns what it still finds; the kit signs and sends that
        (each id once). A probe function that raises, or returns an id or
        marker that was not asked, answers nothing for that probe (it is
        asked again after its deadline); the other probes go on."""
        out: List[ProbeOutcome] = []
        for w in self.probes():
            found: List[str] = []
            try:
                got = probe(w.forget, list(w.artifacts), list(w.markers))
                if isinstance(got, str):
                    raise InvalidInput("shredd: the probe function returns a list of ids and markers, not one string")
                for x in got or []:
                    if x not in found:
                        found.append(x)
                asked = set(w.artifacts) | set(w.markers)
                stray = [x for x in found if x not in asked]
                if stray:
                    raise InvalidInput("shredd: probe %s: the path returned %r, which was not asked: nothing answered"
                                       % (w.probe, stray[0]))
            except Exception as e:  # the holder's own failure: no answer
                out.append(ProbeOutcome(probe=w.probe, forget=w.forget, found=found, error=e))
                continue
            try:
                out.append(ProbeOutcome(probe=w.probe, forget=w.forget, found=found, result=self.answer_probe(w, found)))
            except Error as e:
                out.append(ProbeOutcome(probe=w.probe, forget=w.forget, found=found, error=e))
        return out

    def run(self, callback: PurgeCallback, stop: threading.Event, interval: float = 5.0,
            on_outcome: Optional[Callable[[PurgeOutcome], None]] = None, probe: Optional[ProbeFunc] = None,
            on_probe: Optional[Callable[[ProbeOutcome], None]] = None) -> None:
        """run calls purge (and, given probe, probe_once) every interval
        seconds until stop is set. A round that fails to reach shredd is
        tried again next interval."""
        while not stop.is_set():
            try:
                for o in self.purge(callback):
                    if on_outcome is not None:
                        on_outcome(o)
            except Error:
                pass
            if probe is not None:
                try:
                    for po in self.probe_once(probe):
                        if on_probe is not None:
                            on_probe(po)
                except Error:
                    pass
            stop.wait(interval)

    def report_inventory(self, items: Iterable[Union[t.InventoryItem, Tuple[str, str]]]) -> t.InventoryReport:
        """report_inventory tells shredd every artifact the holder holds,
        as (id, kind) pairs; the report says what shredd never registered
        (or saw acked as purged): such holdings block open forgets."""
        return self.client.holders.inventory(self.holder, items)
