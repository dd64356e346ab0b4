"""Offline checks of what shredd signs: erasure attestations
(docs/attestation.md), holder-ack messages, checkpoints, inclusion and
consistency proofs (docs/transparency.md).

The Merkle checks (inclusion_root, check_consistency, commitment) need
only the standard library; signatures (Ed25519) need the ``cryptography``
package (``pip install ./clients/python[holder]`` or Debian's
python3-cryptography), imported only when a signature is checked.

This is a second, independent reading of the formats; ``shredd verify``
is the reference verifier and applies the strict parsing of
attestation.md §7 too, which this module does not.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .errors import Error

__all__ = [
    "VerifyError", "ack_message", "commitment", "pae", "load_public_key", "verify_attestation", "Attestation",
    "Checkpoint", "open_checkpoint", "parse_inclusion_proof", "check_inclusion", "parse_consistency_proof",
    "check_consistency", "leaf_hash",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://shredd.dev/attestation/erasure/v1"
CLAIM = "cryptographically erased"
CONDITIONS = ("cascade_closed", "workers_quiesced", "read_path_converged", "closure_intact", "backups_epoch")
LABEL_HOLDER_ACK = "shredd/v1/holder-ack"
LABEL_COMMITMENT = b"shredd/v1/subject-commitment"


class VerifyError(Error):
    """VerifyError: a check failed; the message says which."""


def ack_message(forget: str, holder: str, artifacts: Sequence[str]) -> bytes:
    """ack_message returns the exact bytes a holder signs to acknowledge
    that it purged artifacts for a forget (attestation.md §6): UTF-8,
    every line ending in LF, artifact ids sorted bytewise, each once."""
    for what, v in (("forget", forget), ("holder", holder)):
        _check_ident(what, v)
    ids = sorted(set(artifacts), key=lambda s: s.encode("utf-8"))
    if not ids:
        raise ValueError("shredd: an ack names at least one artifact")
    for a in ids:
        _check_ident("artifact", a)
    lines = [LABEL_HOLDER_ACK, "forget " + forget, "holder " + holder] + ["artifact " + a for a in ids]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _check_ident(what: str, v: str) -> None:
    # Identifiers are 1 to 256 bytes of printable ASCII without spaces, so
    # the message has one reading.
    if not 1 <= len(v) <= 256 or any(not (0x21 <= ord(c) <= 0x7E) for c in v):
        raise ValueError("shredd: the %s id must be 1 to 256 printable ASCII characters without spaces" % what)


def commitment(subject: str, salt_hex: str) -> str:
    """commitment returns the salted commitment to a subject id
    (attestation.md §5): hex SHA-256("shredd/v1/subject-commitment" ‖
    0x00 ‖ salt ‖ subject id as UTF-8)."""
    salt = bytes.fromhex(salt_hex)
    return hashlib.sha256(LABEL_COMMITMENT + b"\x00" + salt + subject.encode("utf-8")).hexdigest()


def pae(payload_type: str, payload: bytes) -> bytes:
    """pae is DSSE's pre-authentication encoding, what the signature
    covers."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("shredd: checking Ed25519 signatures needs the 'cryptography' package "
                          "(pip install './clients/python[holder]', or apt-get install python3-cryptography)") from e
    return ed25519


def load_public_key(key: Union[bytes, str]) -> bytes:
    """load_public_key returns the raw 32-byte Ed25519 public key of a PEM
    ``PUBLIC KEY`` (attestation.pub) or of raw bytes."""
    if isinstance(key, str):
        key = key.encode("ascii")
    if len(key) == 32:
        return key
    from cryptography.hazmat.primitives import serialization
    ed25519 = _ed25519()
    k = serialization.load_pem_public_key(key)
    if not isinstance(k, ed25519.Ed25519PublicKey):
        raise VerifyError("not an Ed25519 public key")
    raw: bytes = k.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw


def _verify_sig(pub: bytes, sig: bytes, msg: bytes, what: str) -> None:
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
    except (InvalidSignature, ValueError):
        raise VerifyError("%s: the signature does not verify" % what) from None


def _b64(s: Any, what: str) -> bytes:
    if not isinstance(s, str):
        raise VerifyError("%s is not a string" % what)
    try:
        b = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        raise VerifyError("%s is not base64" % what) from None
    if base64.b64encode(b).decode("ascii") != s:
        raise VerifyError("%s is not canonical base64" % what)
    return b


@dataclass(frozen=True)
class Attestation:
    """Attestation is a verified erasure attestation: the forget, its
    commitment, the statement's predicate as parsed JSON."""
    forget: str
    commitment: str
    key_id: str
    predicate: Dict[str, Any] = field(repr=False)

    @property
    def conditions(self) -> Dict[str, str]:
        """conditions maps each condition to its status."""
        return {c["name"]: c["status"] for c in self.predicate["conditions"]}

    @property
    def holder_acks(self) -> List[Dict[str, Any]]:
        """holder_acks are the holders' signed purge acks it carries."""
        return list(self.predicate["holder_acks"])


def verify_attestation(data: bytes, public_key: Union[bytes, str], *, subject: Optional[str] = None,
                       salt: Optional[str] = None, forget: Optional[str] = None) -> Attestation:
    """verify_attestation checks an attestation file (a DSSE envelope)
    with the service's public key (PEM or raw): the payload type, the key
    id, the signature over PAE, the statement's types, the claim, the five
    conditions ok, every holder ack's signature, the forget id when given,
    and, given subject and salt (hex, the forget's commitment_salt), that
    they open the subject commitment. Raises VerifyError naming the check
    that failed."""
    pub = load_public_key(public_key)
    try:
        env = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise VerifyError("the attestation is not JSON") from None
    if not isinstance(env, dict) or set(env) != {"payloadType", "payload", "signatures"}:
        raise VerifyError("the attestation is not a DSSE envelope")
    if env["payloadType"] != PAYLOAD_TYPE:
        raise VerifyError("payload type %r, want %r" % (env["payloadType"], PAYLOAD_TYPE))
    sigs = env["signatures"]
    if not isinstance(sigs, list) or len(sigs) != 1 or not isinstance(sigs[0], dict):
        raise VerifyError("an attestation holds exactly one signature")
    key_id = hashlib.sha256(pub).hexdigest()
    if sigs[0].get("keyid") != key_id:
        raise VerifyError("signed by key id %r, not by the given key %s" % (sigs[0].get("keyid"), key_id))
    payload = _b64(env["payload"], "payload")
    _verify_sig(pub, _b64(sigs[0].get("sig"), "sig"), pae(PAYLOAD_TYPE, payload), "attestation")
    st = json.loads(payload)
    if st.get("_type") != STATEMENT_TYPE or st.get("predicateType") != PREDICATE_TYPE:
        raise VerifyError("not an in-toto Statement v1 of predicate %s" % PREDICATE_TYPE)
    subj = st.get("subject")
    if (not isinstance(subj, list) or len(subj) != 1 or subj[0].get("name") != "subject-commitment"
            or set(subj[0].get("digest", {})) != {"sha256"}):
        raise VerifyError("the statement's subject is not one subject-commitment")
    commit = subj[0]["digest"]["sha256"]
    p = st["predicate"]
    if p.get("claim") != CLAIM:
        raise VerifyError("claim %r, want %r" % (p.get("claim"), CLAIM))
    if forget is not None and p.get("forget") != forget:
        raise VerifyError("the attestation is about forget %r, not %r" % (p.get("forget"), forget))
    got = {c.get("name"): c.get("status") for c in p.get("conditions", [])}
    for name in CONDITIONS:
        if got.get(name) != "ok":
            raise VerifyError("condition %s is %r, not ok" % (name, got.get(name)))
    for i, ack in enumerate(p.get("holder_acks", [])):
        msg = ack_message(p["forget"], ack["holder"], ack["artifacts"])
        _verify_sig(_b64(ack["public_key"], "holder key"), _b64(ack["signature"], "ack signature"), msg,
                    "holder ack %d (%s)" % (i, ack["holder"]))
    if subject is not None or salt is not None:
        if subject is None or salt is None:
            raise VerifyError("the commitment needs both the subject id and the salt")
        if commitment(subject, salt) != commit:
            raise VerifyError("the subject id and salt do not open the commitment")
    return Attestation(forget=p["forget"], commitment=commit, key_id=key_id, predicate=p)


# --- the transparency log -------------------------------------------------


def leaf_hash(entry: bytes) -> bytes:
    """leaf_hash is the RFC 6962 leaf hash of an entry: SHA-256(0x00 ‖ entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def _decimal(s: str, what: str) -> int:
    if not s.isascii() or not s.isdigit() or (len(s) > 1 and s[0] == "0"):
        raise VerifyError("%s is not a decimal without leading zeros: %r" % (what, s))
    return int(s)


def _hash(s: str) -> bytes:
    h = _b64(s, "hash")
    if len(h) != 32:
        raise VerifyError("not a SHA-256 hash: %r" % s)
    return h


@dataclass(frozen=True)
class Checkpoint:
    """Checkpoint is an opened signed checkpoint: origin, tree size and
    root hash."""
    origin: str
    size: int
    root: bytes
    text: bytes = field(repr=False)


def _parse_vkey(vkey: str) -> Tuple[str, bytes, bytes]:
    # The origin holds no "+"; the base64 key may.
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3:
        raise VerifyError("not a signed-note verifier key")
    name, khash, raw = parts
    key = _b64(raw, "verifier key")
    if len(key) != 33 or key[0] != 1:
        raise VerifyError("not an Ed25519 signed-note verifier key")
    want = hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]
    if khash != want.hex():
        raise VerifyError("the verifier key's hash does not match its name and key")
    return name, want, key[1:]


def open_checkpoint(note: bytes, vkey: str) -> Checkpoint:
    """open_checkpoint checks a signed checkpoint (C2SP signed note) under
    the log's verifier key (``log.vkey``) and returns it."""
    name, khash, pub = _parse_vkey(vkey)
    try:
        s = note.decode("utf-8")
    except UnicodeDecodeError:
        raise VerifyError("the checkpoint is not UTF-8") from None
    text, sep, sigs = s.partition("\n\n")
    if not sep:
        raise VerifyError("the checkpoint has no signature block")
    text += "\n"
    ok = False
    for line in sigs.rstrip("\n").split("\n"):
        if not line.startswith("\u2014 "):
            raise VerifyError("a malformed signature line")
        who, _, b = line[2:].rpartition(" ")
        sig = _b64(b, "note signature")
        if who == name and sig[:4] == khash:
            _verify_sig(pub, sig[4:], text.encode("utf-8"), "checkpoint")
            ok = True
    if not ok:
        raise VerifyError("the checkpoint holds no signature of %s" % name)
    body = text.rstrip("\n").split("\n")
    if len(body) < 3:
        raise VerifyError("the checkpoint has no origin, size and root hash")
    if body[0] != name:
        raise VerifyError("checkpoint origin %r, want %r" % (body[0], name))
    return Checkpoint(origin=body[0], size=_decimal(body[1], "tree size"), root=_hash(body[2]), text=note)


def parse_inclusion_proof(proof: bytes) -> Tuple[int, List[bytes], bytes]:
    """parse_inclusion_proof splits a c2sp.org/tlog-proof@v1 proof into the
    index, the audit path and the checkpoint it is against."""
    s = proof.decode("utf-8")
    head, sep, cp = s.partition("\n\n")
    lines = head.split("\n")
    if not sep or lines[0] != "c2sp.org/tlog-proof@v1":
        raise VerifyError("not a c2sp.org/tlog-proof@v1 proof")
    lines = lines[1:]
    if lines and lines[0].startswith("extra "):
        lines = lines[1:]
    if not lines or not lines[0].startswith("index "):
        raise VerifyError("the proof has no index line")
    return _decimal(lines[0][6:], "index"), [_hash(x) for x in lines[1:]], cp.encode("utf-8")


def inclusion_root(entry: bytes, index: int, size: int, path: Sequence[bytes]) -> bytes:
    """inclusion_root computes the root hash an audit path leads to from
    entry at index in a tree of size (RFC 9162 §2.1.3.2)."""
    if index >= size:
        raise VerifyError("index %d is not below tree size %d" % (index, size))
    r = leaf_hash(entry)
    fn, sn = index, size - 1
    for p in path:
        if sn == 0:
            raise VerifyError("the audit path is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = _node(p, r)
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = _node(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise VerifyError("the audit path is shorter than the tree is deep")
    return r


def check_inclusion(entry: bytes, proof: bytes, vkey: str) -> Checkpoint:
    """check_inclusion checks a tlog-proof@v1 inclusion proof of entry:
    its checkpoint's signature under vkey, then the path to its root.
    Returns the checkpoint."""
    index, path, cp = parse_inclusion_proof(proof)
    c = open_checkpoint(cp, vkey)
    if inclusion_root(entry, index, c.size, path) != c.root:
        raise VerifyError("entry %d is not in the tree of the checkpoint" % index)
    return c


def parse_consistency_proof(proof: bytes) -> Tuple[int, int, List[bytes]]:
    """parse_consistency_proof reads a shredd/tlog-consistency@v1 proof:
    old size, new size, hashes."""
    lines = proof.decode("utf-8").split("\n")
    if lines[-1] != "" or lines[0] != "shredd/tlog-consistency@v1" or len(lines) < 4:
        raise VerifyError("not a shredd/tlog-consistency@v1 proof")
    if not lines[1].startswith("old ") or not lines[2].startswith("new "):
        raise VerifyError("the proof has no old and new lines")
    old, new = _decimal(lines[1][4:], "old"), _decimal(lines[2][4:], "new")
    if old > new:
        raise VerifyError("old is above new")
    return old, new, [_hash(x) for x in lines[3:-1]]


def check_consistency(old: Checkpoint, new: Checkpoint, proof: bytes) -> None:
    """check_consistency checks that the tree of checkpoint new extends
    that of checkpoint old (both opened with open_checkpoint), with a
    shredd/tlog-consistency@v1 proof (RFC 9162 §2.1.4.2)."""
    po, pn, path = parse_consistency_proof(proof)
    if old.origin != new.origin:
        raise VerifyError("the checkpoints are of two logs")
    if (po, pn) != (old.size, new.size):
        raise VerifyError("the proof is from %d to %d, the checkpoints %d and %d" % (po, pn, old.size, new.size))
    if old.size == new.size:
        if path or old.root != new.root:
            raise VerifyError("two trees of one size with different roots")
        return
    if old.size == 0:
        if path:
            raise VerifyError("a proof from the empty tree holds no hashes")
        return
    if not path:
        raise VerifyError("an empty consistency proof")
    if old.size & (old.size - 1) == 0:
        path = [old.root] + list(path)
    fn, sn = old.size - 1, new.size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerifyError("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = _node(c, fr), _node(c, sr)
            if not fn & 1:
                while not fn & 1 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
        else:
            sr = _node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0 or fr != old.root or sr != new.root:
        raise VerifyError("the tree of size %d does not extend the tree of size %d" % (new.size, old.size))
