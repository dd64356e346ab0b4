"""Client-side sealing: the seal of shredd._seal against the client-sealed
vectors of envelope/testdata/vectors (byte for byte), and Sealing.seal and
seal_many against the real shredd binary on 127.0.0.1."""

from __future__ import annotations

import base64
import os
import sys
import unittest
from typing import Any, Dict, List, Optional
from unittest import mock

sys.path.insert(0, os.path.dirname(__file__))
import _client  # noqa: E402  (the package under test: installed, or the checkout's)

import shredd  # noqa: E402
import shredd._seal as seal  # noqa: E402
from shredd.types import Sealed  # noqa: E402

import _server  # noqa: E402

VECTORS = os.path.join(_server.REPO, "envelope", "testdata", "vectors")


def read_vector(name: str) -> Dict[str, Any]:
    """read_vector parses a vector file: its ``key: value`` lines (hex
    values decoded for the keys used here), then the text form after the
    blank line."""
    with open(os.path.join(VECTORS, name), encoding="utf-8") as f:
        head, _, text = f.read().partition("\n\n")
    v: Dict[str, Any] = {"context": b"", "text": text.strip()}
    for line in head.splitlines():
        k, _, val = line.partition(": ")
        if k in ("artifact_key", "context", "plaintext"):
            v[k] = bytes.fromhex(val)
        elif k == "kind":
            v[k] = val
        elif k == "lineage":
            v["count"] = v.get("count", 0) + 1
    return v


def decode_text(text: str) -> bytes:
    body = text[len(seal.PREFIX):]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))


class VectorsTest(unittest.TestCase):
    """The client's seal gives the vectors' envelopes byte for byte."""

    NAMES = ("client_sealed_single", "client_sealed_aggregate_3")

    def test_vectors(self) -> None:
        for name in self.NAMES:
            with self.subTest(vector=name):
                v = read_vector(name)
                env = decode_text(v["text"])
                hlen = 69 + len(v["kind"]) + 36 * v["count"]
                header = env[:hlen]
                artifact, count, nonce = seal.parse_header(header)
                self.assertEqual((artifact, count, nonce), (header[6:22].hex(), v["count"], header[-12:]))
                key = bytearray(v["artifact_key"])
                got = seal.seal(header, key, v["plaintext"], v["context"])
                self.assertEqual(got, env)
                # memoryview and bytearray plaintexts seal alike.
                self.assertEqual(seal.seal(header, key, memoryview(bytearray(v["plaintext"])), v["context"] or None), env)
                self.assertEqual(Sealed(envelope=got, artifact=artifact, lineage_size=count).ciphertext, v["text"])
                seal.zero(key)
                self.assertEqual(key, bytearray(32))
        # The single vector has a context: without it, another envelope.
        v = read_vector("client_sealed_single")
        self.assertTrue(v["context"])
        env = decode_text(v["text"])
        header = env[:69 + len(v["kind"]) + 36]
        self.assertNotEqual(seal.seal(header, bytearray(v["artifact_key"]), v["plaintext"], None), env)

    def test_bad_headers(self) -> None:
        v = read_vector("client_sealed_single")
        header = decode_text(v["text"])[:69 + len(v["kind"]) + 36]
        key = bytearray(v["artifact_key"])

        def with_byte(i: int, b: int) -> bytes:
            return header[:i] + bytes([b]) + header[i + 1:]

        bad = {
            "bad magic": b"SHRE" + header[4:],
            "version 2": with_byte(4, 2),
            "algorithm 2": with_byte(5, 2),
            "kind length 0": with_byte(22, 0),
            "kind length 65": with_byte(22, 65),
            "kind length one more": with_byte(22, len(v["kind"]) + 1),
            "no subject": header[:23 + len(v["kind"])] + b"\x00\x00" + header[25 + len(v["kind"]):],
            "two subjects counted": header[:23 + len(v["kind"])] + b"\x00\x02" + header[25 + len(v["kind"]):],
            "a byte short": header[:-1],
            "a byte more": header + b"\x00",
            "empty": b"",
            "the whole envelope": decode_text(v["text"]),
        }
        for what, h in bad.items():
            with self.subTest(header=what):
                with self.assertRaises(ValueError):
                    seal.parse_header(h)
                with self.assertRaises(ValueError):
                    seal.seal(h, key, b"x", None)
        with self.assertRaises(ValueError):
            seal.seal(header, bytearray(31), b"x", None)

    def test_sizes(self) -> None:
        seal.check_sizes(b"", None)
        seal.check_sizes(bytes(seal.MAX_PLAINTEXT), bytes(seal.MAX_CONTEXT))
        with self.assertRaises(ValueError):
            seal.check_sizes(bytes(seal.MAX_PLAINTEXT + 1), None)
        with self.assertRaises(ValueError):
            seal.check_sizes(b"x", bytes(seal.MAX_CONTEXT + 1))
        with self.assertRaises(TypeError):
            seal.check_sizes("text", None)
        with self.assertRaises(TypeError):
            seal.check_sizes(b"x", "text")


SRV = _server.Shared()
setUpModule, tearDownModule = SRV.start, SRV.stop
fresh = _server.fresh


class SealTest(unittest.TestCase):
    """Sealing.seal and seal_many against the real server."""

    c: shredd.Client

    @classmethod
    def setUpClass(cls) -> None:
        _client.admin(SRV, "episodic", "summary")

    def setUp(self) -> None:
        self.c = _client.own(SRV)  # this test's reads are its own

    def test_seal_many_round_trip(self) -> None:
        a, b = fresh("seal-a"), fresh("seal-b")
        parent = self.c.sealing.encrypt("episodic", b"parent", subject=b)
        big = os.urandom(1 << 20)
        items: List[Dict[str, Any]] = [
            {"kind": "episodic", "plaintext": b"Alice prefers green tea.", "subject": a, "context": b"tenant=acme"},
            {"kind": "no-such-kind", "plaintext": b"lost", "subject": a},
            {"kind": "summary", "plaintext": big, "subjects": [a], "parents": [parent.artifact], "holder": "writer-1"},
            {"kind": "episodic", "plaintext": b"", "subject": a},
        ]
        keys: List[bytearray] = []
        real = seal.seal

        def spy(header: bytes, key: bytearray, plaintext: Any, context: Optional[Any]) -> bytes:
            keys.append(key)
            return real(header, key, plaintext, context)

        with mock.patch.object(seal, "seal", spy):
            res = self.c.sealing.seal_many(items)
        self.assertEqual([r.ok for r in res], [True, False, True, True])
        # Every key was 32 bytes and is zeros now.
        self.assertEqual([bytes(k) for k in keys], [bytes(32)] * 3)

        err = res[1].error
        self.assertIsInstance(err, shredd.UnknownKind)
        assert err is not None
        self.assertEqual((err.status, err.code), (400, "unknown_kind"))
        self.assertIn("item 1", err.op)
        self.assertRegex(err.request_id, "^[0-9a-f]{16}$")
        with self.assertRaises(shredd.UnknownKind):
            res[1].unwrap()

        self.assertEqual([res[i].unwrap().lineage_size for i in (0, 2, 3)], [1, 2, 1])
        for i in (0, 2, 3):
            s = res[i].unwrap()
            self.assertTrue(s.ciphertext.startswith("shredd:v1:"))
            self.assertEqual(decode_text(s.ciphertext), s.envelope)
            d = self.c.sealing.decrypt(s.ciphertext, context=items[i].get("context"))
            self.assertEqual((d.plaintext, d.artifact), (items[i]["plaintext"], s.artifact))
            art = self.c.artifacts.get(s.artifact)
            self.assertEqual((art.kind, art.sealed), (items[i]["kind"], True))
        self.assertEqual(self.c.sealing.decrypt_raw(res[2].unwrap().envelope).plaintext, big)
        self.assertEqual(self.c.artifacts.get(res[2].unwrap().artifact).parents, [parent.artifact])
        # The context is bound on the client: without it, nothing opens.
        with self.assertRaises(shredd.InvalidEnvelope):
            self.c.sealing.decrypt(res[0].unwrap().ciphertext)

        # A forget of the parent's subject erases the derivative sealed
        # here; a forget of a's erases the others.
        self.c.forgets.forget(b)
        with self.assertRaises(shredd.Shredded):
            self.c.sealing.decrypt_raw(res[2].unwrap().envelope)
        self.assertEqual(self.c.sealing.decrypt(res[3].unwrap().ciphertext).plaintext, b"")
        self.c.forgets.forget(a)
        with self.assertRaises(shredd.Shredded):
            self.c.sealing.decrypt(res[0].unwrap().ciphertext, context=b"tenant=acme")

    def test_seal_and_forget(self) -> None:
        s = fresh("seal-one")
        one = self.c.sealing.seal("episodic", b"one", subject=s, context=b"ctx")
        self.assertEqual(one.lineage_size, 1)
        opened = self.c.sealing.decrypt(one.ciphertext, context=b"ctx")
        self.assertEqual(opened.plaintext, b"one")
        self.c.forgets.forget(s)
        # 410 for a forgotten subject, alone and as a batch item; nothing is
        # sealed for it.
        # (This token holds the read of one: the writes below name it or
        # say they are not made from it.)
        with self.assertRaises(shredd.Shredded) as cm:
            self.c.sealing.seal("episodic", b"two", subject=s, independent_of=[opened.lease.id])
        self.assertEqual((cm.exception.status, cm.exception.code), (410, "shredded"))
        with self.assertRaises(shredd.Shredded):
            self.c.sealing.seal("summary", b"two", parents=[one.artifact])
        other = fresh("seal-other")
        res = self.c.sealing.seal_many([
            {"kind": "episodic", "plaintext": b"two", "subject": s, "independent_of": [opened.lease.id]},
            {"kind": "episodic", "plaintext": b"three", "subject": other, "independent_of": [opened.lease.id]},
        ])
        self.assertIsInstance(res[0].error, shredd.Shredded)
        self.assertIsNone(res[0].value)
        self.assertEqual(self.c.sealing.decrypt(res[1].unwrap().ciphertext).plaintext, b"three")
        with self.assertRaises(shredd.Shredded):
            self.c.sealing.decrypt(one.ciphertext, context=b"ctx")

    def test_refused_before_the_server(self) -> None:
        s = fresh("seal-limits")
        with self.assertRaises(ValueError):
            self.c.sealing.seal("episodic", b"x", subject=s, context=b"c" * 4097)
        with self.assertRaises(ValueError) as cm:
            self.c.sealing.seal_many([{"kind": "episodic", "plaintext": b"x", "subject": s},
                                      {"kind": "episodic", "plaintext": bytes(seal.MAX_PLAINTEXT + 1), "subject": s}])
        self.assertIn("item 1", str(cm.exception))
        with self.assertRaises(TypeError):
            self.c.sealing.seal("episodic", "text, not bytes", subject=s)  # type: ignore[arg-type]
        with self.assertRaises(ValueError):
            self.c.sealing.seal_many([])
        # Nothing was registered for s.
        self.assertEqual(self.c.forgets.preview(s).counts.total, 0)

    def test_scopes(self) -> None:
        dec = shredd.Client(SRV.url, SRV.token("seal-reader", ["decrypt"]), timeout=20)
        with self.assertRaises(shredd.Forbidden) as cm:
            dec.sealing.seal("episodic", b"x", subject=fresh("seal-scope"))
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        enc = shredd.Client(SRV.url, SRV.token("seal-writer", ["encrypt"]), timeout=20)
        sealed = enc.sealing.seal("episodic", b"x", subject=fresh("seal-scope"))
        self.assertEqual(self.c.sealing.decrypt(sealed.ciphertext).plaintext, b"x")


if __name__ == "__main__":
    unittest.main()
