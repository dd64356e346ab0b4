"""The byte rules of the evidence spec (docs/transparency.md §10a, issue 47),
one at a time, on inputs made from the shared corpus's valid export: each
test changes one thing and checks the reason code, and its unchanged twin
verifies, so a check that accepts everything or refuses everything fails
here. The corpus itself runs in test_evidence.py."""

import base64
import gzip
import hashlib
import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import shredd.verify as sv  # noqa: E402
from shredd.verify import Refused  # noqa: E402

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "evidence")
SUBJECT = "alice@example.com"
SALT = "b65bf8931e66e8fab35e4771266c5b77294808e45535ae579eda977a4065545f"

# Every code point of the spec's WS and INVISIBLE sets that the issue
# names, and two that are in neither.
WS_SAMPLES = ["\t", "\n", "\v", "\f", "\r", " ", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029",
              "\u202f", "\u205f", "\u3000"]
INVISIBLE_ONLY = ["\u0000", "\u001f", "\u007f", "\u00ad", "\u200b", "\u200d", "\u2060", "\ufeff", "\u3164", "\U000e0001",
                  "\U0001d173", "\u061c", "\u180e"]
VISIBLE = ["x", "\u00a1", "\u2010", "\u200f\u00e9", "\ufffd", "\U0001f600"]


def _read(rel):
    with open(os.path.join(CORPUS, rel), "rb") as f:
        return f.read()


def _ed25519():
    from cryptography.hazmat.primitives.asymmetric import ed25519
    return ed25519


def _raw(pub):
    from cryptography.hazmat.primitives import serialization
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _vkey(name, alg, pub):
    key = bytes([alg]) + pub
    return "%s+%s+%s" % (name, hashlib.sha256(name.encode() + b"\n" + key).digest()[:4].hex(),
                         base64.b64encode(key).decode())


class Witness:
    """A witness of my own: its key file and cosignature lines."""

    def __init__(self, name):
        self.name = name
        self.priv = _ed25519().Ed25519PrivateKey.generate()
        self.pub = _raw(self.priv.public_key())
        self.vkey = _vkey(name, 0x04, self.pub)
        self.kid = bytes.fromhex(self.vkey.split("+")[1])

    def line(self, text, t=1700000000, sig=None, name=None):
        if sig is None:
            sig = self.priv.sign(b"cosignature/v1\ntime %d\n" % t + text)
        return ("\u2014 %s %s\n" % (name or self.name, base64.b64encode(self.kid + t.to_bytes(8, "big") + sig).decode())).encode()


def _header(name, size, typ=b"0"):
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\x00"
    h[108:116] = b"0000000\x00"
    h[116:124] = b"0000000\x00"
    h[124:136] = b"%011o\x00" % size
    h[136:148] = b"%011o\x00" % 0
    h[148:156] = b" " * 8
    h[156:157] = typ
    h[257:265] = b"ustar\x0000"
    h[148:156] = b"%06o\x00 " % sum(h)
    return bytes(h)


def tar(members):
    """tar writes (name bytes, data or None for a directory) as ustar."""
    out = b""
    for name, data in members:
        if data is None:
            out += _header(name, 0, b"5")
        else:
            out += _header(name, len(data)) + data + b"\x00" * ((512 - len(data) % 512) % 512)
    return out + b"\x00" * 1024


class Export:
    """The corpus's valid export, its members to change and write back."""

    def __init__(self):
        self.members = [(m.name.encode(), None if m.is_dir else m.data)
                        for m in sv.untar_strict(sv.gunzip_strict(_read("files/001-valid.tar.gz")))]
        self.dir = self.members[0][0].split(b"/")[0]

    def get(self, name):
        return dict(self.members)[self.dir + b"/" + name]

    def put(self, name, data):
        self.members = [(n, data if n == self.dir + b"/" + name else d) for n, d in self.members]

    def add_sig_lines(self, lines):
        """add_sig_lines appends signature lines to the checkpoint and to
        the copy of it every proof ends with (the log's signature stays
        valid: it covers the text only)."""
        cp = self.get(b"checkpoint")
        for n, d in list(self.members):
            if d is not None and (n.endswith(b".tlog-proof") or n.endswith(b"/checkpoint")):
                assert d.endswith(cp)
                self.put(n.split(b"/", 1)[1], d + lines)

    def text(self):
        cp = self.get(b"checkpoint")
        return cp[:cp.rindex(b"\n\n") + 1]

    def bytes(self):
        return gzip.compress(tar(self.members), mtime=0)


def verify(export=None, key=None, log_key=None, **kw):
    """verify runs verify_export on the corpus's files, with the changes
    given, and returns the reason code ("ok" when it verifies)."""
    kw.setdefault("subject", SUBJECT)
    kw.setdefault("salt", SALT)
    kw.setdefault("saved", _read("files/saved.checkpoint"))
    try:
        sv.verify_export(export if export is not None else _read("files/001-valid.tar.gz"),
                         key if key is not None else _read("files/key.pem"),
                         log_key if log_key is not None else _read("files/log.vkey"), **kw)
        return "ok"
    except Refused as e:
        return e.reason


class BlankTest(unittest.TestCase):
    """R1: blank is every code point in INVISIBLE; nothing is trimmed."""

    def test_blank(self):
        self.assertTrue(sv._blank(""))
        for c in WS_SAMPLES + INVISIBLE_ONLY:
            self.assertTrue(sv._blank(c), "U+%04X" % ord(c))
            self.assertTrue(sv._blank(c * 3 + " "), "U+%04X" % ord(c))
        for c in VISIBLE:
            self.assertFalse(sv._blank(c), c)
            self.assertFalse(sv._blank(" " + c + "\u3000"), c)

    def test_ws(self):
        self.assertEqual(sum(sv._is_ws(chr(c)) for c in range(0x110000)), 25)
        for c in WS_SAMPLES:
            self.assertTrue(sv._is_ws(c))
        for c in ("\u200b", "\ufeff", "x", "\u0000", "\u180e"):
            self.assertFalse(sv._is_ws(c))

    def test_statement(self):
        env = json.loads(Export().get(b"attestation.json"))
        st = json.loads(base64.b64decode(env["payload"]))
        sv._validate_statement(st)
        for blank in ("\u3000", "\u2028", "\u1680", "\u0085", "\ufeff", "\u200b\u00a0", ""):
            for where, code in (("conditions", "evidence"), ("residuals", "description")):
                s = json.loads(json.dumps(st))
                s["predicate"][where][0][code] = blank
                with self.assertRaises(Refused) as e:
                    sv._validate_statement(s)
                self.assertEqual(e.exception.reason, "statement." + where, repr(blank))
        for kept in (" x ", "\ufeffok", "\u3000evidence\u3000"):
            s = json.loads(json.dumps(st))
            s["predicate"]["conditions"][0]["evidence"] = kept
            s["predicate"]["residuals"][0]["description"] = kept
            sv._validate_statement(s)


class SaltTest(unittest.TestCase):
    """R9: a salt is exactly 64 hex digits; anything else is a usage error."""

    def test_salt(self):
        self.assertEqual(sv._parse_salt(SALT.upper()), bytes.fromhex(SALT))
        self.assertEqual(verify(salt=SALT.upper()), "ok")
        for bad in (SALT[:32] + " " + SALT[32:], " " + SALT, SALT + "\n", "0x" + SALT[2:], SALT[:-1], SALT + "0",
                    SALT[:-1] + "g", SALT[:-1] + "\u0660", "", None):
            with self.assertRaises(ValueError, msg=repr(bad)):
                sv._parse_salt(bad)
            if bad is not None:
                with self.assertRaises(ValueError, msg=repr(bad)):
                    verify(salt=bad)
        with self.assertRaises(ValueError):
            verify(salt=None)


class LogKeyTest(unittest.TestCase):
    """R3: the log key file is LINE or LINE LF, nothing else."""

    def test_log_key(self):
        line = _read("files/log.vkey").split(b"\n")[0]
        self.assertEqual(verify(log_key=line), "ok")
        self.assertEqual(verify(log_key=line + b"\n"), "ok")
        name, h, k = line.split(b"+", 2)
        self.assertEqual(verify(log_key=name + b"+" + h.upper() + b"+" + k), "logkey.format")
        self.assertEqual(verify(log_key=b"\xef\xbb\xbf" + line), "text.bom")
        self.assertEqual(verify(log_key=line + b"\xff"), "text.utf8")
        for pad in WS_SAMPLES + ["\ufeff", "\u200b", "\n\n", "\r\n", "x"]:
            p = pad.encode()
            for bad in (p + line, line + p, line + b"\n" + p):
                if bad == line + b"\n":
                    continue  # LINE LF: the one final LF the grammar allows
                want = "text.bom" if bad.startswith(b"\xef\xbb\xbf") else "logkey.format"
                self.assertEqual(verify(log_key=bad), want, repr(bad))
        # The unused bits of the key's last base64 character set: the same
        # key bytes, not the canonical spelling.
        last = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(k[-1:])
        other = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last ^ 1:(last ^ 1) + 1]
        self.assertEqual(verify(log_key=name + b"+" + h + b"+" + k[:-1] + other), "logkey.format")
        self.assertEqual(verify(log_key=name + b"+" + h + b"+" + k + b"===="), "logkey.format")
        self.assertEqual(verify(log_key=name + b"+" + h[:-1] + b"0+" + k), "logkey.format")

    def test_open_checkpoint(self):
        cp = Export().get(b"checkpoint")
        line = _read("files/log.vkey").decode().split("\n")[0]
        self.assertEqual(sv.open_checkpoint(cp, line).size, sv.open_checkpoint(cp, line + "\n").size)
        for bad in (" " + line, line + " ", line + "\u00a0", "\ufeff" + line, line + "\n\n"):
            with self.assertRaises(Refused) as e:
                sv.open_checkpoint(cp, bad)
            self.assertIn(e.exception.reason, ("logkey.format", "text.bom"), repr(bad))


class WitnessKeyTest(unittest.TestCase):
    """R3: witness keys, their format and duplicates."""

    def test_witness_keys(self):
        w1, w2 = Witness("w.example/one"), Witness("w.example/two")
        ex = Export()
        ex.add_sig_lines(w1.line(ex.text()) + w2.line(ex.text()))
        b = ex.bytes()
        self.assertEqual(verify(b, witnesses=[w1.vkey, w2.vkey.encode() + b"\n"]), "ok")
        self.assertEqual(verify(b, witnesses=[b"\xef\xbb\xbf" + w1.vkey.encode()]), "text.bom")
        for pad in WS_SAMPLES + ["\ufeff", "\r\n", "\n\n"]:
            if pad != "\n":
                self.assertEqual(verify(b, witnesses=[w1.vkey + pad]), "witness.format", repr(pad))
            self.assertEqual(verify(b, witnesses=[pad + w1.vkey]), "text.bom" if pad == "\ufeff" else "witness.format", repr(pad))
        self.assertEqual(verify(b, witnesses=[_read("files/log.vkey")]), "witness.format")  # type 0x01
        good = _vkey("w.example/one", 0x04, w2.pub)
        # Another last character (always another one: "x" may be the key's own).
        self.assertEqual(verify(b, witnesses=[good[:-1] + ("y" if good[-1] == "x" else "x")]), "witness.format")
        # One public key under two names; one name and key ID twice.
        self.assertEqual(verify(b, witnesses=[w1.vkey, _vkey("w.example/alias", 0x04, w1.pub)]), "witness.duplicate")
        self.assertEqual(verify(b, witnesses=[w1.vkey, w1.vkey + "\n"]), "witness.duplicate")
        # Keys are read before the archive.
        self.assertEqual(verify(b"junk", witnesses=[w1.vkey, w1.vkey]), "witness.duplicate")


class NoteTest(unittest.TestCase):
    """R5: the checkpoint's signature block, byte for byte."""

    def test_lines(self):
        ex = Export()
        cp = ex.get(b"checkpoint")
        text = ex.text()
        log_line = cp[len(text) + 1:]
        name, sig = log_line[len("\u2014 ".encode()):-1].split(b" ")
        raw = base64.b64decode(sig)
        bad_sig = "\u2014 ".encode() + name + b" " + base64.b64encode(raw[:4] + bytes(64)) + b"\n"
        other = Witness("someone.else")

        def with_block(block):
            e = Export()
            for n, d in list(e.members):
                if d is not None and (n.endswith(b".tlog-proof") or n.endswith(b"/checkpoint")):
                    e.put(n.split(b"/", 1)[1], d[:len(d) - len(cp)] + text + b"\n" + block)
            return verify(e.bytes(), saved=None)
        self.assertEqual(with_block(log_line), "ok")
        self.assertEqual(with_block(other.line(text) + log_line), "ok")  # an unknown key: ignored
        self.assertEqual(with_block(log_line + bad_sig), "checkpoint.format")  # the "line twice"
        self.assertEqual(with_block(bad_sig + log_line), "checkpoint.format")
        self.assertEqual(with_block(log_line + log_line), "checkpoint.format")
        self.assertEqual(with_block(other.line(text) + log_line + other.line(text, t=5)), "checkpoint.format")
        self.assertEqual(with_block(bad_sig), "checkpoint.signature")
        self.assertEqual(with_block(other.line(text)), "checkpoint.signature")
        longer = "\u2014 ".encode() + name + b" " + base64.b64encode(raw + b"\x00") + b"\n"
        self.assertEqual(with_block(longer), "checkpoint.signature")
        many = b"".join(Witness("w%d" % i).line(text) for i in range(99))
        self.assertEqual(with_block(many + log_line), "ok")
        self.assertEqual(with_block(many + Witness("w99").line(text) + log_line), "checkpoint.format")
        # Non-canonical base64 (the last character's unused bits), a space
        # too many, a CR, a name with a WS code point, a short signature.
        nc = sig[:-2] + (b"B" if sig[-2:-1] == b"A" else b"A") + b"="
        for bad in (b"\u2014 ".decode().encode() + name + b" " + nc + b"\n",
                    "\u2014 ".encode() + name + b"  " + sig + b"\n",
                    "\u2014 ".encode() + name + b" " + sig + b" \n",
                    "\u2014 ".encode() + name + b" " + sig + b"\r\n",
                    "\u2014 ".encode() + name + "\u00a0".encode() + b" " + sig + b"\n",
                    "\u2014  ".encode() + name + b" " + sig + b"\n",
                    "- ".encode() + name + b" " + sig + b"\n",
                    "\u2014 ".encode() + name + b" AAAAAA==\n"):
            self.assertEqual(with_block(log_line + bad), "checkpoint.format", repr(bad))
        # A name holding U+FEFF is a name (not WS): an unknown key's line.
        self.assertEqual(with_block(Witness("w\ufeff").line(text) + log_line), "ok")
        self.assertEqual(with_block(log_line + b"\n"), "checkpoint.format")
        self.assertEqual(with_block(log_line[:-1]), "checkpoint.format")

    def test_control_bytes(self):
        ex = Export()
        cp = ex.get(b"checkpoint")
        for c in (b"\x00", b"\x01", b"\t", b"\x0b", b"\r", b"\x1f"):
            with self.assertRaises(Refused) as e:
                sv.verify_export(ex.bytes(), _read("files/key.pem"), _read("files/log.vkey"),
                                 saved=cp[:5] + c + cp[5:])
            self.assertEqual(e.exception.reason, "saved.format", repr(c))


class WitnessTest(unittest.TestCase):
    """R5.8: cosignatures, valid, invalid (counting as none) or missing."""

    def test_cosignatures(self):
        w1, w2, w3 = Witness("w1"), Witness("w2"), Witness("w3")
        ex = Export()
        text = ex.text()
        ex.add_sig_lines(w1.line(text, t=(1 << 63) - 1) + w2.line(text, sig=bytes(64)))
        b = ex.bytes()
        keys = [w1.vkey, w2.vkey, w3.vkey]
        rep = sv.verify_export(b, _read("files/key.pem"), _read("files/log.vkey"), witnesses=keys, witnesses_required=1)
        self.assertEqual(rep.witnessed.valid, [sv.Cosignature("w1", (1 << 63) - 1)])
        self.assertIsNone(rep.witnessed.valid[0].date)
        self.assertEqual((rep.witnessed.missing, rep.witnessed.invalid), (["w3"], ["w2"]))
        self.assertEqual(verify(b, witnesses=keys, witnesses_required=2), "checkpoint.witnesses")
        self.assertEqual(verify(b, witnesses=keys), "checkpoint.witnesses")
        self.assertEqual(verify(b, witnesses=[w1.vkey]), "ok")
        self.assertEqual(verify(b, witnesses=[w2.vkey]), "checkpoint.witnesses")
        self.assertIsNone(sv.verify_export(b, _read("files/key.pem"), _read("files/log.vkey")).witnessed)
        # A timestamp above 2^63-1, one of the wrong message, a signature cut.
        good = w1.priv.sign(b"cosignature/v1\ntime 7\n" + text)
        for line in (w1.line(text, t=1 << 63), w1.line(text + b"x"), w1.line(text, t=7, sig=good[:-1]),
                     w1.line(text, t=7, sig=good + b"\x00"), w1.line(text, t=8, sig=good)):
            e = Export()
            e.add_sig_lines(line)
            self.assertEqual(verify(e.bytes(), witnesses=[w1.vkey]), "checkpoint.witnesses", line)
        e = Export()
        e.add_sig_lines(w1.line(text, t=0))
        rep = sv.verify_export(e.bytes(), _read("files/key.pem"), _read("files/log.vkey"), witnesses=[w1.vkey])
        self.assertEqual((rep.witnessed.valid[0].time, rep.witnessed.valid[0].date), (0, "1970-01-01T00:00:00Z"))

    def test_required(self):
        w1 = Witness("w1")
        for keys, req in (([], 1), ([w1.vkey], 0), ([w1.vkey], 2), ([w1.vkey], -1), ([w1.vkey], True), (None, 1)):
            with self.assertRaises(ValueError, msg=(keys, req)):
                verify(witnesses=keys, witnesses_required=req)


class TarPathTest(unittest.TestCase):
    """R4: paths in their canonical spelling, the same path twice."""

    def test_paths(self):
        ex = Export()
        d = ex.dir
        files = ex.members

        def code(members):
            try:
                sv.read_export(gzip.compress(tar(members), mtime=0))
                return "ok"
            except Refused as e:
                return e.reason
        self.assertEqual(code(files), "ok")
        self.assertEqual(code([(d, None)] + files), "ok")
        self.assertEqual(code([(d + b"/", None)] + files), "ok")
        self.assertEqual(code([(d, None), (d + b"/", None)] + files), "tar.duplicate")
        self.assertEqual(code([(d + b"/", None), (d, None)] + files), "tar.duplicate")
        self.assertEqual(code([(d + b"//", None)] + files), "tar.path")
        self.assertEqual(code(files + [(d + b"/README.txt/", b"x")]), "tar.path")
        self.assertEqual(code(files + [(d + b"/x/", b"")]), "tar.path")
        self.assertEqual(code(files + [(d + b"//README.txt", b"x")]), "tar.path")
        self.assertEqual(code(files + [(d + b"/./README.txt", b"x")]), "tar.path")
        self.assertEqual(code(files + [(b"./" + d + b"/README.txt", b"x")]), "tar.path")
        self.assertEqual(code(files + [(d + b"/.", None)]), "tar.path")
        self.assertEqual(code(files + [(d + b"/../x", b"")]), "tar.path")
        self.assertEqual(code(files + [(b"/" + d + b"/x", b"")]), "tar.path")
        self.assertEqual(code(files + [(d + b"/README.txt", b"again")]), "tar.duplicate")


class AttestationTest(unittest.TestCase):
    """R8: a bare attestation through the strict reader."""

    def test_bare(self):
        att = Export().get(b"attestation.json")
        key = _read("files/key.pem")
        raw = sv.check_public_key_file(key)
        for k in (key, key.decode(), raw):
            v = sv.verify_attestation(att, k, subject=SUBJECT, salt=SALT)
            self.assertEqual(v.key_id, hashlib.sha256(raw).hexdigest())
        self.assertEqual(sv.verify_attestation(att, key, forget=v.forget).commitment, v.commitment)

        def code(data=att, k=key, **kw):
            try:
                sv.verify_attestation(data, k, **kw)
                return "ok"
            except Refused as e:
                return e.reason
        self.assertEqual(code(k=key + b" "), "key.trailing")
        self.assertEqual(code(k=key[:-1]), "key.format")
        self.assertEqual(code(k=b"\xef\xbb\xbf" + key), "text.bom")
        self.assertEqual(code(k=b" " + key), "key.leading")
        self.assertEqual(code(k=key, data=b" " * (64 << 20) + att), "bundle.size")
        self.assertEqual(code(k=key + b" ", data=b" " * (64 << 20) + att), "key.trailing")  # the key first
        env = json.loads(att)
        self.assertEqual(code(data=json.dumps({"payload": env["payload"], "payloadType": env["payloadType"],
                                               "signatures": env["signatures"]}, separators=(",", ":")).encode()), "json.schema")
        self.assertEqual(code(data=att + b"x"), "json.trailing")
        self.assertEqual(code(data=b"\xef\xbb\xbf" + att), "json.bom")
        self.assertEqual(code(k=bytes(32)), "envelope.signature")
        self.assertEqual(code(subject="bob@example.com", salt=SALT), "subject.mismatch")
        self.assertEqual(code(forget="0" * 32), "statement.forget")
        env = json.loads(att)
        env["payload"] = base64.b64encode(base64.b64decode(env["payload"]).replace(b'"ok"', b'"OK"', 1)).decode()
        self.assertEqual(code(data=json.dumps(env, separators=(",", ":")).encode()), "envelope.signature")
        for kw in ({"subject": SUBJECT}, {"salt": SALT}, {"subject": SUBJECT, "salt": SALT + " "}):
            with self.assertRaises(ValueError):
                sv.verify_attestation(att, key, **kw)
        with self.assertRaises(ValueError):
            sv.verify_attestation(att, None)


class NoTrimTest(unittest.TestCase):
    """No language trim, strip, whitespace split, fromhex or lenient base64
    in the reader's source (the issue's grep), proven able to fail."""

    BAD = re.compile(r"\.(strip|rstrip|lstrip)\(|\.split\(\)|fromhex|\\s|isspace|b64decode\((?![^\n]*validate=True)")

    def test_source(self):
        with open(sv.__file__, encoding="utf-8") as f:
            src = f.read()
        self.assertEqual([m.group(0) for m in self.BAD.finditer(src)], [])
        for bad in ('x.strip(" ")', "s.split()", "bytes.fromhex(s)", "base64.b64decode(s)", r're.compile(r"\s")'):
            self.assertTrue(self.BAD.search(bad), bad)


if __name__ == "__main__":
    unittest.main()


# A known answer of attest.ProbeMessage and attest.SignProbe (Go), with the
# holder key whose seed is the bytes 0 to 31: the message's groups sorted,
# the signature Ed25519's (deterministic).
PROBE_VECTOR = {
    "args": ("5e5e0000000000000000000000000001", "8c1f0e6a2b4d4e97a1c3f5e7092b4d6f", "ann-index-1",
             "9c1f000000000000000000000000000000000000000000000000000000000002",
             ["b-art", "a-art"], ["zeta-marker", "alpha-marker"], ["b-art", "alpha-marker"]),
    "message": (b"shredd/v1/holder-probe\nprobe 5e5e0000000000000000000000000001\nforget 8c1f0e6a2b4d4e97a1c3f5e7092b4d6f\n"
                b"holder ann-index-1\nnonce 9c1f000000000000000000000000000000000000000000000000000000000002\n"
                b"asked a-art\nasked b-art\nmarker alpha-marker\nmarker zeta-marker\nfound alpha-marker\nfound b-art\n"),
    "signature": "wdMvIWcCyZqAyPUMf+4L6nshMpeKqnTyl3SMUVIggnRw8dxrRIs3Q8ojrp1XOOPtLYHO9M1UIxbotvDbpsuyBw==",
    "public_key": "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=",
}


class ProbeMessageTest(unittest.TestCase):
    """probe_message gives Go's bytes, and the kit's signature Go's."""

    def test_known_answer(self):
        self.assertEqual(sv.probe_message(*PROBE_VECTOR["args"]), PROBE_VECTOR["message"])
        a = PROBE_VECTOR["args"]
        self.assertEqual(sv.probe_message(a[0], a[1], a[2], a[3], ["x"]),
                         ("shredd/v1/holder-probe\nprobe %s\nforget %s\nholder %s\nnonce %s\nasked x\n" % a[:4]).encode())
        key = _ed25519().Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
        self.assertEqual(base64.b64encode(key.sign(PROBE_VECTOR["message"])).decode(), PROBE_VECTOR["signature"])
        from shredd.holder import HolderKit
        kit = HolderKit(None, "ann-index-1", bytes(range(32)))  # type: ignore[arg-type]
        self.assertEqual(base64.b64encode(kit.public_key).decode(), PROBE_VECTOR["public_key"])
        import shredd
        from datetime import datetime, timezone
        w = shredd.ProbeWork(probe=a[0], forget=a[1], nonce=a[3], artifacts=list(a[4]), markers=list(a[5]),
                             deadline=datetime.now(timezone.utc))
        self.assertEqual(base64.b64encode(kit.sign_probe(w, a[6])).decode(), PROBE_VECTOR["signature"])
