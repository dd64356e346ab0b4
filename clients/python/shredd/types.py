"""Typed values of the shredd API (docs/api.md): one dataclass per answer.

Times are timezone-aware ``datetime`` objects in UTC; binary values
(plaintexts, contexts) are ``bytes``: the client does the API's base64."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Mapping, Optional, Sequence, TypedDict, Union

from .errors import Error

__all__ = [
    "Health", "Ready", "Kind", "Encrypted", "Lease", "Decrypted", "RawEncrypted", "RawDecrypted",
    "Artifact", "ArtifactRead", "Condition", "Forget", "ForgetPage", "PreviewArtifact", "PreviewCounts", "Preview", "Epoch",
    "Holder", "PurgeWork", "ProbeWork", "ProbeResult", "AckResult", "InventoryItem", "InventoryReport", "EncryptResult", "DecryptResult",
    "HolderStatus", "HolderPage", "InventoryStatus", "Sealed", "SealResult",
    "EncryptItem", "DecryptItem", "ENCRYPT_ITEM_KEYS", "DECRYPT_ITEM_KEYS",
    "STATES",
]

#: The states of a forget, in order; ``blocked`` and ``overdue`` are off the path.
STATES = ("requested", "committed", "shredded", "erased", "blocked", "overdue")


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """parse_time reads an RFC 3339 time as the server writes it (UTC,
    ``Z``, up to nanoseconds; Python keeps microseconds)."""
    if not s:
        return None
    t = s.replace("Z", "+00:00")
    # datetime takes at most 6 fractional digits.
    if "." in t:
        head, rest = t.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        t = head + "." + rest[:i][:6].ljust(6, "0") + rest[i:]
    d = datetime.fromisoformat(t)
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _t(s: Optional[str]) -> datetime:
    d = parse_time(s)
    return d if d is not None else datetime.fromtimestamp(0, timezone.utc)


def b64(b: bytes) -> str:
    """b64 encodes bytes as the API's standard padded base64."""
    return base64.b64encode(b).decode("ascii")


def unb64(s: str) -> bytes:
    """unb64 decodes the API's standard padded base64."""
    return base64.b64decode(s, validate=True)


class _EncryptItemRequired(TypedDict):
    kind: str
    plaintext: bytes


class EncryptItem(_EncryptItemRequired, total=False):
    """EncryptItem is one item of Sealing.encrypt_batch and seal_many: the
    keyword arguments of encrypt, ``kind`` and ``plaintext`` required.
    Any other key (``parent``, ``contxt``) raises InvalidInput before
    anything is sent: a misspelt lineage key must not seal an artifact
    without its parents."""
    subject: str
    subjects: Sequence[str]
    parents: Sequence[str]
    leases: Sequence[str]
    independent: bool
    independent_of: Sequence[str]
    unit: str
    context: Union[bytes, bytearray, memoryview]
    holder: str


class _DecryptItemRequired(TypedDict):
    ciphertext: str


class DecryptItem(_DecryptItemRequired, total=False):
    """DecryptItem is one item of Sealing.decrypt_batch given as a dict
    (a bare string is the ciphertext alone); other keys raise
    InvalidInput before anything is sent."""
    context: Union[bytes, bytearray, memoryview]
    holder: str
    unit: str


#: The keys an EncryptItem may hold.
ENCRYPT_ITEM_KEYS = frozenset(("kind", "plaintext", "subject", "subjects", "parents", "leases", "independent",
                               "independent_of", "unit", "context", "holder"))
#: The keys a DecryptItem may hold.
DECRYPT_ITEM_KEYS = frozenset(("ciphertext", "context", "holder", "unit"))


@dataclass(frozen=True)
class Health:
    """Health is the answer of GET /healthz."""
    status: str
    root_store: str
    root_version: int


@dataclass(frozen=True)
class Ready:
    """Ready is the answer of GET /readyz: the database accepts a write
    and the root store answers."""
    status: str
    database: str
    root_store: str
    root_version: int


@dataclass(frozen=True)
class Kind:
    """Kind is a registered artifact kind."""
    name: str
    description: str
    created_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Kind":
        return cls(name=d["name"], description=d.get("description", ""), created_at=_t(d.get("created_at")))


def _ids(v: Any) -> List[str]:
    return [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


@dataclass(frozen=True)
class Encrypted:
    """Encrypted is a sealed artifact: its id, its ``shredd:v1:`` text
    ciphertext and the number of subjects of its lineage. ``inherited``
    lists the reads (lease ids) the write neither named nor declared
    independent of, whose lineage it was given because its token's policy
    is ``inherit`` (empty otherwise)."""
    artifact: str
    ciphertext: str
    lineage_size: int
    inherited: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Encrypted":
        return cls(artifact=d["artifact"], ciphertext=d["ciphertext"], lineage_size=int(d["lineage_size"]),
                   inherited=_ids(d.get("inherited")))


@dataclass(frozen=True)
class Lease:
    """Lease records that the plaintext of an artifact was handed to a
    holder by a decrypt, until ``expires_at`` unless released. A forget
    waits for the leases issued before it and not released. The read
    stays attributable to its token, holder and ``unit`` until
    ``expires_at``, released or not: a write they make before then names
    it or declares itself independent of it."""
    id: str
    artifact: str
    holder: str
    issued_at: datetime
    expires_at: datetime
    released_at: Optional[datetime] = None
    unit: str = ""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Lease":
        return cls(id=d["id"], artifact=d["artifact"], holder=d.get("holder", ""), issued_at=_t(d.get("issued_at")),
                   expires_at=_t(d.get("expires_at")), released_at=parse_time(d.get("released_at")),
                   unit=d.get("unit", "") or "")


@dataclass(frozen=True)
class Decrypted:
    """Decrypted is an opened artifact: the plaintext, the artifact, its
    kind and the lease the decrypt issued."""
    plaintext: bytes = field(repr=False)
    artifact: str
    kind: str
    lease: Lease

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Decrypted":
        return cls(plaintext=unb64(d["plaintext"]), artifact=d["artifact"], kind=d["kind"],
                   lease=Lease.from_json(d["lease"]))


@dataclass(frozen=True)
class EncryptResult:
    """EncryptResult is one item of an encrypt batch: ``value`` when it
    succeeded, else ``error``: the APIError the same item answers alone,
    or, for the items of a batch over MAX_BATCH whose part of it failed
    as a whole (a TransportError: it may or may not have taken effect) or
    was not sent after such a failure, that part's exception. Every item
    that succeeded took effect."""
    value: Optional[Encrypted] = None
    error: Optional[Error] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> Encrypted:
        """unwrap returns the value or raises the item's error."""
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


@dataclass(frozen=True)
class DecryptResult:
    """DecryptResult is one item of a decrypt batch (see EncryptResult)."""
    value: Optional[Decrypted] = None
    error: Optional[Error] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> Decrypted:
        """unwrap returns the value or raises the item's error."""
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


@dataclass(frozen=True)
class RawEncrypted:
    """RawEncrypted is the answer of POST /v1/encrypt/raw: the binary
    envelope (the bytes the ``shredd:v1:`` text form encodes)."""
    envelope: bytes = field(repr=False)
    artifact: str
    lineage_size: int
    inherited: List[str] = field(default_factory=list)  # as in Encrypted

    @property
    def ciphertext(self) -> str:
        """ciphertext is the envelope in the text form of the JSON routes."""
        return "shredd:v1:" + base64.urlsafe_b64encode(self.envelope).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class Sealed:
    """Sealed is an artifact sealed on the client (Sealing.seal,
    Sealing.seal_many): the binary envelope, the same bytes the server
    would have sealed, its artifact id and the number of subjects of its
    lineage."""
    envelope: bytes = field(repr=False)
    artifact: str
    lineage_size: int
    inherited: List[str] = field(default_factory=list)  # as in Encrypted

    @property
    def ciphertext(self) -> str:
        """ciphertext is the envelope in the text form (``shredd:v1:``):
        what decrypt opens."""
        return "shredd:v1:" + base64.urlsafe_b64encode(self.envelope).decode("ascii").rstrip("=")


@dataclass(frozen=True)
class SealResult:
    """SealResult is one item of Sealing.seal_many (see EncryptResult): a
    failed item was not registered and nothing was sealed for it."""
    value: Optional[Sealed] = None
    error: Optional[Error] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> Sealed:
        """unwrap returns the value or raises the item's error."""
        if self.error is not None:
            raise self.error
        assert self.value is not None
        return self.value


@dataclass(frozen=True)
class RawDecrypted:
    """RawDecrypted is the answer of POST /v1/decrypt/raw."""
    plaintext: bytes = field(repr=False)
    artifact: str
    kind: str
    lease_id: str
    lease_expires: Optional[datetime]
    released_at: Optional[datetime] = None


@dataclass(frozen=True)
class ArtifactRead:
    """ArtifactRead is a read (a decrypt's lease, of ``artifact``) that the
    write of an artifact answered for, and ``how``: ``named`` (in its
    leases or parents: the write has its lineage), ``inherited`` (given
    its lineage by the token's policy) or ``independent`` (declared not
    derived from it)."""
    lease: str
    artifact: str
    how: str


@dataclass(frozen=True)
class Artifact:
    """Artifact is a registered artifact (subjects are never listed, only
    the lineage size). ``sealed`` is False for a plaintext-held one.
    ``reads`` are the reads its write answered for (GET
    /v1/artifacts/{id}); ``inherited``, in the answer of register, is what
    it is in :class:`Encrypted`."""
    artifact: str
    kind: str
    holder: str
    sealed: bool
    parents: List[str]
    lineage_size: int
    created_at: datetime
    reads: List[ArtifactRead] = field(default_factory=list)
    inherited: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Artifact":
        return cls(artifact=d["artifact"], kind=d["kind"], holder=d.get("holder", ""), sealed=bool(d["sealed"]),
                   parents=list(d.get("parents") or []), lineage_size=int(d["lineage_size"]),
                   created_at=_t(d.get("created_at")),
                   reads=[ArtifactRead(lease=r["lease"], artifact=r.get("artifact", ""), how=r["how"])
                          for r in d.get("reads") or []],
                   inherited=_ids(d.get("inherited")))


@dataclass(frozen=True)
class Condition:
    """Condition is a step of a forget: ``status`` is ``ok``, ``pending``
    or ``failed``, with the reason."""
    name: str
    status: str
    reason: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Condition":
        return cls(name=d["name"], status=d["status"], reason=d.get("reason", ""))


@dataclass(frozen=True)
class Forget:
    """Forget is a forget's pending-erasure token, current. The
    ``commitment_salt`` (hex) is only in the answer of the forget call
    that created it: keep it with the request record, it opens the
    attestation's subject commitment."""
    forget: str
    state: str
    overdue: bool
    barrier: int
    t_prop_seconds: float
    deadline: datetime
    requested_at: datetime
    committed_at: Optional[datetime]
    rekeyed_at: Optional[datetime]
    shredded_at: Optional[datetime]
    erased_at: Optional[datetime]
    commitment_salt: str
    epoch: int
    conditions: List[Condition]
    verification: List[Condition]

    @property
    def id(self) -> str:
        """id is the forget's id (the ``forget`` field)."""
        return self.forget

    def condition(self, name: str) -> Optional[Condition]:
        """condition returns the step or verification condition named so."""
        for c in list(self.conditions) + list(self.verification):
            if c.name == name:
                return c
        return None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Forget":
        return cls(forget=d["forget"], state=d["state"], overdue=bool(d.get("overdue")), barrier=int(d.get("barrier", 0)),
                   t_prop_seconds=float(d.get("t_prop_seconds", 0)), deadline=_t(d.get("deadline")),
                   requested_at=_t(d.get("requested_at")), committed_at=parse_time(d.get("committed_at")),
                   rekeyed_at=parse_time(d.get("rekeyed_at")), shredded_at=parse_time(d.get("shredded_at")),
                   erased_at=parse_time(d.get("erased_at")), commitment_salt=d.get("commitment_salt", ""),
                   epoch=int(d.get("epoch", 0)),
                   conditions=[Condition.from_json(c) for c in d.get("conditions") or []],
                   verification=[Condition.from_json(c) for c in d.get("verification") or []])


@dataclass(frozen=True)
class ForgetPage:
    """ForgetPage is one page of GET /v1/forgets: the forgets, newest
    first; ``next``, the cursor of the following page ("" on the last);
    ``counts``, the number of forgets in each state over all forgets."""
    forgets: List[Forget]
    next: str
    counts: Dict[str, int]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ForgetPage":
        return cls(forgets=[Forget.from_json(f) for f in d.get("forgets") or []], next=d.get("next", "") or "",
                   counts={k: int(v) for k, v in (d.get("counts") or {}).items()})


@dataclass(frozen=True)
class PreviewArtifact:
    """PreviewArtifact is an artifact a forget would make unreadable."""
    artifact: str
    kind: str
    holder: str
    sealed: bool
    hops: int
    collateral: bool
    other_subjects: int


@dataclass(frozen=True)
class PreviewCounts:
    """PreviewCounts counts all the artifacts of a dry run."""
    total: int
    direct: int
    derived: int
    collateral: int
    plaintext_held: int


@dataclass(frozen=True)
class Preview:
    """Preview is the dry run of a forget: nothing was changed."""
    already_forgotten: bool
    counts: PreviewCounts
    truncated: bool
    artifacts: List[PreviewArtifact]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Preview":
        c = d["counts"]
        return cls(already_forgotten=bool(d["already_forgotten"]),
                   counts=PreviewCounts(total=c["total"], direct=c["direct"], derived=c["derived"],
                                        collateral=c["collateral"], plaintext_held=c["plaintext_held"]),
                   truncated=bool(d["truncated"]),
                   artifacts=[PreviewArtifact(artifact=a["artifact"], kind=a["kind"], holder=a.get("holder", ""),
                                              sealed=a["sealed"], hops=a["hops"], collateral=a["collateral"],
                                              other_subjects=a["other_subjects"]) for a in d.get("artifacts") or []])


@dataclass(frozen=True)
class Epoch:
    """Epoch is a completed root epoch."""
    epoch: int
    root_version: int
    retired_versions: List[int]
    started_at: datetime
    finished_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Epoch":
        return cls(epoch=int(d["epoch"]), root_version=int(d["root_version"]),
                   retired_versions=list(d.get("retired_versions") or []),
                   started_at=_t(d.get("started_at")), finished_at=_t(d.get("finished_at")))


@dataclass(frozen=True)
class Reinstatement:
    """Reinstatement is a forgotten subject's new key generation
    (:meth:`shredd.Forgets.reinstate`). It names no subject."""
    generation: int
    previous_generation: int  # the generation the forget destroyed (0: the subject never had a key)
    forget: str  # the forget it follows, unchanged
    log_index: int  # its subject_reinstated log entry, -1 without a log
    reinstated_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Reinstatement":
        return cls(generation=int(d["generation"]), previous_generation=int(d["previous_generation"]),
                   forget=d["forget"], log_index=int(d["log_index"]), reinstated_at=_t(d.get("reinstated_at")))


@dataclass(frozen=True)
class Holder:
    """Holder is a registered holder and its Ed25519 public key (raw 32
    bytes)."""
    holder: str
    public_key: bytes
    created_at: datetime

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Holder":
        return cls(holder=d["holder"], public_key=unb64(d["public_key"]), created_at=_t(d.get("created_at")))


@dataclass(frozen=True)
class PurgeWork:
    """PurgeWork is one open forget's plaintext-held artifacts of a holder
    still to purge and acknowledge."""
    forget: str
    artifacts: List[str]


@dataclass(frozen=True)
class ProbeWork:
    """ProbeWork is a probe a holder must answer now (docs/api.md
    "Probes"): does its retrieval path still return any of these artifacts
    (or markers) of the forget? It answers, signed, before the deadline."""
    probe: str
    forget: str
    nonce: str
    artifacts: List[str]
    markers: List[str]
    deadline: datetime

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ProbeWork":
        return cls(probe=d["probe"], forget=d["forget"], nonce=d["nonce"], artifacts=list(d["artifacts"]),
                   markers=list(d.get("markers") or []), deadline=_t(d["deadline"]))


@dataclass(frozen=True)
class ProbeResult:
    """ProbeResult is shredd's reading of a probe answer: clean when the
    holder's path returned nothing it was asked about."""
    probe: str
    clean: bool


@dataclass(frozen=True)
class AckResult:
    """AckResult is the answer to a signed ack: the artifacts it closed,
    and those of the holder's it left open."""
    closed: List[str]
    missing: List[str]


@dataclass(frozen=True)
class InventoryItem:
    """InventoryItem is one artifact a holder holds."""
    id: str
    kind: str


@dataclass(frozen=True)
class InventoryReport:
    """InventoryReport is the answer to an inventory: anything listed here
    blocks every open forget until a clean inventory."""
    items: int
    unknown_artifacts: List[str]
    unknown_kinds: List[str]
    contradicted_acks: List[str]

    @property
    def clean(self) -> bool:
        """clean is true when the inventory holds only registered artifacts
        and kinds, and contradicts no ack."""
        return not (self.unknown_artifacts or self.unknown_kinds or self.contradicted_acks)


@dataclass(frozen=True)
class InventoryStatus:
    """InventoryStatus is what shredd kept of a holder's latest inventory:
    ``unknown_artifacts`` counts the artifacts never registered for it and
    those it acked as purged but still listed; a report that is not
    ``clean`` blocks every open forget."""
    reported_at: datetime
    items: int
    unknown_artifacts: int
    unknown_kinds: int
    clean: bool

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "InventoryStatus":
        return cls(reported_at=_t(d.get("reported_at")), items=int(d["items"]),
                   unknown_artifacts=int(d["unknown_artifacts"]), unknown_kinds=int(d["unknown_kinds"]),
                   clean=bool(d["clean"]))


@dataclass(frozen=True)
class HolderStatus:
    """HolderStatus is a registered holder as GET /v1/holders shows it:
    ``pending_artifacts`` counts what ``holders.purges`` lists for it (one
    per artifact and open forget), ``pending_forgets`` the open forgets
    they belong to; ``last_ack_at`` is when its latest signed ack arrived
    and ``inventory`` its latest report (None: never)."""
    holder: str
    created_at: datetime
    pending_artifacts: int
    pending_forgets: int
    last_ack_at: Optional[datetime]
    inventory: Optional[InventoryStatus]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "HolderStatus":
        inv = d.get("inventory")
        return cls(holder=d["holder"], created_at=_t(d.get("created_at")),
                   pending_artifacts=int(d["pending_artifacts"]), pending_forgets=int(d["pending_forgets"]),
                   last_ack_at=parse_time(d.get("last_ack_at")),
                   inventory=InventoryStatus.from_json(inv) if inv else None)


@dataclass(frozen=True)
class HolderPage:
    """HolderPage is one page of GET /v1/holders, by holder id; ``next``
    is the cursor of the following page ("" on the last)."""
    holders: List[HolderStatus]
    next: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "HolderPage":
        return cls(holders=[HolderStatus.from_json(h) for h in d.get("holders") or []], next=d.get("next", "") or "")


def ids(xs: Optional[Sequence[str]]) -> List[str]:
    return list(xs or [])
