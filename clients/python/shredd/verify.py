"""Offline checks of what shredd signs: erasure attestations
(docs/attestation.md), holder-ack messages, checkpoints, inclusion and
consistency proofs, witnesses' cosignatures (docs/transparency.md).

The Merkle checks (inclusion_root, check_consistency, commitment) need
only the standard library; signatures (Ed25519) need the ``cryptography``
package (``pip install ./clients/python[holder]`` or Debian's
python3-cryptography), imported only when a signature is checked.

verify_export reads a regulator export as ``shredd verify`` and the page
do, and verify_attestation a bare attestation file as ``shredd verify
FILE.json`` does, by the strict rules of docs/transparency.md ("Reading an
export strictly", "Reading a bare attestation"): on every input they give
their verdict and their reason code (Refused.reason), which the shared
corpus under testdata/evidence pins (tests/test_evidence.py). A caller's
error (what the CLI calls a usage error: a salt that is not exactly 64
hex digits, a subject without a salt, witnesses_required out of range) is
a ValueError, never a refusal of the evidence.

Every rule is read in bytes and code points as the spec lists them, each
by its own small function (_blank, _is_ws, _b64_canonical, _parse_salt,
_key_file_line, _note_split ...): nothing here trims, strips or splits on
the language's idea of a space, and base64 and hex are decoded only in
their one canonical spelling.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from .errors import Error

__all__ = [
    "VerifyError", "ack_message", "probe_message", "commitment", "pae", "load_public_key", "verify_attestation", "Attestation",
    "Checkpoint", "open_checkpoint", "parse_inclusion_proof", "check_inclusion", "parse_consistency_proof",
    "check_consistency", "leaf_hash", "Refused", "verify_export", "ExportReport", "read_export", "gunzip_strict",
    "untar_strict", "TarMember", "check_json", "check_public_key_file", "check_log_key_file", "check_witness_key_file",
    "WitnessKey", "WitnessReport", "Cosignature",
]

PAYLOAD_TYPE = "application/vnd.in-toto+json"
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://shredd.dev/attestation/erasure/v1"
CLAIM = "cryptographically erased"
CONDITIONS = ("cascade_closed", "workers_quiesced", "read_path_converged", "closure_intact", "backups_epoch")
LABEL_HOLDER_ACK = "shredd/v1/holder-ack"
LABEL_HOLDER_PROBE = "shredd/v1/holder-probe"
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


def probe_message(probe: str, forget: str, holder: str, nonce: str, artifacts: Sequence[str],
                  markers: Optional[Sequence[str]] = None, found: Optional[Sequence[str]] = None) -> bytes:
    """probe_message returns the exact bytes a holder signs to answer a
    probe (attest.ProbeMessage, attestation.md §6a): UTF-8, every line
    ending in LF: the label, the probe, forget, holder and nonce lines, then
    one line per artifact asked, per marker asked and per thing found, each
    group sorted bytewise. It checks nothing: it is the message as given."""
    lines = [LABEL_HOLDER_PROBE, "probe " + probe, "forget " + forget, "holder " + holder, "nonce " + nonce]
    for word, ids in (("asked", artifacts), ("marker", markers), ("found", found)):
        lines += [word + " " + x for x in sorted(ids or [], key=lambda s: s.encode("utf-8", "surrogatepass"))]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _check_ident(what: str, v: str) -> None:
    # Identifiers are 1 to 256 bytes of printable ASCII without spaces, so
    # the message has one reading.
    if not 1 <= len(v) <= 256 or any(not (0x21 <= ord(c) <= 0x7E) for c in v):
        raise ValueError("shredd: the %s id must be 1 to 256 printable ASCII characters without spaces" % what)


def commitment(subject: str, salt_hex: str) -> str:
    """commitment returns the salted commitment to a subject id
    (attestation.md §5): hex SHA-256("shredd/v1/subject-commitment" ‖
    0x00 ‖ salt ‖ subject id as UTF-8). salt_hex is exactly 64 hex digits
    (_parse_salt: nothing else, no space, no 0x), else ValueError."""
    return _commitment(subject, _parse_salt(salt_hex))


def _commitment(subject: str, salt: bytes) -> str:
    return hashlib.sha256(LABEL_COMMITMENT + b"\x00" + salt + subject.encode("utf-8")).hexdigest()


_HEX = frozenset("0123456789abcdefABCDEF")


def _is_hex(s: str) -> bool:
    return all(c in _HEX for c in s)


def _is_lower_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)


def _parse_salt(salt_hex: Any) -> bytes:
    """_parse_salt reads a verifier's salt (transparency.md §10a, R9):
    exactly 64 hex digits, either case, nothing else. Anything else is the
    caller's error (ValueError), never a refusal of the evidence."""
    if not isinstance(salt_hex, str) or len(salt_hex) != 64 or not _is_hex(salt_hex):
        raise ValueError("shredd: the salt must be exactly 64 hex digits (0-9, a-f, A-F), nothing else")
    return binascii.unhexlify(salt_hex)


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
    """load_public_key returns the raw 32-byte Ed25519 public key of an
    attestation key file (attestation.pub: the one PEM form of
    transparency.md §10a.1, read by check_public_key_file; a str is the
    file's text) or of raw bytes (exactly 32, taken as they are). Raises
    Refused (text.*, key.*) for any other file."""
    if isinstance(key, (bytes, bytearray, memoryview)) and len(key) == 32:
        return bytes(key)
    if isinstance(key, str):
        key = key.encode("utf-8")
    return check_public_key_file(bytes(key))


def _verify_sig(pub: bytes, sig: bytes, msg: bytes, what: str) -> None:
    ed25519 = _ed25519()
    from cryptography.exceptions import InvalidSignature
    try:
        ed25519.Ed25519PublicKey.from_public_bytes(pub).verify(sig, msg)
    except (InvalidSignature, ValueError):
        raise VerifyError("%s: the signature does not verify" % what) from None


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

    @property
    def probes(self) -> List[Dict[str, Any]]:
        """probes are the holders' signed answers to the probes that closed
        their artifacts after their acks (attestation.md §6a); empty when
        no holder offers probes."""
        return list(self.predicate.get("probes") or [])


def _check_subject_type(subject: Any, salt: Any) -> None:
    """A subject id is a str and a salt its hex as a str (TypeError
    otherwise): an id is compared as UTF-8 text, never as bytes."""
    if subject is not None and not isinstance(subject, str):
        raise TypeError("shredd: the subject id is a str, not %s" % type(subject).__name__)
    if salt is not None and not isinstance(salt, str):
        raise TypeError("shredd: the salt is its 64 hex digits as a str, not %s" % type(salt).__name__)


def verify_attestation(data: bytes, public_key: Union[bytes, str], *, subject: Optional[str] = None,
                       salt: Optional[str] = None, forget: Optional[str] = None) -> Attestation:
    """verify_attestation reads an attestation file (a DSSE envelope) alone
    as ``shredd verify FILE.json`` does (transparency.md, "Reading a bare
    attestation"), with the strict reader of verify_export and its reason
    codes, in this order: the key file; the file's size (at most 64 MiB,
    ``bundle.size``); the envelope's JSON (``json.*``), canonical form
    (``json.schema``), payload type and signature count
    (``envelope.format``), key id and signature (``envelope.signature``);
    the statement's JSON, canonical form and rules (``statement.*``: the
    claim, the timeline, the five conditions ok with evidence that is not
    blank, every holder ack's signature, every holder probe answer, the
    residuals); then, when given,
    the forget id (``statement.forget``) and the subject commitment
    (``subject.mismatch``).

    public_key is the service's key: an attestation.pub file's bytes (or
    its text as a str), read by the key file rules (``text.*``,
    ``key.*``), or the raw 32-byte Ed25519 key, which skips that step.
    subject and salt (hex, the forget's commitment_salt) go together.
    Raises Refused, a VerifyError whose reason is the spec's code, or
    ValueError for a caller's error (a salt that is not exactly 64 hex
    digits, a subject without a salt or the other way round, no key).
    Returns the verified Attestation."""
    _check_subject_type(subject, salt)
    if (subject is None) != (salt is None) or subject == "":
        raise ValueError("shredd: the commitment needs both the subject id and the salt")
    salt_bytes = None if salt is None else _parse_salt(salt)
    if public_key is None:
        raise ValueError("shredd: verify_attestation needs the service's public key")
    pub = load_public_key(public_key)
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_FILE:
        raise _refuse("bundle.size", "the attestation file is over %d bytes" % MAX_FILE)
    st = _open_statement(bytes(data), pub)
    p = st["predicate"]
    commit = st["subject"][0]["digest"]["sha256"]
    if forget is not None and p["forget"] != forget:
        raise _refuse("statement.forget", "the attestation is about forget %r, not %r" % (p["forget"], forget))
    if subject is not None and salt_bytes is not None and _commitment(subject, salt_bytes) != commit:
        raise _refuse("subject.mismatch", "the subject id and salt do not open the commitment")
    return Attestation(forget=p["forget"], commitment=commit, key_id=hashlib.sha256(pub).hexdigest(), predicate=p)


# --- the transparency log -------------------------------------------------


def leaf_hash(entry: bytes) -> bytes:
    """leaf_hash is the RFC 6962 leaf hash of an entry: SHA-256(0x00 ‖ entry)."""
    return hashlib.sha256(b"\x00" + entry).digest()


def _node(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


@dataclass(frozen=True)
class Checkpoint:
    """Checkpoint is an opened signed checkpoint: origin, tree size and
    root hash."""
    origin: str
    size: int
    root: bytes
    text: bytes = field(repr=False)


def open_checkpoint(note: bytes, vkey: str) -> Checkpoint:
    """open_checkpoint checks a signed checkpoint (C2SP signed note) under
    the log's verifier key (``log.vkey``: its one line, with or without a
    final LF) by the strict rules of verify_export (transparency.md
    §10a.8) and returns it. Raises Refused (``logkey.format``,
    ``text.*``, ``checkpoint.*``)."""
    vk = _parse_log_key(_key_file_line(vkey.encode("utf-8"), "logkey.format"))
    origin, size, root, _, _ = _open_note(note, vk, _CHECKPOINT_CODES)
    return Checkpoint(origin=origin, size=size, root=root, text=note)


def parse_inclusion_proof(proof: bytes) -> Tuple[int, List[bytes], bytes]:
    """parse_inclusion_proof splits a c2sp.org/tlog-proof@v1 proof into the
    index, the audit path and the checkpoint it is against, read strictly
    (Refused: ``text.*``, ``proof.format``)."""
    _check_text(proof)
    return _parse_proof_strict(proof)


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
    old size, new size, hashes, read strictly (Refused: ``text.*``,
    ``consistency.format``)."""
    _check_text(proof)
    return _parse_consistency_strict(proof)


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


def _tar_path(raw: bytes) -> str:
    """_tar_path reads a member's path (R4) in its canonical spelling only:
    UTF-8, not empty, not absolute, no empty, "." or ".." segment before
    one final "/" (``tar.path``)."""
    try:
        name = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse("tar.path", "a path that is not UTF-8") from None
    p = name[:-1] if name.endswith("/") else name
    if p == "" or any(seg in ("", ".", "..") for seg in p.split("/")):
        raise _refuse("tar.path", "%r is not a path in its canonical spelling" % name)
    return name


def _tar_path_key(name: str, is_dir: bool) -> str:
    """_tar_path_key is what two members share when they are the same path
    (R4): the path without a directory's final "/". A file's path ending
    in "/" is ``tar.path`` (checked, as in bundle.Untar, once the member's
    data is known to be there)."""
    if not name.endswith("/"):
        return name
    if not is_dir:
        raise _refuse("tar.path", "a file path ending in /")
    return name[:-1]


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
        name = _tar_path(px + b"/" + nm if px else nm)
        if typ == b"5" and size != 0:
            raise _refuse("tar.header", "a directory with data")
        if size > MAX_FILE:
            raise _refuse("bundle.size", "a file over %d bytes" % MAX_FILE)
        end = off + 512 + size
        pad = (512 - size % 512) % 512
        if end + pad > len(t):
            raise _refuse("tar.truncated", "tar data cut")
        key = _tar_path_key(name, typ == b"5")
        if key in seen:
            raise _refuse("tar.duplicate", "a path twice")
        seen.add(key)
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


_SPKI_ED25519 = b"\x30\x2a\x30\x05\x06\x03\x2b\x65\x70\x03\x21\x00"


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


# --- the two character sets of the spec (transparency.md §10a, R1) ---------
#
# Listed here as the spec lists them, never the language's idea of a space
# (Python's own notion of a space, in its trim and split, differs from Go's and JavaScript's).

# WS: Unicode White_Space (Go's unicode.IsSpace), 25 code points.
_WS_RANGES = ((0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0), (0x1680, 0x1680), (0x2000, 0x200A),
              (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))

# INVISIBLE: White_Space ∪ Cc ∪ Cf ∪ Default_Ignorable_Code_Point (Unicode 15.1).
_INVISIBLE_RANGES = (
    (0x0000, 0x0020), (0x007F, 0x00A0), (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x1680, 0x1680),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2000, 0x200F), (0x2028, 0x202F), (0x205F, 0x206F), (0x3000, 0x3000),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)


def _in_ranges(c: str, ranges: Tuple[Tuple[int, int], ...]) -> bool:
    o = ord(c)
    return any(lo <= o <= hi for lo, hi in ranges)


def _is_ws(c: str) -> bool:
    """_is_ws: c is in the spec's WS set."""
    return _in_ranges(c, _WS_RANGES)


def _blank(s: str) -> bool:
    """_blank: every code point of s is in the spec's INVISIBLE set (the
    empty string included). Nothing is trimmed: " x " is not blank."""
    return all(_in_ranges(c, _INVISIBLE_RANGES) for c in s)


# --- key files (R3) ----------------------------------------------------------


def _key_file_line(b: bytes, code: str) -> str:
    """_key_file_line reads a one-line key file: the text rules (text.bom,
    text.utf8), then exactly LINE or LINE LF, LINE non-empty without LF;
    anything else is code."""
    s = _check_text(b)
    if s.endswith("\n"):
        s = s[:-1]
    if s == "" or "\n" in s:
        raise _refuse(code, "not one line")
    return s


def _valid_note_name(n: str) -> bool:
    """_valid_note_name: a signed-note key name is non-empty and holds no
    code point of WS and no "+"."""
    return n != "" and "+" not in n and not any(_is_ws(c) for c in n)


_B64_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _b64_canonical(s: str) -> Optional[bytes]:
    """_b64_canonical decodes standard base64 with padding in its one
    spelling (R6): a length that is a multiple of 4, the alphabet and at
    most two final "=", nothing else (no space, CR, LF or tab), and the
    unused bits of the last character zero. None for anything else."""
    body = s[:-2] + s[-2:].replace("=", "") if s[-2:] == "==" else s[:-1] if s[-1:] == "=" else s
    if len(s) % 4 or any(c not in _B64_ALPHABET for c in body):
        return None
    try:
        b = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None
    return b if base64.b64encode(b).decode("ascii") == s else None


def _parse_key_line(line: str, alg: int, code: str) -> Tuple[str, bytes, bytes]:
    """_parse_key_line reads NAME "+" HASH "+" KEY (R3): NAME a note name,
    HASH exactly 8 lower-case hex digits (as shredd and C2SP tools write
    them), KEY canonical base64 of 33 bytes whose
    first is alg, HASH the first 4 bytes of SHA-256(NAME LF KEY). Returns
    the name, the key hash (4 bytes) and the 32-byte Ed25519 key;
    anything else is code."""
    name, plus1, rest = line.partition("+")
    h, plus2, k = rest.partition("+")
    key = _b64_canonical(k)
    if (not plus1 or not plus2 or not _valid_note_name(name) or len(h) != 8 or not _is_lower_hex(h) or key is None
            or len(key) != 33 or key[0] != alg):
        raise _refuse(code, "not NAME+HASH+KEY of an Ed25519 key of type 0x%02x" % alg)
    want = hashlib.sha256(name.encode("utf-8") + b"\n" + key).digest()[:4]
    if binascii.unhexlify(h) != want:
        raise _refuse(code, "the key hash does not match the name and key")
    return name, want, key[1:]


def check_log_key_file(b: bytes) -> str:
    """check_log_key_file reads a log verifier key file (R3): the text
    rules, then exactly one line NAME+HASH+KEY of an Ed25519 note key
    (type 0x01) with an optional final LF, nothing before or after
    (``logkey.format``). Returns the line."""
    line = _key_file_line(b, "logkey.format")
    _parse_log_key(line)
    return line


def _parse_log_key(line: str) -> Tuple[str, bytes, bytes]:
    return _parse_key_line(line, 0x01, "logkey.format")


@dataclass(frozen=True)
class WitnessKey:
    """WitnessKey is a witness's cosignature/v1 verifier key, read from
    its key file by check_witness_key_file: its name, key ID (4 bytes)
    and Ed25519 public key."""
    name: str
    key_id: bytes
    public_key: bytes = field(repr=False)


def check_witness_key_file(b: Union[bytes, str]) -> WitnessKey:
    """check_witness_key_file reads a witness key file (R3; a str is the
    file's text): the text rules (``text.bom``, ``text.utf8``), then
    exactly one line NAME+KEYID+KEY of a cosignature/v1 key (type 0x04)
    with an optional final LF, nothing else (``witness.format``)."""
    if isinstance(b, str):
        b = b.encode("utf-8")
    name, kid, pub = _parse_key_line(_key_file_line(bytes(b), "witness.format"), 0x04, "witness.format")
    return WitnessKey(name=name, key_id=kid, public_key=pub)


def _read_witness_keys(files: Sequence[Union[bytes, str]]) -> List[WitnessKey]:
    """_read_witness_keys reads every witness key file in order; a key
    whose public key, or whose name and key ID, an earlier one has is
    ``witness.duplicate``."""
    keys: List[WitnessKey] = []
    for f in files:
        k = check_witness_key_file(f)
        if any(x.public_key == k.public_key or (x.name, x.key_id) == (k.name, k.key_id) for x in keys):
            raise _refuse("witness.duplicate", "witness key %s is given twice" % k.name)
        keys.append(k)
    return keys


def _b64_loose(s: str) -> Optional[bytes]:
    # Go's base64.StdEncoding.DecodeString, for JSON fields only (their
    # canonical spelling is checked by the canonical-form comparison):
    # padded, non-zero padding bits allowed.
    if len(s) % 4 or any(c not in _B64_ALPHABET and c != "=" for c in s):
        return None
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None


def _ed25519_ok(pub: bytes, sig: bytes, msg: bytes) -> bool:
    try:
        _verify_sig(pub, sig, msg, "")
        return True
    except VerifyError:
        return False


# --- signed notes (R5) ---------------------------------------------------------

_CHECKPOINT_CODES = ("checkpoint.format", "checkpoint.signature", "checkpoint.origin")
_SAVED_CODES = ("saved.format", "saved.signature", "saved.origin")
_MAX_SIG_LINES = 100


def _note_split(s: str, fmt: str) -> Tuple[str, str]:
    """_note_split cuts a note (R5.1-2): no code point below U+0020 but LF;
    the text is everything up to and including the first LF of the last
    LF LF, the signature block the rest, non-empty and ending in LF."""
    if any(c < " " and c != "\n" for c in s):
        raise _refuse(fmt, "malformed note: a control character")
    cut = s.rfind("\n\n")
    if cut < 0:
        raise _refuse(fmt, "malformed note: no signature block")
    text, block = s[:cut + 1], s[cut + 2:]
    if block == "" or not block.endswith("\n"):
        raise _refuse(fmt, "malformed note: the signature block is empty or does not end in LF")
    return text, block


def _note_sig_line(line: str, fmt: str) -> Tuple[str, bytes]:
    """_note_sig_line reads one signature line (R5.3): EM DASH, one
    space, NAME, one space, SIG (canonical base64 of at least 5 bytes,
    the first 4 the key hash)."""
    if not line.startswith("\u2014 "):
        raise _refuse(fmt, "malformed note: a signature line does not start with an em dash and a space")
    name, sp, b64 = line[2:].partition(" ")
    sig = _b64_canonical(b64) if sp else None
    if not _valid_note_name(name) or sig is None or len(sig) < 5:
        raise _refuse(fmt, "malformed note: a malformed signature line")
    return name, sig


def _note_sigs(block: str, fmt: str) -> List[Tuple[str, bytes]]:
    """_note_sigs reads the signature block (R5.3-4): at most 100 lines,
    each well formed, no two with the same name and key hash."""
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIG_LINES:
        raise _refuse(fmt, "malformed note: more than %d signature lines" % _MAX_SIG_LINES)
    sigs: List[Tuple[str, bytes]] = []
    seen = set()
    for line in lines:
        name, sig = _note_sig_line(line, fmt)
        if (name, sig[:4]) in seen:
            raise _refuse(fmt, "malformed note: two signature lines of %s with one key hash" % name)
        seen.add((name, sig[:4]))
        sigs.append((name, sig))
    return sigs


def _checkpoint_body(text: str, fmt: str) -> Tuple[str, int, bytes]:
    """_checkpoint_body reads the note text as a checkpoint (R5.6): the
    origin, a decimal size within 2^53-1, a hash of 32 bytes in canonical
    base64, non-empty extension lines."""
    lines = text[:-1].split("\n")
    size = _dec(lines[1]) if len(lines) >= 3 else None
    root = _hash_or_none(lines[2]) if len(lines) >= 3 else None
    if size is None or root is None or lines[0] == "" or any(x == "" for x in lines[3:]):
        raise _refuse(fmt, "malformed checkpoint")
    return lines[0], size, root


def _open_note(b: bytes, vk: Tuple[str, bytes, bytes], codes: Tuple[str, str, str]
               ) -> Tuple[str, int, bytes, bytes, List[Tuple[str, bytes]]]:
    """_open_note opens a signed checkpoint (R5, with the codes given:
    format, signature, origin): the text rules, the note's grammar, the
    log key's line present and valid (lines of other keys ignored), the
    checkpoint, its origin the key's name. Returns the origin, size and
    root, the note text and its signature lines."""
    fmt, sigc, origc = codes
    text, block = _note_split(_check_text(b), fmt)
    sigs = _note_sigs(block, fmt)
    name, khash, pub = vk
    mine = [sig for who, sig in sigs if who == name and sig[:4] == khash]
    tb = text.encode("utf-8")
    if not mine:
        raise _refuse(sigc, "verification failed: no signature by the log key")
    if len(mine[0]) != 4 + 64 or not _ed25519_ok(pub, mine[0][4:], tb):
        raise _refuse(sigc, "verification failed: invalid signature by the log key")
    origin, size, root = _checkpoint_body(text, fmt)
    if origin != name:
        raise _refuse(origc, "verification failed: origin %r signed by key %r" % (origin, name))
    return origin, size, root, tb, sigs


# --- witnesses' cosignatures (R5.8, transparency.md §13) ----------------------

_MAX_INT64 = (1 << 63) - 1


@dataclass(frozen=True)
class Cosignature:
    """Cosignature is a witness's valid cosignature of the checkpoint:
    the witness's key name and the time it states, in POSIX seconds
    (any value up to 2^63-1; ``date`` is it as a UTC date when its year
    is 1 to 9999, else None)."""
    witness: str
    time: int

    @property
    def date(self) -> Optional[str]:
        """date is time as an RFC 3339 UTC date, None beyond years 1 to 9999."""
        import datetime
        try:
            d = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=self.time)
        except OverflowError:
            return None
        return d.strftime("%Y-%m-%dT%H:%M:%SZ") if d.year >= 1 else None


@dataclass(frozen=True)
class WitnessReport:
    """WitnessReport says which trusted witnesses cosigned the checkpoint:
    valid (in the order of the keys given), missing (no line of theirs)
    and invalid (a line that does not verify: it counts as none)."""
    required: int
    valid: List[Cosignature]
    missing: List[str]
    invalid: List[str]


def _cosignature_message(t: int, text: bytes) -> bytes:
    return b"cosignature/v1\ntime " + str(t).encode("ascii") + b"\n" + text


def _cosignature(w: WitnessKey, sig: bytes, text: bytes) -> Optional[int]:
    """_cosignature checks a witness's line's signature (key ID, 8-byte
    big-endian timestamp at most 2^63-1, Ed25519 over the cosignature/v1
    message): its time when valid, else None."""
    if len(sig) != 4 + 8 + 64:
        return None
    t = int.from_bytes(sig[4:12], "big")
    if t > _MAX_INT64 or not _ed25519_ok(w.public_key, sig[12:], _cosignature_message(t, text)):
        return None
    return t


def _check_cosignatures(text: bytes, sigs: List[Tuple[str, bytes]], witnesses: List[WitnessKey],
                        required: int) -> WitnessReport:
    """_check_cosignatures reads each trusted witness's line of an opened
    checkpoint (missing, valid or invalid); fewer valid than required is
    ``checkpoint.witnesses``."""
    rep = WitnessReport(required=required, valid=[], missing=[], invalid=[])
    for w in witnesses:
        line = [sig for who, sig in sigs if who == w.name and sig[:4] == w.key_id]
        if not line:
            rep.missing.append(w.name)
            continue
        t = _cosignature(w, line[0], text)
        if t is None:
            rep.invalid.append(w.name)
        else:
            rep.valid.append(Cosignature(witness=w.name, time=t))
    if len(rep.valid) < required:
        raise _refuse("checkpoint.witnesses", "checkpoint: %d valid of the %d required cosignatures (missing: %s; invalid: %s)"
                      % (len(rep.valid), required, ", ".join(rep.missing) or "none", ", ".join(rep.invalid) or "none"))
    return rep


def _dec(s: str) -> Optional[int]:
    if not s or not s.isascii() or not s.isdigit() or (len(s) > 1 and s[0] == "0") or len(s) > 16:
        return None
    v = int(s)
    return v if v <= MAX_SAFE_INTEGER else None


def _hash_or_none(s: str) -> Optional[bytes]:
    h = _b64_canonical(s)
    return h if h is not None and len(h) == 32 else None


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
    return _b64_canonical(s)


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
    while frac.endswith("0"):
        frac = frac[:-1]
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

    # A probe (attest.Probe): its lists as Go writes them (nil is null, not
    # [] as Statement.Marshal makes the others), markers omitted when empty.
    def omit_empty(name: str, v: Any, item: Callable[[Any], str]) -> str:
        if v is None or (isinstance(v, list) and not v):
            return ""
        return ',"' + name + '":' + _go_list(v, item, False)

    def probe(q: Any) -> str:
        x = _go_obj(q)
        return ('{"holder":' + _go_str(x.get("holder")) + ',"probe":' + _go_str(x.get("probe")) + ',"nonce":' + _go_str(x.get("nonce"))
                + ',"asked_at":' + _canon_time(x.get("asked_at")) + ',"answered_at":' + _canon_time(x.get("answered_at"))
                + ',"artifacts":' + _go_list(x.get("artifacts"), _go_str, True) + omit_empty("markers", x.get("markers"), _go_str)
                + ',"found":' + _go_list(x.get("found"), _go_str, True) + ',"signature":' + _go_bytes(x.get("signature")) + "}")
    return ('{"_type":' + _go_str(o.get("_type")) + ',"subject":' + _go_list(o.get("subject"), subj, True) + ',"predicateType":'
            + _go_str(o.get("predicateType")) + ',"predicate":{"forget":' + _go_str(p.get("forget")) + ',"claim":' + _go_str(p.get("claim"))
            + ',"timeline":{"requested":' + _canon_time(tl.get("requested")) + ',"committed":' + _canon_time(tl.get("committed"))
            + ',"shredded":' + _canon_time(tl.get("shredded")) + ',"erased":' + _canon_time(tl.get("erased")) + "}"
            + ',"key_evidence":{"root_store":' + _go_str(ke.get("root_store")) + ',"retired_root_versions":'
            + _go_list(ke.get("retired_root_versions"), _int64, True) + rkc + ',"epoch":' + _int64(ke.get("epoch")) + "}"
            + ',"artifacts":' + _go_list(p.get("artifacts"), art, True) + ',"conditions":' + _go_list(p.get("conditions"), cond, True)
            + ',"holder_acks":' + _go_list(p.get("holder_acks"), ack, True) + ',"residuals":' + _go_list(p.get("residuals"), res, True)
            + omit_empty("probes", p.get("probes"), probe) + "}}")


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


def _lower_hex(s: str, n: int) -> bool:
    return len(s) == n and all(c in "0123456789abcdef" for c in s)


def _sorted_unique(xs: Sequence[str]) -> bool:
    # str order is code point order, which is UTF-8 byte order (Go's).
    return all(xs[i - 1] < xs[i] for i in range(1, len(xs)))


def _validate_probes(p: Dict[str, Any]) -> None:
    """_validate_probes is attest's validateProbes (§6a), after the acks:
    each probe by a holder with an ack here, under its ack key, about
    artifacts its acks close, asked after the commit and answered before
    the erasure, found nothing."""
    # A holder's key (its last ack's, as Go's map) and every artifact its
    # acks close, over all of its acks (a holder may ack a forget in parts).
    keys: Dict[str, str] = {}
    closed: Dict[str, Set[str]] = {}
    for h in p["holder_acks"] or []:
        keys[h["holder"]] = h["public_key"]
        closed.setdefault(h["holder"], set()).update(h["artifacts"] or [])
    committed = _parse_time(p["timeline"]["committed"])["ns"]
    erased = _parse_time(p["timeline"]["erased"])["ns"]
    seen = set()
    for q in p.get("probes") or []:
        def no(why: str) -> Refused:
            return _refuse("statement.probes", "probe %s of holder %s: %s" % (q["probe"][:64], q["holder"][:64], why))
        key = keys.get(q["holder"])
        arts = q["artifacts"] or []
        markers = q.get("markers") or []
        if key is None:
            raise no("the holder has no ack here")
        if not _lower_hex(q["probe"], 32) or q["probe"] in seen:
            raise no("the probe id is not 32 lower-case hex digits, or is repeated")
        if not _lower_hex(q["nonce"], 64):
            raise no("the nonce is not 64 lower-case hex digits")
        if not arts or not _sorted_unique(arts) or not _sorted_unique(markers):
            raise no("the artifacts asked are empty, or the artifacts or markers are not sorted and unique")
        if q["found"] is None or len(q["found"]) != 0:
            raise no("the probe found something (or its found is null, not [])")
        asked, answered = _parse_time(q["asked_at"]), _parse_time(q["answered_at"])
        if (not asked["utc"] or not answered["utc"] or asked["ns"] < committed or answered["ns"] < asked["ns"]
                or answered["ns"] > erased):
            raise no("asked before the commit, answered before it was asked or after the erasure, or a time not in UTC")
        if not all(_valid_id(m) for m in markers):
            raise no("a marker is not printable ASCII")
        for x in arts:
            if x not in closed[q["holder"]]:
                raise no("artifact %s is not one its acks close" % x[:64])
        sig = None if q["signature"] is None else _b64_loose(q["signature"])
        hpub = _b64_loose(key) or b""
        if sig is None or len(sig) != 64 or not _ed25519_ok(hpub, sig, probe_message(q["probe"], p["forget"], q["holder"], q["nonce"],
                                                                                  arts, markers, q["found"])):
            raise no("the signature does not verify under the holder's ack key")
        seen.add(q["probe"])


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
        if _blank(cd["evidence"]):
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
    _validate_probes(p)
    kinds = set()
    for r in p["residuals"] or []:
        if not re.match(r"^[a-z][a-z0-9_]{0,63}\Z", r["kind"]) or _blank(r["description"]):
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
    """ExportReport is what verify_export established; witnessed says
    which trusted witnesses cosigned the checkpoint (None when no witness
    key was given)."""
    forget: str
    commitment: str
    origin: str
    tree_size: int
    entries: List[str]
    subject_checked: bool
    consistent: bool
    witnessed: Optional[WitnessReport] = None


def _witnesses_required(n: int, required: Optional[int]) -> int:
    """_witnesses_required is the number of valid cosignatures to require
    of n witness keys: all when None, else 1 to n (R9; a caller's error
    otherwise, ValueError)."""
    if required is None:
        return n
    if isinstance(required, bool) or not isinstance(required, int) or n == 0 or not 1 <= required <= n:
        raise ValueError("shredd: witnesses_required must be 1 to the %d witness keys given" % n)
    return required


def verify_export(export: bytes, key_file: bytes, log_key_file: bytes, *, subject: Optional[str] = None,
                  salt: Optional[str] = None, saved: Optional[bytes] = None,
                  witnesses: Optional[Sequence[Union[bytes, str]]] = None,
                  witnesses_required: Optional[int] = None) -> ExportReport:
    """verify_export is ``shredd verify EXPORT.tar.gz --key --log-key
    [--subject --salt] [--checkpoint] [--witness ... --witnesses-required]``:
    the key files (attestation.pub, log.vkey and the witnesses' keys,
    obtained out of band, as bytes; a witness key may be given as a str,
    the file's text), the archive read strictly, the attestation, the
    subject commitment (given subject and salt hex), the checkpoint and,
    given witness keys, its cosignatures (at least witnesses_required of
    them valid, all when None), every entry and its inclusion proof, that
    the entries are this forget's, and consistency with a saved
    checkpoint. Raises Refused, whose reason is the spec's reason code:
    the one shredd verify and the page give for the same inputs; or
    ValueError for a caller's error (the CLI's usage errors: a subject
    without a salt or the other way round, a salt that is not exactly 64
    hex digits, witnesses_required out of 1 to the number of keys, a key
    file that is None)."""
    _check_subject_type(subject, salt)
    if (subject is None) != (salt is None) or subject == "":
        raise ValueError("shredd: give both the subject id and the salt, or neither")
    salt_bytes = None if salt is None else _parse_salt(salt)
    wfiles = list(witnesses or [])
    required = _witnesses_required(len(wfiles), witnesses_required)
    if key_file is None or log_key_file is None:
        raise ValueError("shredd: verify_export needs the attestation key file and the log key file")
    pub = check_public_key_file(key_file)
    vk = _parse_log_key(_key_file_line(log_key_file, "logkey.format"))
    wkeys = _read_witness_keys(wfiles)
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
    if subject is not None and salt_bytes is not None:
        if _commitment(subject, salt_bytes) != commit:
            raise _refuse("subject.mismatch", "the subject id and salt do not open the commitment")
    cp_bytes = files["checkpoint"]
    origin, size, root, text, sigs = _open_note(cp_bytes, vk, _CHECKPOINT_CODES)
    witnessed = _check_cosignatures(text, sigs, wkeys, required) if wkeys else None
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
        o_origin, o_size, o_root, _, _ = _open_note(saved, vk, _SAVED_CODES)
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
                        subject_checked=subject is not None, consistent=consistent, witnessed=witnessed)
