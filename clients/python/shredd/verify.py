"""Offline checks of what shredd signs: erasure attestations
(docs/attestation.md), holder-ack messages, checkpoints, inclusion and
consistency proofs (docs/transparency.md).

The Merkle checks (inclusion_root, check_consistency, commitment) need
only the standard library; signatures (Ed25519) need the ``cryptography``
package (``pip install ./clients/python[holder]`` or Debian's
python3-cryptography), imported only when a signature is checked.

verify_export reads a regulator export as ``shredd verify`` and the page
do, by the strict rules of docs/transparency.md ("Reading an export
strictly"): on every input it gives their verdict and their reason code
(Refused.reason), which the shared corpus under testdata/evidence pins
(tests/test_evidence.py). verify_attestation is a lighter reading of an
attestation file alone; ``shredd verify`` applies the strict parsing of
attestation.md §7 to those too.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from .errors import Error

__all__ = [
    "VerifyError", "ack_message", "commitment", "pae", "load_public_key", "verify_attestation", "Attestation",
    "Checkpoint", "open_checkpoint", "parse_inclusion_proof", "check_inclusion", "parse_consistency_proof",
    "check_consistency", "leaf_hash", "Refused", "verify_export", "ExportReport", "read_export", "gunzip_strict",
    "untar_strict", "TarMember", "check_json", "check_public_key_file", "check_log_key_file",
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


# --- regulator exports, read strictly ---------------------------------------
#
# The strict reader of docs/transparency.md ("Reading an export strictly"):
# the same rules, in the same order and with the same reason codes as
# `shredd verify` (bundle/strict.go) and the page (ui/static/verify.js), so
# that every reader gives the same verdict on the same bytes. gzip, tar and
# JSON are checked byte by byte here before zlib or json see them: tarfile
# reads PAX and GNU headers, gzip reads further members, json keeps the
# last of duplicate keys.

MAX_SAFE_INTEGER = (1 << 53) - 1
MAX_TOTAL = 256 << 20
MAX_FILE = 64 << 20
MAX_ENTRY = 65535
EVENT_PAYLOAD_TYPE = "application/vnd.shredd.log-event+json"
EVENT_TYPE = "https://shredd.dev/log-event/v1"
ROOT_STORES = ("local", "vault-transit", "vault-transit-per-subject")


class Refused(VerifyError):
    """Refused: the input breaks a rule of the evidence spec or fails a
    check; reason is the spec's stable reason code (e.g. ``gzip.crc``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__("%s [%s]" % (message, reason))
        self.reason = reason


def _refuse(reason: str, message: str) -> "Refused":
    return Refused(reason, message)


def _check_text(b: bytes) -> str:
    if b.startswith(b"\xef\xbb\xbf"):
        raise _refuse("text.bom", "a UTF-8 BOM")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse("text.utf8", "not UTF-8") from None


def gunzip_strict(b: bytes) -> bytes:
    """gunzip_strict reads a gzip file of exactly one member: FNAME the only
    flag, CRC-32 and ISIZE checked, nothing after the trailer."""
    import zlib
    if len(b) < 2 or b[0] != 0x1F or b[1] != 0x8B:
        raise _refuse("gzip.header", "not a gzip file")
    if len(b) < 10:
        raise _refuse("gzip.truncated", "gzip header cut")
    if b[2] != 8 or b[3] & ~0x08:
        raise _refuse("gzip.header", "gzip method or flags other than deflate and FNAME")
    off = 10
    if b[3] & 0x08:
        i = b.find(b"\x00", off)
        if i < 0:
            raise _refuse("gzip.truncated", "gzip file name cut")
        off = i + 1
    d = zlib.decompressobj(-15)
    try:
        out = d.decompress(b[off:], MAX_TOTAL + 1)
    except zlib.error:
        raise _refuse("gzip.deflate", "bad or cut deflate data") from None
    if len(out) > MAX_TOTAL:
        raise _refuse("gzip.too-large", "over %d bytes uncompressed" % MAX_TOTAL)
    if not d.eof:
        raise _refuse("gzip.deflate", "bad or cut deflate data")
    rest = d.unused_data
    if len(rest) < 8:
        raise _refuse("gzip.truncated", "gzip trailer cut")
    if int.from_bytes(rest[0:4], "little") != zlib.crc32(out):
        raise _refuse("gzip.crc", "gzip CRC-32 does not match")
    if int.from_bytes(rest[4:8], "little") != len(out) & 0xFFFFFFFF:
        raise _refuse("gzip.size", "gzip ISIZE does not match")
    if len(rest) > 8:
        if rest[8:10] == b"\x1f\x8b":
            raise _refuse("gzip.multi-member", "a second gzip member")
        raise _refuse("gzip.trailing", "data after the gzip member")
    return out


def _octal(f: bytes) -> Optional[int]:
    i = 0
    while i < len(f) and 0x30 <= f[i] <= 0x37:
        i += 1
    if i == 0 or i == len(f) or any(c not in (0, 0x20) for c in f[i:]):
        return None
    return int(f[:i], 8)


def _cfield(f: bytes) -> Optional[bytes]:
    i = f.find(b"\x00")
    if i < 0:
        return f
    return f[:i] if not any(f[i:]) else None


@dataclass(frozen=True)
class TarMember:
    """TarMember is a member read by untar_strict."""
    name: str
    is_dir: bool
    data: bytes = field(repr=False)


def untar_strict(t: bytes) -> List[TarMember]:
    """untar_strict reads a POSIX ustar archive: regular files and
    directories only, octal fields, unsigned checksum, safe unique names,
    two end blocks and then zero bytes only."""
    out: List[TarMember] = []
    seen = set()
    off = 0
    while True:
        if off == len(t):
            raise _refuse("tar.end", "no end-of-archive blocks")
        if off + 512 > len(t):
            raise _refuse("tar.truncated", "tar header cut")
        h = t[off:off + 512]
        if not any(h):
            if off + 1024 > len(t) or any(t[off + 512:off + 1024]):
                raise _refuse("tar.end", "one end-of-archive block, not two")
            if any(t[off + 1024:]):
                raise _refuse("tar.trailing", "data after the end-of-archive blocks")
            return out
        chk = _octal(h[148:156])
        if chk is None or chk != sum(h[:148]) + 8 * 32 + sum(h[156:]):
            raise _refuse("tar.checksum", "tar header checksum")
        if h[257:263] == b"ustar\x00" and h[263:265] == b"00":
            pass
        elif h[257:265] == b"ustar  \x00":
            raise _refuse("tar.gnu", "a GNU tar header")
        else:
            raise _refuse("tar.magic", "not a POSIX ustar header")
        typ = h[156:157]
        if typ in (b"0", b"\x00", b"5"):
            pass
        elif typ in (b"x", b"g"):
            raise _refuse("tar.pax", "a PAX extended header")
        elif typ in (b"L", b"K", b"S", b"D", b"M", b"N", b"V"):
            raise _refuse("tar.gnu", "a GNU extension header")
        else:
            raise _refuse("tar.type", "a member that is not a regular file or directory")
        nums = []
        for a, n in ((100, 8), (108, 8), (116, 8), (124, 12), (136, 12)):
            f = h[a:a + n]
            if f[0] & 0x80:
                raise _refuse("tar.base256", "a base-256 numeric field")
            v = _octal(f)
            if v is None:
                raise _refuse("tar.header", "a malformed numeric field")
            nums.append(v)
        size = nums[3]
        if any(h[157:257]):
            raise _refuse("tar.header", "a link name on a file")
        nm, px = _cfield(h[0:100]), _cfield(h[345:500])
        if nm is None or px is None:
            raise _refuse("tar.path", "a NUL inside a name")
        raw = px + b"/" + nm if px else nm
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            name = ""
        if name == "" or name[0] == "/" or ".." in (name[:-1] if name.endswith("/") else name).split("/"):
            raise _refuse("tar.path", "an empty, absolute, non-UTF-8 or .. path")
        if typ == b"5" and size != 0:
            raise _refuse("tar.header", "a directory with data")
        if size > MAX_FILE:
            raise _refuse("bundle.size", "a file over %d bytes" % MAX_FILE)
        end = off + 512 + size
        pad = (512 - size % 512) % 512
        if end + pad > len(t):
            raise _refuse("tar.truncated", "tar data cut")
        if name in seen:
            raise _refuse("tar.duplicate", "a name twice")
        seen.add(name)
        if len(out) == 10000:
            raise _refuse("bundle.size", "more than 10000 members")
        out.append(TarMember(name=name, is_dir=typ == b"5", data=t[off + 512:end]))
        off = end + pad


_WS = " \t\n\r"
_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def check_json(b: bytes) -> str:
    """check_json checks one JSON document against the spec before any
    decoder reads it: no BOM, UTF-8, RFC 8259 grammar, no lone surrogate
    escape, no duplicate key, integers within 2^53-1 only, no trailing
    data. Returns the text."""
    if b.startswith(b"\xef\xbb\xbf"):
        raise _refuse("json.bom", "a UTF-8 BOM before JSON")
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse("json.utf8", "JSON is not UTF-8") from None
    n = len(s)
    i = 0

    def syntax() -> Refused:
        return _refuse("json.syntax", "JSON syntax error at %d" % i)

    def ws() -> None:
        nonlocal i
        while i < n and s[i] in _WS:
            i += 1

    def digits() -> int:
        nonlocal i
        a = i
        while i < n and "0" <= s[i] <= "9":
            i += 1
        return i - a

    def hex4() -> int:
        nonlocal i
        h = s[i:i + 4]
        if len(h) != 4 or any(c not in "0123456789abcdefABCDEF" for c in h):
            raise syntax()
        i += 4
        return int(h, 16)

    def string() -> str:
        nonlocal i
        i += 1
        out: List[str] = []
        while True:
            if i >= n:
                raise syntax()
            c = s[i]
            if c == '"':
                i += 1
                return "".join(out)
            if ord(c) < 0x20:
                raise syntax()
            if c == "\\":
                if i + 1 >= n:
                    raise syntax()
                e = s[i + 1]
                i += 2
                if e in _ESC:
                    out.append(_ESC[e])
                    continue
                if e != "u":
                    raise syntax()
                r = hex4()
                if 0xDC00 <= r <= 0xDFFF:
                    raise _refuse("json.utf8", "a lone surrogate escape")
                if 0xD800 <= r <= 0xDBFF:
                    if s[i:i + 2] != "\\u":
                        raise _refuse("json.utf8", "a lone surrogate escape")
                    i += 2
                    lo = hex4()
                    if not 0xDC00 <= lo <= 0xDFFF:
                        raise _refuse("json.utf8", "a lone surrogate escape")
                    r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00)
                out.append(chr(r))
                continue
            out.append(c)
            i += 1

    def value(depth: int) -> None:
        nonlocal i
        if i >= n:
            raise syntax()
        c = s[i]
        if c in "{[":
            if depth >= 64:
                raise syntax()
            close = "}" if c == "{" else "]"
            i += 1
            ws()
            if i < n and s[i] == close:
                i += 1
                return
            keys = set()
            while True:
                if c == "{":
                    if i >= n or s[i] != '"':
                        raise syntax()
                    k = string()
                    if k in keys:
                        raise _refuse("json.duplicate-key", "a duplicate JSON key")
                    keys.add(k)
                    ws()
                    if i >= n or s[i] != ":":
                        raise syntax()
                    i += 1
                    ws()
                value(depth + 1)
                ws()
                if i < n and s[i] == ",":
                    i += 1
                    ws()
                    continue
                if i < n and s[i] == close:
                    i += 1
                    return
                raise syntax()
        if c == '"':
            string()
            return
        for w in ("true", "false", "null"):
            if c == w[0]:
                if s[i:i + len(w)] != w:
                    raise syntax()
                i += len(w)
                return
        if c == "-" or "0" <= c <= "9":
            if c == "-":
                i += 1
            ds = i
            if i < n and s[i] == "0":
                i += 1
            elif digits() == 0:
                raise syntax()
            int_part = s[ds:i]
            frac = False
            if i < n and s[i] == ".":
                i += 1
                if digits() == 0:
                    raise syntax()
                frac = True
            if i < n and s[i] in "eE":
                i += 1
                if i < n and s[i] in "+-":
                    i += 1
                if digits() == 0:
                    raise syntax()
                frac = True
            if frac:
                raise _refuse("json.number", "a number that is not an integer")
            if len(int_part) > 16 or int(int_part) > MAX_SAFE_INTEGER:
                raise _refuse("json.number", "an integer beyond 2^53-1")
            return
        raise syntax()

    ws()
    value(0)
    ws()
    if i != n:
        raise _refuse("json.trailing", "data after the JSON value")
    return s


def _parse_json(b: bytes) -> Any:
    s = check_json(b)
    try:
        return json.loads(s)
    except ValueError:
        raise _refuse("json.syntax", "not JSON") from None


_SPKI_ED25519 = bytes.fromhex("302a300506032b6570032100")


def check_public_key_file(b: bytes) -> bytes:
    """check_public_key_file reads an attestation key file in its one form
    (attest.MarshalPublicKey) and returns the raw Ed25519 key."""
    s = _check_text(b)
    begin = "-----BEGIN PUBLIC KEY-----\n"
    if not s.startswith(begin):
        if s.find("-----BEGIN PUBLIC KEY-----") > 0:
            raise _refuse("key.leading", "data before the PEM block")
        raise _refuse("key.format", "not a PEM PUBLIC KEY")
    body, sep, rest = s[len(begin):].partition("-----END PUBLIC KEY-----")
    if not sep or not body.endswith("\n"):
        raise _refuse("key.format", "no PEM end line")
    if rest != "\n":
        if rest == "":
            raise _refuse("key.format", "no newline after the PEM end line")
        raise _refuse("key.trailing", "data after the PEM block")
    try:
        der = base64.b64decode(body.replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        der = b""
    enc = base64.b64encode(der).decode("ascii")
    wrapped = "".join(enc[i:i + 64] + "\n" for i in range(0, len(enc), 64))
    if len(der) != 44 or der[:12] != _SPKI_ED25519 or wrapped != body:
        raise _refuse("key.format", "not an Ed25519 public key in canonical PEM")
    return der[12:]


def check_log_key_file(b: bytes) -> str:
    """check_log_key_file reads a log verifier key file: one line, an
    optional final LF."""
    s = _check_text(b)
    if s.endswith("\n"):
        s = s[:-1]
    if s == "" or any(c in s for c in "\n\r\t "):
        raise _refuse("logkey.format", "not one line")
    return s


# Go's unicode.IsSpace, and '+': what a note name may not hold.
_NOTE_NAME_BAD = set("\t\n\v\f\r \u0085\u00a0\u1680\u2028\u2029\u202f\u205f\u3000+") | {chr(c) for c in range(0x2000, 0x200B)}


def _valid_note_name(n: str) -> bool:
    return n != "" and not any(c in _NOTE_NAME_BAD for c in n)


def _b64_loose(s: str) -> Optional[bytes]:
    # Go's base64.StdEncoding.DecodeString: padded, non-zero padding bits allowed.
    if len(s) % 4 or any(c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=" for c in s):
        return None
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None


def _parse_vkey_strict(vkey: str) -> Tuple[str, bytes, bytes]:
    name, _, rest = vkey.partition("+")
    h, _, k = rest.partition("+")
    key = _b64_loose(k)
    if (len(h) != 8 or any(c not in "0123456789abcdefABCDEF" for c in h) or key is None or not _valid_note_name(name)
            or len(key) == 0):
        raise _refuse("logkey.format", "malformed verifier key")
    want = hashlib.sha256(name.encode() + b"\n" + key).digest()[:4]
    if bytes.fromhex(h) != want:
        raise _refuse("logkey.format", "verifier key hash mismatch")
    if key[0] != 1 or len(key) != 33:
        raise _refuse("logkey.format", "not an Ed25519 verifier key")
    return name, want, key[1:]


def _ed25519_ok(pub: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        _verify_sig(pub, sig, msg, "")
        return True
    except VerifyError:
        return False


def _open_note(b: bytes, vk: Tuple[str, bytes, bytes], codes: Tuple[str, str, str]) -> Tuple[str, int, bytes]:
    fmt, sigc, origc = codes
    s = _check_text(b)
    if any(ord(c) < 0x20 and c != "\n" for c in s):
        raise _refuse(fmt, "malformed note")
    split = s.rfind("\n\n")
    if split < 0:
        raise _refuse(fmt, "malformed note")
    text, sigs = s[:split + 1], s[split + 2:]
    if sigs == "" or not sigs.endswith("\n"):
        raise _refuse(fmt, "malformed note")
    name, khash, pub = vk
    verified, seen, num = False, set(), 0
    for line in sigs[:-1].split("\n"):
        if not line.startswith("\u2014 "):
            raise _refuse(fmt, "malformed note")
        who, _, b64 = line[2:].partition(" ")
        sig = _b64_loose(b64)
        if sig is None or not _valid_note_name(who) or b64 == "" or len(sig) < 5:
            raise _refuse(fmt, "malformed note")
        num += 1
        if num > 100:
            raise _refuse(fmt, "malformed note")
        if who != name or sig[:4] != khash or sig[:4] in seen:
            continue
        seen.add(sig[:4])
        if not _ed25519_ok(pub, sig[4:], text.encode("utf-8")):
            raise _refuse(sigc, "verification failed: invalid signature")
        verified = True
    if not verified:
        raise _refuse(sigc, "verification failed: no signature by the log key")
    lines = text.split("\n")
    ok = len(lines) >= 4 and lines[0] != ""
    size = _dec(lines[1]) if ok else None
    root = _hash_or_none(lines[2]) if ok else None
    if not ok or size is None or root is None or any(x == "" for x in lines[3:-1]):
        raise _refuse(fmt, "malformed checkpoint")
    if lines[0] != name:
        raise _refuse(origc, "verification failed: origin %r signed by key %r" % (lines[0], name))
    return lines[0], size, root


def _dec(s: str) -> Optional[int]:
    if not s or not s.isascii() or not s.isdigit() or (len(s) > 1 and s[0] == "0") or len(s) > 16:
        return None
    v = int(s)
    return v if v <= MAX_SAFE_INTEGER else None


def _hash_or_none(s: str) -> Optional[bytes]:
    try:
        h = _b64(s, "hash")
    except VerifyError:
        return None
    return h if len(h) == 32 else None


def _parse_proof_strict(b: bytes) -> Tuple[int, List[bytes], bytes]:
    bad = _refuse("proof.format", "malformed proof")
    rest = b

    def nxt() -> Optional[str]:
        nonlocal rest
        i = rest.find(b"\n")
        if i < 0:
            return None
        line = rest[:i]
        rest = rest[i + 1:]
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError:
            return "\x00"
    line = nxt()
    if line != "c2sp.org/tlog-proof@v1":
        raise bad
    line = nxt()
    if line is None:
        raise bad
    if line.startswith("extra "):
        e = _hash_or_none_any(line[6:])
        if not e:
            raise bad
        line = nxt()
        if line is None:
            raise bad
    if not line.startswith("index "):
        raise bad
    index = _dec(line[6:])
    if index is None:
        raise bad
    hashes: List[bytes] = []
    while True:
        line = nxt()
        if line is None:
            raise bad
        if line == "":
            break
        h = _hash_or_none(line)
        if h is None or len(hashes) == 63:
            raise bad
        hashes.append(h)
    try:
        rt = rest.decode("utf-8")
    except UnicodeDecodeError:
        raise bad from None
    cut = rt.find("\n\n")
    if cut < 0:
        raise bad
    cl = (rt[:cut] + "\n").split("\n")
    if (len(cl) < 4 or cl[0] == "" or _dec(cl[1]) is None or _hash_or_none(cl[2]) is None
            or any(x == "" for x in cl[3:-1])):
        raise bad
    return index, hashes, rest


def _hash_or_none_any(s: str) -> Optional[bytes]:
    try:
        return _b64(s, "extra")
    except VerifyError:
        return None


def _parse_consistency_strict(b: bytes) -> Tuple[int, int, List[bytes]]:
    bad = _refuse("consistency.format", "consistency.proof is malformed")
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        raise bad from None
    if not t.endswith("\n"):
        raise bad
    lines = t[:-1].split("\n")
    if len(lines) < 3 or lines[0] != "shredd/tlog-consistency@v1":
        raise bad
    o = _dec(lines[1][4:]) if lines[1].startswith("old ") else None
    n = _dec(lines[2][4:]) if lines[2].startswith("new ") else None
    if o is None or n is None or o > n or len(lines) - 3 > 126:
        raise bad
    hashes = [_hash_or_none(x) for x in lines[3:]]
    if any(h is None for h in hashes):
        raise bad
    return o, n, [h for h in hashes if h is not None]


# Go's encoding/json, for the canonical-form checks (json.schema).
class _Schema(Exception):
    pass


def _go_string(s: Any) -> str:
    if not isinstance(s, str):
        raise _Schema("a string field holds another type")
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif ch in "<>&\u2028\u2029" or c < 0x20:
            out.append("\\u%04x" % c)
        elif 0xD800 <= c <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out) + '"'


def _go_str(v: Any) -> str:
    return '""' if v is None else _go_string(v)


def _go_int(v: Any, lo: int, hi: int) -> str:
    if v is None:
        return "0"
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _Schema("an integer field holds another value")
    return str(v)


def _int64(v: Any) -> str:
    return _go_int(v, -MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)


def _uint32(v: Any) -> str:
    return _go_int(v, 0, 4294967295)


def _go_bool(v: Any) -> str:
    if v is None:
        return "false"
    if not isinstance(v, bool):
        raise _Schema("a boolean field holds another type")
    return "true" if v else "false"


def _go_bytes(v: Any) -> str:
    if v is None:
        return "null"
    b = _b64_loose(v) if isinstance(v, str) else None
    if b is None:
        raise _Schema("a base64 field is not base64")
    return '"' + base64.b64encode(b).decode("ascii") + '"'


def _go_list(v: Any, item: Callable[[Any], str], or_empty: bool) -> str:
    if v is None:
        return "[]" if or_empty else "null"
    if not isinstance(v, list):
        raise _Schema("a list field holds another type")
    return "[" + ",".join(item(x) for x in v) + "]"


def _go_obj(v: Any) -> Dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise _Schema("an object field holds another type")
    return v


_TIME_RE = None
_GO_ZERO_NS = -62135596800 * 10**9


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= 1 if m <= 2 else 0
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


def _parse_time(v: Any) -> Dict[str, Any]:  # keys: ns, utc, zero, canon
    """_parse_time reads an RFC 3339 time as Go's time.Time does and
    returns ns since 1970 (UTC), whether it is UTC, Go's IsZero, and Go's
    spelling of it (canon)."""
    import re
    global _TIME_RE
    if v is None:
        return {"ns": _GO_ZERO_NS, "utc": True, "zero": True, "canon": '"0001-01-01T00:00:00Z"'}
    if not isinstance(v, str):
        raise _Schema("a time field holds another type")
    if _TIME_RE is None:
        _TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII)
    m = _TIME_RE.match(v)
    if not m:
        raise _Schema("a time is not RFC 3339")
    Y, Mo, D, h, mi, s = (int(x) for x in m.groups()[:6])
    if not 1 <= Mo <= 12:
        raise _Schema("a time is out of range")
    leap = Y % 4 == 0 and (Y % 100 != 0 or Y % 400 == 0)
    dim = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][Mo - 1]
    if D < 1 or D > dim or h > 23 or mi > 59 or s > 59:
        raise _Schema("a time is out of range")
    frac = (m.group(7) or "")[1:]
    zone = m.group(8)
    off = 0
    if zone not in ("Z", "z"):
        oh, om = int(zone[1:3]), int(zone[4:6])
        if oh > 23 or om > 59:
            raise _Schema("a time zone is out of range")
        off = (-1 if zone[0] == "-" else 1) * (oh * 60 + om) * 60
    secs = _days_from_civil(Y, Mo, D) * 86400 + h * 3600 + mi * 60 + s - off
    ns = secs * 10**9 + int((frac or "0").ljust(9, "0"))
    frac = frac.rstrip("0")
    canon = '"' + v[:19].replace("t", "T", 1) + ("." + frac if frac else "") + ("Z" if off == 0 else zone) + '"'
    return {"ns": ns, "utc": off == 0, "zero": ns == _GO_ZERO_NS, "canon": canon}


def _canon_time(v: Any) -> str:
    c: str = _parse_time(v)["canon"]
    return c


def _compact(s: str) -> str:
    out, in_str, esc = [], False, False
    for ch in s:
        if in_str:
            out.append(ch)
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            out.append(ch)
        elif ch not in _WS:
            out.append(ch)
    return "".join(out)


def _marshal_statement(st: Any) -> str:
    o = _go_obj(st)
    p = _go_obj(o.get("predicate"))
    tl = _go_obj(p.get("timeline"))
    ke = _go_obj(p.get("key_evidence"))

    def subj(d: Any) -> str:
        x = _go_obj(d)
        dig = "null"
        if x.get("digest") is not None:
            mm = _go_obj(x["digest"])
            dig = "{" + ",".join(_go_string(k) + ":" + _go_str(mm[k]) for k in sorted(mm, key=lambda k: k.encode("utf-8"))) + "}"
        return '{"name":' + _go_str(x.get("name")) + ',"digest":' + dig + "}"
    rkc = ""
    if ke.get("root_key_config") is not None:
        c = _go_obj(ke["root_key_config"])
        rkc = (',"root_key_config":{"name":' + _go_str(c.get("name")) + ',"type":' + _go_str(c.get("type")) + ',"exportable":'
               + _go_bool(c.get("exportable")) + ',"allow_plaintext_backup":' + _go_bool(c.get("allow_plaintext_backup"))
               + ',"min_available_version":' + _int64(c.get("min_available_version")) + ',"latest_version":'
               + _int64(c.get("latest_version")) + "}")

    def art(a: Any) -> str:
        x = _go_obj(a)
        sig = "" if x.get("ack_signature") in (None, "") else ',"ack_signature":' + _go_bytes(x["ack_signature"])
        return ('{"id":' + _go_str(x.get("id")) + ',"kind":' + _go_str(x.get("kind")) + ',"holder":' + _go_str(x.get("holder"))
                + ',"closed_by":' + _go_str(x.get("closed_by")) + sig + "}")

    def cond(c: Any) -> str:
        x = _go_obj(c)
        return '{"name":' + _go_str(x.get("name")) + ',"status":' + _go_str(x.get("status")) + ',"evidence":' + _go_str(x.get("evidence")) + "}"

    def ack(h: Any) -> str:
        x = _go_obj(h)
        return ('{"holder":' + _go_str(x.get("holder")) + ',"public_key":' + _go_bytes(x.get("public_key")) + ',"signature":'
                + _go_bytes(x.get("signature")) + ',"artifacts":' + _go_list(x.get("artifacts"), _go_str, True) + "}")

    def res(r: Any) -> str:
        x = _go_obj(r)
        return '{"kind":' + _go_str(x.get("kind")) + ',"description":' + _go_str(x.get("description")) + "}"
    return ('{"_type":' + _go_str(o.get("_type")) + ',"subject":' + _go_list(o.get("subject"), subj, True) + ',"predicateType":'
            + _go_str(o.get("predicateType")) + ',"predicate":{"forget":' + _go_str(p.get("forget")) + ',"claim":' + _go_str(p.get("claim"))
            + ',"timeline":{"requested":' + _canon_time(tl.get("requested")) + ',"committed":' + _canon_time(tl.get("committed"))
            + ',"shredded":' + _canon_time(tl.get("shredded")) + ',"erased":' + _canon_time(tl.get("erased")) + "}"
            + ',"key_evidence":{"root_store":' + _go_str(ke.get("root_store")) + ',"retired_root_versions":'
            + _go_list(ke.get("retired_root_versions"), _int64, True) + rkc + ',"epoch":' + _int64(ke.get("epoch")) + "}"
            + ',"artifacts":' + _go_list(p.get("artifacts"), art, True) + ',"conditions":' + _go_list(p.get("conditions"), cond, True)
            + ',"holder_acks":' + _go_list(p.get("holder_acks"), ack, True) + ',"residuals":' + _go_list(p.get("residuals"), res, True) + "}}")


def _marshal_event(ev: Any) -> str:
    o = _go_obj(ev)
    part = ""
    fs: Dict[str, Callable[[Dict[str, Any]], str]] = {
        "key": lambda x: '{"subject":' + _go_str(x.get("subject")) + ',"generation":' + _uint32(x.get("generation")) + "}",
        "forget": lambda x: ('{"forget":' + _go_str(x.get("forget")) + ',"subject":' + _go_str(x.get("subject")) + ',"generation":'
                             + _uint32(x.get("generation")) + ',"barrier":' + _int64(x.get("barrier")) + ',"key_created_index":'
                             + _int64(x.get("key_created_index")) + "}"),
        "epoch": lambda x: ('{"epoch":' + _int64(x.get("epoch")) + ',"root_store":' + _go_str(x.get("root_store")) + ',"from_version":'
                            + _int64(x.get("from_version")) + ',"to_version":' + _int64(x.get("to_version")) + ',"retired_versions":'
                            + _go_list(x.get("retired_versions"), _int64, False) + "}"),
        "ack": lambda x: ('{"forget":' + _go_str(x.get("forget")) + ',"holder":' + _go_str(x.get("holder")) + ',"public_key":'
                          + _go_bytes(x.get("public_key")) + ',"artifacts":' + _int64(x.get("artifacts")) + ',"message_sha256":'
                          + _go_str(x.get("message_sha256")) + ',"signature":' + _go_bytes(x.get("signature")) + "}"),
        "attested": lambda x: ('{"forget":' + _go_str(x.get("forget")) + ',"subject":' + _go_str(x.get("subject"))
                               + ',"attestation_sha256":' + _go_str(x.get("attestation_sha256")) + "}"),
    }
    for name in ("key", "forget", "epoch", "ack", "attested"):
        if o.get(name) is not None:
            part += ',"' + name + '":' + fs[name](_go_obj(o[name]))
    return '{"_type":' + _go_str(o.get("_type")) + ',"event":' + _go_str(o.get("event")) + ',"time":' + _canon_time(o.get("time")) + part + "}"


def _open_envelope(data: bytes, pub: bytes, payload_type: str) -> bytes:
    env = _parse_json(data)
    src = check_json(data)
    if not isinstance(env, dict):
        raise _refuse("json.schema", "envelope: not a JSON object")
    try:
        sigs = env.get("signatures")
        canon = ('{"payloadType":' + _go_str(env.get("payloadType")) + ',"payload":' + _go_bytes(env.get("payload")) + ',"signatures":'
                 + _go_list(sigs, lambda s: '{"keyid":' + _go_str(_go_obj(s).get("keyid")) + ',"sig":' + _go_bytes(_go_obj(s).get("sig")) + "}", False)
                 + "}")
    except _Schema as e:
        raise _refuse("json.schema", "envelope: %s" % e) from None
    if canon != _compact(src):
        raise _refuse("json.schema", "envelope is not in canonical form")
    if env.get("payloadType") != payload_type or not isinstance(sigs, list) or len(sigs) != 1:
        raise _refuse("envelope.format", "envelope: payload type or number of signatures")
    payload = _b64_loose(env["payload"]) or b""
    sig = _b64_loose(sigs[0].get("sig") or "") or b""
    if sigs[0].get("keyid") != hashlib.sha256(pub).hexdigest() or len(sig) != 64 or not _ed25519_ok(pub, sig, pae(payload_type, payload)):
        raise _refuse("envelope.signature", "the envelope is not signed by the key")
    return payload


def _valid_id(s: Any) -> bool:
    return isinstance(s, str) and 0 < len(s) <= 256 and all(0x21 <= ord(c) <= 0x7E for c in s)


def _valid_commitment(s: Any) -> bool:
    return isinstance(s, str) and len(s) == 64 and all(c in "0123456789abcdef" for c in s)


def _validate_statement(s: Dict[str, Any]) -> None:
    import re

    def bad(code: str, msg: str) -> Refused:
        return _refuse("statement." + code, msg)
    if s["_type"] != STATEMENT_TYPE or s["predicateType"] != PREDICATE_TYPE:
        raise bad("format", "not an in-toto Statement v1 of predicate %s" % PREDICATE_TYPE)
    sub = s["subject"]
    if len(sub) != 1 or sub[0]["name"] != "subject-commitment" or not isinstance(sub[0]["digest"], dict) or len(sub[0]["digest"]) != 1:
        raise bad("format", "subject must be one subject-commitment with a single sha256 digest")
    if not _valid_commitment(sub[0]["digest"].get("sha256")):
        raise bad("format", "subject digest must be a sha256 of 64 lower-case hex digits")
    p = s["predicate"]
    if p["claim"] != CLAIM:
        raise bad("claim", "claim is %r" % p["claim"])
    if not _valid_id(p["forget"]):
        raise bad("format", "forget id is empty, too long or not printable")
    prev = None
    for name in ("requested", "committed", "shredded", "erased"):
        t = _parse_time(p["timeline"][name])
        if t["zero"]:
            raise bad("timeline", "timeline: %s missing" % name)
        if not t["utc"]:
            raise bad("timeline", "timeline: %s is not in UTC" % name)
        if prev is not None and t["ns"] < prev:
            raise bad("timeline", "timeline: %s out of order" % name)
        prev = t["ns"]
    k = p["key_evidence"]
    if k["root_store"] not in ROOT_STORES:
        raise bad("format", "key_evidence: unknown root_store")
    if k["epoch"] < 0:
        raise bad("format", "key_evidence: negative epoch")
    rv = k["retired_root_versions"] or []
    for i, v in enumerate(rv):
        if v < 1 or (i > 0 and v <= rv[i - 1]):
            raise bad("format", "key_evidence: retired_root_versions must be positive and strictly ascending")
    if k["root_store"] != "vault-transit-per-subject" and (k["epoch"] < 1 or not rv):
        raise bad("key-evidence", "key_evidence: the root store needs an epoch that retired a root version")
    c = k.get("root_key_config")
    if c:
        if c.get("exportable") or c.get("allow_plaintext_backup"):
            raise bad("key-evidence", "key_evidence: the root key is exportable or allows plaintext backup")
        if c["min_available_version"] < 0 or c["latest_version"] < c["min_available_version"]:
            raise bad("format", "key_evidence: root_key_config versions inconsistent")
        if rv and c["min_available_version"] > 0 and rv[-1] >= c["min_available_version"]:
            raise bad("key-evidence", "key_evidence: a retired root version is still available")
    artifacts: Dict[str, Tuple[Dict[str, Any], Optional[bytes]]] = {}
    for a in p["artifacts"] or []:
        if not _valid_id(a["id"]) or not _valid_id(a["kind"]) or (a["holder"] != "" and not _valid_id(a["holder"])):
            raise bad("format", "artifact: malformed id, kind or holder")
        sig = None if "ack_signature" not in a else _b64_loose(a["ack_signature"])
        if a["closed_by"] == "sealed_key_destroyed":
            if "ack_signature" in a:
                raise bad("format", "ack_signature on a sealed artifact")
        elif a["closed_by"] == "holder_ack":
            if a["holder"] == "" or sig is None or len(sig) != 64:
                raise bad("format", "closed by holder_ack needs a holder and a 64-byte ack_signature")
        else:
            raise bad("format", "unknown closed_by")
        if a["id"] in artifacts:
            raise bad("format", "artifact listed twice")
        artifacts[a["id"]] = (a, sig)
    seen = set()
    for cd in p["conditions"] or []:
        if cd["name"] not in CONDITIONS or cd["name"] in seen:
            raise bad("conditions", "unknown or repeated condition %r" % cd["name"])
        seen.add(cd["name"])
        if cd["status"] != "ok":
            raise bad("conditions", "condition %s is %r, not ok" % (cd["name"], cd["status"]))
        if cd["evidence"].strip(" \t\n\r\v\f\u0085\u00a0") == "":
            raise bad("conditions", "condition %s is ok without evidence" % cd["name"])
    for name in CONDITIONS:
        if name not in seen:
            raise bad("conditions", "condition %s missing" % name)
    closed: Dict[str, bytes] = {}
    for h in p["holder_acks"] or []:
        hpub = None if h["public_key"] is None else _b64_loose(h["public_key"])
        hsig = None if h["signature"] is None else _b64_loose(h["signature"])
        if not _valid_id(p["forget"]) or not _valid_id(h["holder"]):
            raise bad("acks", "malformed forget or holder id")
        arts = h["artifacts"] or []
        if not arts:
            raise bad("acks", "an ack names no artifact")
        if len(set(arts)) != len(arts) or not all(_valid_id(x) for x in arts):
            raise bad("acks", "an ack's artifact id malformed or repeated")
        if hpub is None or len(hpub) != 32:
            raise bad("acks", "an ack's public key is not 32 bytes")
        if hsig is None or len(hsig) != 64 or not _ed25519_ok(hpub, hsig, ack_message(p["forget"], h["holder"], arts)):
            raise bad("acks", "ack of holder %s does not verify" % h["holder"])
        for x in arts:
            a2 = artifacts.get(x)
            if a2 is None or a2[0]["closed_by"] != "holder_ack" or a2[0]["holder"] != h["holder"]:
                raise bad("acks", "an ack names an artifact that is not its holder's")
            if x in closed:
                raise bad("acks", "artifact acked twice")
            closed[x] = hsig
    for aid, (a, sig) in artifacts.items():
        if a["closed_by"] != "holder_ack":
            continue
        if aid not in closed:
            raise bad("acks", "artifact %s is closed by holder_ack but no ack names it" % aid)
        if closed[aid] != sig:
            raise bad("acks", "artifact %s: ack_signature is not that of its ack" % aid)
    kinds = set()
    for r in p["residuals"] or []:
        if not re.match(r"^[a-z][a-z0-9_]{0,63}\Z", r["kind"]) or r["description"].strip(" \t\n\r\v\f\u0085\u00a0") == "":
            raise bad("residuals", "residual %r malformed" % r["kind"])
        kinds.add(r["kind"])
    if "root_store_snapshots" not in kinds:
        raise bad("residuals", "residual root_store_snapshots missing")
    if p["holder_acks"] and "holder_trust" not in kinds:
        raise bad("residuals", "residual holder_trust missing")


def _open_statement(data: bytes, pub: bytes) -> Dict[str, Any]:
    payload = _open_envelope(data, pub, PAYLOAD_TYPE)
    st = _parse_json(payload)
    if not isinstance(st, dict):
        raise _refuse("json.schema", "statement: not a JSON object")
    try:
        canon = _marshal_statement(st)
    except _Schema as e:
        raise _refuse("json.schema", "statement: %s" % e) from None
    if canon.encode("utf-8") != payload:
        raise _refuse("json.schema", "statement is not in canonical form")
    _validate_statement(st)
    return st


def _open_event(data: bytes, pub: bytes) -> Dict[str, Any]:
    payload = _open_envelope(data, pub, EVENT_PAYLOAD_TYPE)
    ev = _parse_json(payload)
    if not isinstance(ev, dict):
        raise _refuse("json.schema", "event: not a JSON object")
    try:
        canon = _marshal_event(ev)
    except _Schema as e:
        raise _refuse("json.schema", "event: %s" % e) from None
    if canon.encode("utf-8") != payload:
        raise _refuse("json.schema", "event is not in canonical form")
    bad = _refuse("event.format", "malformed event")
    if ev["_type"] != EVENT_TYPE:
        raise bad
    t = _parse_time(ev["time"])
    if t["zero"] or not ev["time"].endswith("Z"):
        raise bad
    parts = [k for k in ("key", "forget", "epoch", "ack", "attested") if ev.get(k) is not None]
    kind_part = {"key_created": "key", "forget_committed": "forget", "epoch_completed": "epoch", "holder_ack": "ack",
                 "erasure_attested": "attested"}
    if len(parts) != 1 or kind_part.get(ev["event"]) != parts[0]:
        raise bad
    x = ev[parts[0]]
    if parts[0] == "key":
        ok = _valid_commitment(x["subject"]) and x["generation"] != 0
    elif parts[0] == "forget":
        ok = _valid_id(x["forget"]) and _valid_commitment(x["subject"]) and x["barrier"] >= 0 and x["key_created_index"] >= -1
    elif parts[0] == "epoch":
        ok = x["epoch"] > 0 and x["to_version"] >= x["from_version"] and x.get("retired_versions") is not None and _valid_id(x["root_store"])
    elif parts[0] == "ack":
        pk = _b64_loose(x["public_key"]) if x.get("public_key") else None
        sg = _b64_loose(x["signature"]) if x.get("signature") else None
        ok = (_valid_id(x["forget"]) and _valid_id(x["holder"]) and pk is not None and len(pk) == 32 and sg is not None
              and len(sg) == 64 and x["artifacts"] > 0 and _valid_commitment(x["message_sha256"]))
    else:
        ok = _valid_id(x["forget"]) and _valid_commitment(x["subject"]) and _valid_commitment(x["attestation_sha256"])
    if not ok:
        raise bad
    return ev


_ENTRY_RE = None
_FIXED_FILES = ("README.txt", "check-inclusion.py", "attestation.json", "attestation.pub", "log.vkey", "checkpoint", "consistency.proof")


@dataclass
class _Entry:
    index: int
    event: str
    name: str
    data: Optional[bytes] = None
    proof: Optional[bytes] = None


def read_export(export: bytes) -> Tuple[str, Dict[str, bytes], List[_Entry]]:
    """read_export reads an export archive strictly (bundle.ReadBytes) and
    returns the forget id, its fixed files and its entries in log order."""
    import re
    global _ENTRY_RE
    if _ENTRY_RE is None:
        _ENTRY_RE = re.compile(r"^entry-(0|[1-9][0-9]{0,18})-([a-z_]{1,32})\.(json|tlog-proof)\Z")
    members = untar_strict(gunzip_strict(export))
    forget = ""
    files: Dict[str, bytes] = {}
    entries: Dict[str, _Entry] = {}
    total = 0
    for m in members:
        d, _, name = m.name.partition("/")
        f = d[len("shredd-export-"):] if d.startswith("shredd-export-") else None
        if (f is None or len(f) != 32 or any(c not in "0123456789abcdef" for c in f) or (forget and f != forget) or "/" in name
                or (m.is_dir and name) or (not m.is_dir and not name)):
            raise _refuse("bundle.layout", "%r is not a file of one shredd-export-<forget id> directory" % m.name)
        forget = f
        if m.is_dir:
            continue
        total += len(m.data)
        if name in _FIXED_FILES:
            files[name] = m.data
            continue
        em = _ENTRY_RE.match(name)
        if em is None:
            raise _refuse("bundle.unknown-file", "unknown file %s" % name)
        if len(m.data) > MAX_ENTRY:
            raise _refuse("bundle.size", "%s is over %d bytes" % (name, MAX_ENTRY))
        if len(em.group(1)) > 16 or int(em.group(1)) > MAX_SAFE_INTEGER:
            raise _refuse("bundle.unknown-file", "unknown file %s" % name)
        base = name.rsplit(".", 1)[0]
        e = entries.setdefault(base, _Entry(index=int(em.group(1)), event=em.group(2), name=base))
        if em.group(3) == "json":
            e.data = m.data
        else:
            e.proof = m.data
    if total > MAX_TOTAL:
        raise _refuse("bundle.size", "over %d bytes in all" % MAX_TOTAL)
    for f in ("README.txt", "attestation.json", "attestation.pub", "log.vkey", "checkpoint", "check-inclusion.py"):
        if f not in files:
            raise _refuse("bundle.missing-file", "%s is missing" % f)
    ordered = sorted(entries.values(), key=lambda e: (e.index, e.event.encode()))
    for e in ordered:
        if e.data is None or e.proof is None:
            raise _refuse("bundle.missing-file", "%s needs both its .json and its .tlog-proof" % e.name)
    return forget, files, ordered


@dataclass(frozen=True)
class ExportReport:
    """ExportReport is what verify_export established."""
    forget: str
    commitment: str
    origin: str
    tree_size: int
    entries: List[str]
    subject_checked: bool
    consistent: bool


def verify_export(export: bytes, key_file: bytes, log_key_file: bytes, *, subject: Optional[str] = None,
                  salt: Optional[str] = None, saved: Optional[bytes] = None) -> ExportReport:
    """verify_export is ``shredd verify EXPORT.tar.gz --key --log-key
    [--subject --salt] [--checkpoint]``: the key files (attestation.pub and
    log.vkey, obtained out of band, as bytes), the archive read strictly,
    the attestation, the subject commitment (given subject and salt hex),
    the checkpoint, every entry and its inclusion proof, that the entries
    are this forget's, and consistency with a saved checkpoint. Raises
    Refused, whose reason is the spec's reason code: the one shredd verify
    and the page give for the same inputs."""
    if (subject is None) != (salt is None):
        raise ValueError("give both the subject id and the salt, or neither")
    pub = check_public_key_file(key_file)
    vk = _parse_vkey_strict(check_log_key_file(log_key_file))
    forget, files, entries = read_export(export)
    att = files["attestation.json"]
    try:
        st = _open_statement(att, pub)
    except Refused as e:
        raise Refused(e.reason, "attestation.json: " + str(e)) from None
    p = st["predicate"]
    if p["forget"] != forget:
        raise _refuse("statement.forget", "attestation.json is about forget %s, the export about %s" % (p["forget"], forget))
    commit = st["subject"][0]["digest"]["sha256"]
    if subject is not None and salt is not None:
        if commitment(subject, salt) != commit:
            raise _refuse("subject.mismatch", "the subject id and salt do not open the commitment")
    cp_bytes = files["checkpoint"]
    origin, size, root = _open_note(cp_bytes, vk, ("checkpoint.format", "checkpoint.signature", "checkpoint.origin"))
    events: Dict[str, List[Tuple[int, Dict[str, Any]]]] = {}
    for en in entries:
        assert en.proof is not None and en.data is not None
        _check_text(en.proof)
        index, path, cpb = _parse_proof_strict(en.proof)
        if index != en.index:
            raise _refuse("proof.index", "%s.tlog-proof proves index %d" % (en.name, index))
        if cpb != cp_bytes:
            raise _refuse("proof.checkpoint", "%s.tlog-proof is against another checkpoint" % en.name)
        try:
            ok = index < size and inclusion_root(en.data, index, size, path) == root
        except VerifyError:
            ok = False
        if not ok:
            raise _refuse("proof.inclusion", "%s: entry %d not in tree %d" % (en.name, index, size))
        try:
            ev = _open_event(en.data, pub)
        except Refused as x:
            raise Refused(x.reason, en.name + ".json: " + str(x)) from None
        if ev["event"] != en.event:
            raise _refuse("event.kind", "%s.json holds a %s event" % (en.name, ev["event"]))
        events.setdefault(ev["event"], []).append((en.index, ev))

    def fail(msg: str) -> Refused:
        return _refuse("entries.mismatch", msg)

    def one(kind: str) -> Tuple[int, Dict[str, Any]]:
        if len(events.get(kind, [])) != 1:
            raise fail("%d %s entries, want 1" % (len(events.get(kind, [])), kind))
        return events[kind][0]
    fci, fc = one("forget_committed")
    if fc["forget"]["forget"] != forget or fc["forget"]["subject"] != commit:
        raise fail("the forget_committed entry is about another forget or commitment")
    eai, ea = one("erasure_attested")
    a = ea["attested"]
    if a["forget"] != forget or a["subject"] != commit or a["attestation_sha256"] != hashlib.sha256(att).hexdigest():
        raise fail("the erasure_attested entry does not name this attestation")
    if eai <= fci:
        raise fail("the attestation was logged before the forget committed")
    kc = events.get("key_created", [])
    kci = fc["forget"]["key_created_index"]
    if kci < 0 and not kc:
        pass
    elif kci < 0 or len(kc) != 1 or kc[0][0] != kci:
        raise fail("the key_created entry is not the one the forget_committed entry names")
    elif kc[0][1]["key"]["generation"] != fc["forget"]["generation"]:
        raise fail("the key_created entry is of another generation")
    elif kc[0][1]["key"]["subject"] == commit and kc[0][0] >= fci:
        raise fail("the key was logged as created after its forget")
    if len(kc) > 1:
        raise fail("more than one key_created entry")
    acks = events.get("holder_ack", [])
    if len(acks) != len(p["holder_acks"] or []):
        raise fail("%d holder_ack entries for %d holder acks" % (len(acks), len(p["holder_acks"] or [])))
    for h in p["holder_acks"] or []:
        msg = hashlib.sha256(ack_message(forget, h["holder"], h["artifacts"])).hexdigest()
        if not any(x["ack"]["forget"] == forget and x["ack"]["holder"] == h["holder"] and x["ack"]["public_key"] == h["public_key"]
                   and x["ack"]["artifacts"] == len(h["artifacts"]) and x["ack"]["message_sha256"] == msg
                   and x["ack"]["signature"] == h["signature"] and fci < i < eai for i, x in acks):
            raise fail("holder %s's ack is not logged between the forget's commit and its attestation" % h["holder"])
    ke = p["key_evidence"]
    if ke["epoch"] > 0:
        epi, ep = one("epoch_completed")
        if (ep["epoch"]["epoch"] != ke["epoch"] or (ep["epoch"]["retired_versions"] or []) != (ke["retired_root_versions"] or [])
                or not fci < epi < eai):
            raise fail("the epoch_completed entry is not the attestation's epoch")
    elif events.get("epoch_completed"):
        raise fail("an epoch_completed entry for an attestation without an epoch")
    consistent = False
    if saved is not None:
        o_origin, o_size, o_root = _open_note(saved, vk, ("saved.format", "saved.signature", "saved.origin"))
        if o_size > size:
            raise _refuse("consistency.newer", "the saved checkpoint is newer than the export's")
        if o_size == size:
            if o_root != root:
                raise _refuse("consistency.fork", "two trees of size %d: the log was forked or rewritten" % size)
        else:
            cons = files.get("consistency.proof")
            if cons is None:
                raise _refuse("consistency.missing", "no consistency.proof in the export: ask for one with since=%d" % o_size)
            _check_text(cons)
            po, pn, hashes = _parse_consistency_strict(cons)
            if po != o_size or pn != size:
                raise _refuse("consistency.range", "consistency.proof goes from %d to %d, not from %d to %d" % (po, pn, o_size, size))
            try:
                check_consistency(Checkpoint(o_origin, o_size, o_root, saved), Checkpoint(origin, size, root, cp_bytes), cons)
            except VerifyError:
                raise _refuse("consistency.fork", "the export's log does not extend the saved checkpoint") from None
        consistent = True
    return ExportReport(forget=forget, commitment=commit, origin=origin, tree_size=size, entries=[e.name for e in entries],
                        subject_checked=subject is not None, consistent=consistent)
