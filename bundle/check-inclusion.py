#!/usr/bin/env python3
"""Check a c2sp.org/tlog-proof@v1 inclusion proof against an entry, offline.

Usage: check-inclusion.py ENTRY_FILE PROOF_FILE

Written from RFC 6962 section 2.1 (hashes) and RFC 9162 section 2.1.3.2
(verifying an inclusion proof), independently of shredd's Go code. It checks
only the Merkle inclusion of the entry in the tree named by the checkpoint; it
does NOT check the checkpoint's signature (do that with openssl or `shredd
verify`). Exit status 0 with an "ok: ..." line, or 1 with the reason.
"""
import base64
import binascii
import hashlib
import sys


def fail(reason):
    print("fail: " + reason)
    sys.exit(1)


def b64hash(s):
    try:
        h = base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        fail("bad base64: %r" % s)
    if len(h) != 32 or base64.b64encode(h).decode() != s:
        fail("not a canonical base64 SHA-256 hash: %r" % s)
    return h


def decimal(s, what):
    if not s.isdigit() or not s.isascii() or (len(s) > 1 and s[0] == "0"):
        fail("%s is not a decimal without leading zeros: %r" % (what, s))
    return int(s)


def main(entry_path, proof_path):
    try:
        entry = open(entry_path, "rb").read()
        text = open(proof_path, "rb").read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        fail("cannot read the entry or the proof: %s" % e)
    head, sep, checkpoint = text.partition("\n\n")
    lines = head.split("\n")
    if not sep or lines[0] != "c2sp.org/tlog-proof@v1":
        fail("not a c2sp.org/tlog-proof@v1 proof")
    lines = lines[1:]
    if lines and lines[0].startswith("extra "):
        lines = lines[1:]  # opaque and unauthenticated: ignored
    if not lines or not lines[0].startswith("index "):
        fail("no index line")
    index = decimal(lines[0][len("index "):], "index")
    path = [b64hash(line) for line in lines[1:]]
    body = checkpoint.split("\n\n", 1)[0].split("\n")
    if len(body) < 3 or body[0] == "":
        fail("checkpoint has no origin, size and root hash lines")
    origin, size, root = body[0], decimal(body[1], "tree size"), b64hash(body[2])

    # RFC 6962 2.1: leaf hash = SHA-256(0x00 || entry), node = SHA-256(0x01 || left || right).
    r = hashlib.sha256(b"\x00" + entry).digest()
    # RFC 9162 2.1.3.2, step by step.
    if index >= size:
        fail("index %d is not below tree size %d" % (index, size))
    fn, sn = index, size - 1
    for p in path:
        if sn == 0:
            fail("audit path longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = hashlib.sha256(b"\x01" + p + r).digest()
            if not fn & 1:
                while fn != 0 and not fn & 1:
                    fn, sn = fn >> 1, sn >> 1
        else:
            r = hashlib.sha256(b"\x01" + r + p).digest()
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        fail("audit path shorter than the tree is deep")
    if r != root:
        fail("computed root %s differs from the checkpoint's %s" %
             (base64.b64encode(r).decode(), body[2]))
    print("ok: entry %d is in tree %d of %s with root %s" % (index, size, origin, body[2]))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        fail("usage: check-inclusion.py ENTRY_FILE PROOF_FILE")
    main(sys.argv[1], sys.argv[2])
