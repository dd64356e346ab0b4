"""Client-side sealing (docs/envelope.md section 4a): the writer's half.

``POST /v1/datakey`` registers an artifact and answers its envelope header
bytes and its artifact key K_a; this module seals a plaintext with them,
so that the plaintext never crosses the network:

    AAD      = "shredd/v1/aad" || 0x00 || header || uint32be(len(context)) || context
    envelope = header || AES-256-GCM-Seal(K_a, nonce = header[-12:], plaintext, AAD)

The result is byte for byte the envelope the server would have sealed with
the same header (the client-sealed vectors of envelope/testdata/vectors
pin this). AES-GCM comes from the ``cryptography`` package, imported only
when something is sealed.

The header is checked only as far as sealing needs: magic, version,
algorithm and a length that matches its kind length and subject count. The
server that made it parses it strictly when the envelope comes back.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

__all__ = ["MAX_PLAINTEXT", "MAX_CONTEXT", "KEY_SIZE", "NONCE_SIZE", "PREFIX", "aesgcm", "check_sizes",
           "parse_header", "seal", "zero"]

#: The largest plaintext an envelope holds, in bytes (64 MiB).
MAX_PLAINTEXT = 64 << 20
#: The largest context, in bytes.
MAX_CONTEXT = 4096
#: The size of the artifact key K_a (AES-256).
KEY_SIZE = 32
#: The size of the AES-GCM nonce, the last bytes of the header.
NONCE_SIZE = 12
#: The prefix of the text form of an envelope.
PREFIX = "shredd:v1:"

_MAGIC = b"SHRD"
_VERSION = 1
_ALG_AES256GCM = 1
_AAD_LABEL = b"shredd/v1/aad\x00"
# magic 4, version 1, alg 1, artifact 16, kindLen 1, count 2, salt 32, nonce 12.
_FIXED = 69
_REF = 36  # a lineage entry: subject id 32, generation 4
_MAX_KIND = 64
_MAX_LINEAGE = 1024


def aesgcm() -> Any:
    """aesgcm returns the AESGCM class of the ``cryptography`` package, or
    raises ImportError saying how to install it."""
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as e:  # pragma: no cover - depends on the machine
        raise ImportError("shredd: sealing on the client needs the 'cryptography' package "
                          "(pip install './clients/python[holder]', or apt-get install python3-cryptography)") from e
    return AESGCM


def check_sizes(plaintext: Any, context: Optional[Any]) -> None:
    """check_sizes refuses, before anything is registered, a plaintext or
    context that is not bytes or that the envelope cannot hold."""
    if not isinstance(plaintext, (bytes, bytearray, memoryview)):
        raise TypeError("shredd: plaintext must be bytes (encode text first)")
    if context is not None and not isinstance(context, (bytes, bytearray, memoryview)):
        raise TypeError("shredd: context must be bytes")
    if len(plaintext) > MAX_PLAINTEXT:
        raise ValueError("shredd: plaintext of %d bytes, at most %d" % (len(plaintext), MAX_PLAINTEXT))
    if context is not None and len(context) > MAX_CONTEXT:
        raise ValueError("shredd: context of %d bytes, at most %d" % (len(context), MAX_CONTEXT))


def parse_header(header: bytes) -> Tuple[str, int, bytes]:
    """parse_header checks the header bytes of an envelope as far as
    sealing needs and returns its artifact id (hex), the size of its
    lineage and its nonce. ValueError names what is wrong."""
    n = len(header)
    if n < _FIXED + 1 + _REF:
        raise ValueError("header of %d bytes: too short" % n)
    if header[:4] != _MAGIC:
        raise ValueError("header: bad magic")
    if header[4] != _VERSION:
        raise ValueError("header: version %d, want %d" % (header[4], _VERSION))
    if header[5] != _ALG_AES256GCM:
        raise ValueError("header: algorithm %d, want %d" % (header[5], _ALG_AES256GCM))
    kind_len = header[22]
    if not 1 <= kind_len <= _MAX_KIND:
        raise ValueError("header: kind of %d bytes" % kind_len)
    count = int.from_bytes(header[23 + kind_len:25 + kind_len], "big")
    if not 1 <= count <= _MAX_LINEAGE:
        raise ValueError("header: lineage of %d subjects" % count)
    if n != _FIXED + kind_len + _REF * count:
        raise ValueError("header of %d bytes, want %d for its kind and lineage" % (n, _FIXED + kind_len + _REF * count))
    return header[6:22].hex(), count, bytes(header[n - NONCE_SIZE:])


def seal(header: bytes, key: bytearray, plaintext: Any, context: Optional[Any]) -> bytes:
    """seal returns the binary envelope of plaintext under the data key
    (header, key), with context bound to it. The caller zeroes key."""
    if len(key) != KEY_SIZE:
        raise ValueError("key of %d bytes, want %d" % (len(key), KEY_SIZE))
    _, _, nonce = parse_header(header)
    ctx = bytes(context or b"")
    aad = _AAD_LABEL + header + len(ctx).to_bytes(4, "big") + ctx
    # Older releases of cryptography (Debian 12 has 38) take only bytes as
    # the data: a bytearray or memoryview plaintext is copied once.
    data = plaintext if isinstance(plaintext, bytes) else bytes(plaintext)
    # AESGCM takes the bytearray itself: no immutable copy of the key is
    # made here (the library may copy it internally).
    ct: bytes = aesgcm()(key).encrypt(nonce, data, aad)
    return bytes(header) + ct


def zero(b: bytearray) -> None:
    """zero overwrites b in place."""
    b[:] = bytes(len(b))
