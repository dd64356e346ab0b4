"""What a read costs a writer (docs/api.md, docs/clients.md "Reads are
lineage"), against the real shredd binary: a write made while its token
holds attributable reads must name them or declare itself independent,
else the token's policy refuses it (UndeclaredDerivation) or gives it
their lineage (inherited); a unit of work names its reads on every write.

Each test reads and writes with a token of its own (``writer``): a token's
reads are attributable to its writes until the lease expires, so tests
sharing one token would answer for each other's reads. The server's
leases last 3 s, so that one test can wait for an expiry."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
import unittest
from typing import Dict, List

sys.path.insert(0, os.path.dirname(__file__))
import _client  # noqa: E402  (the package under test: installed, or the checkout's)

import shredd  # noqa: E402

import _server  # noqa: E402

LEASE_TTL = 3.0
SRV = _server.Shared("--cache-ttl", "1s", "--lease-ttl", "%gs" % LEASE_TTL)
setUpModule, tearDownModule = SRV.start, SRV.stop

fresh = _server.fresh
_tokens = [0]


def writer(*flags: str) -> shredd.Client:
    """writer returns a client with a new token that encrypts, decrypts
    and registers, made with shredd token create and its flags."""
    _tokens[0] += 1
    tok = SRV.token("writer-%d" % _tokens[0], ["encrypt", "decrypt", "register"], None, *flags)
    return shredd.Client(SRV.url, tok, timeout=20)


class ReadsTest(unittest.TestCase):
    admin: shredd.Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.admin = _client.admin(SRV, "episodic", "summary", "embedding")

    def record(self, subject: str, pt: bytes = b"a record") -> shredd.Encrypted:
        return self.admin.sealing.encrypt("episodic", pt, subject=subject)

    def reads(self, artifact: str) -> Dict[str, str]:
        return {r.lease: r.how for r in self.admin.artifacts.get(artifact).reads}

    def assertUndeclared(self, err: BaseException, leases: List[str]) -> None:
        self.assertIsInstance(err, shredd.UndeclaredDerivation)
        assert isinstance(err, shredd.UndeclaredDerivation)
        self.assertIsInstance(err, shredd.Conflict)
        self.assertEqual((err.status, err.code), (409, "undeclared_derivation"))
        self.assertEqual(err.leases, sorted(leases))
        self.assertTrue(err.detail)

    def test_undeclared_is_refused_on_every_write(self) -> None:
        w = writer()
        alice = self.record(fresh("alice"))
        d = w.sealing.decrypt(alice.ciphertext)
        lid = d.lease.id
        bob = fresh("bob")
        for name, call in [
            ("encrypt", lambda: w.sealing.encrypt("summary", b"x", subject=bob)),
            ("encrypt_raw", lambda: w.sealing.encrypt_raw("summary", b"x", subject=bob)),
            ("seal", lambda: w.sealing.seal("summary", b"x", subject=bob)),
            ("register", lambda: w.artifacts.register("embedding", "ann-1", subject=bob)),
            ("encrypt_batch", lambda: w.sealing.encrypt_batch([{"kind": "summary", "plaintext": b"x",
                                                                 "subject": bob}])[0].unwrap()),
            ("seal_many", lambda: w.sealing.seal_many([{"kind": "summary", "plaintext": b"x",
                                                         "subject": bob}])[0].unwrap()),
        ]:
            with self.subTest(name):
                with self.assertRaises(shredd.UndeclaredDerivation) as cm:
                    call()
                self.assertUndeclared(cm.exception, [lid])
        # Released, the read is still attributable until it expires.
        w.leases.release(d.lease)
        with self.assertRaises(shredd.UndeclaredDerivation):
            w.sealing.encrypt("summary", b"x", subject=bob)
        # Another token's writes do not answer for w's reads.
        writer().sealing.encrypt("summary", b"x", subject=bob)

    def test_declarations_are_recorded(self) -> None:
        w = writer()
        alice = self.record(fresh("alice"))
        lid = w.sealing.decrypt(alice.ciphertext).lease.id
        bob = fresh("bob")
        named = w.sealing.encrypt("summary", b"from alice", subject=bob, leases=[lid])
        self.assertEqual((named.lineage_size, named.inherited), (2, []))
        of = w.sealing.encrypt("summary", b"not from alice", subject=bob, independent_of=[lid])
        ind = w.sealing.encrypt("summary", b"from nothing read", subject=bob, independent=True)
        raw_of = w.sealing.encrypt_raw("summary", b"raw", subject=bob, independent_of=[lid])
        raw_ind = w.sealing.encrypt_raw("summary", b"raw", subject=bob, independent=True)
        sealed = w.sealing.seal("summary", b"here", subject=bob, independent=True)
        reg = w.artifacts.register("embedding", "ann-1", subject=bob, independent_of=[lid])
        batch = w.sealing.encrypt_batch([
            {"kind": "summary", "plaintext": b"b", "subject": bob, "independent": True},
            {"kind": "summary", "plaintext": b"b", "subject": bob, "independent_of": [lid]},
            {"kind": "summary", "plaintext": b"b", "subject": bob},
        ])
        self.assertUndeclared(batch[2].error or Exception(), [lid])
        for name, art, how, lineage in [
            ("named", named.artifact, "named", 2),
            ("independent_of", of.artifact, "independent", 1),
            ("independent", ind.artifact, "independent", 1),
            ("raw independent_of", raw_of.artifact, "independent", 1),
            ("raw independent", raw_ind.artifact, "independent", 1),
            ("seal independent", sealed.artifact, "independent", 1),
            ("register independent_of", reg.artifact, "independent", 1),
            ("batch independent", batch[0].unwrap().artifact, "independent", 1),
            ("batch independent_of", batch[1].unwrap().artifact, "independent", 1),
        ]:
            with self.subTest(name):
                got = self.admin.artifacts.get(art)
                self.assertEqual(got.lineage_size, lineage)
                self.assertEqual({r.lease: r.how for r in got.reads}, {lid: how})
        # Arguments the client refuses before sending anything.
        for bad in (lambda: w.sealing.encrypt("summary", b"x", subject=bob, independent="yes"),  # type: ignore[arg-type]
                    lambda: w.sealing.encrypt("summary", b"x", subject=bob, independent_of=lid),
                    lambda: w.sealing.encrypt("summary", b"x", subject=bob, unit="no spaces"),
                    lambda: w.sealing.encrypt("summary", b"x", subject=bob, unit="u" * 65),
                    lambda: w.sealing.encrypt_batch([{"kind": "summary", "plaintext": b"x", "subject": bob,
                                                      "independant": True}])):  # type: ignore[typeddict-item]
            with self.assertRaises(shredd.InvalidInput):
                bad()

    def test_inherit_policy(self) -> None:
        w = writer("--reads", "inherit")
        a = fresh("alice")
        alice = self.record(a, b"Alice prefers green tea.")
        lid = w.sealing.decrypt(alice.ciphertext).lease.id
        bob = fresh("bob")
        e = w.sealing.encrypt("summary", b"Bob likes what Alice likes.", subject=bob)
        self.assertEqual((e.inherited, e.lineage_size), ([lid], 2))
        self.assertEqual(self.reads(e.artifact), {lid: "inherited"})
        raw = w.sealing.encrypt_raw("summary", b"raw", subject=bob)
        self.assertEqual((raw.inherited, raw.lineage_size), ([lid], 2))
        sealed = w.sealing.seal("summary", b"here", subject=bob)
        self.assertEqual((sealed.inherited, sealed.lineage_size), ([lid], 2))
        reg = w.artifacts.register("embedding", "ann-1", subject=bob)
        self.assertEqual(reg.lineage_size, 2)
        self.assertEqual(self.reads(reg.artifact), {lid: "inherited"})
        self.admin.forgets.forget(a)
        for ct in (e.ciphertext, sealed.ciphertext, raw.ciphertext):
            with self.assertRaises(shredd.Shredded):
                self.admin.sealing.decrypt(ct)

    def test_unit(self) -> None:
        w = writer()
        alice, carol = self.record(fresh("alice")), self.record(fresh("carol"))
        dan = self.admin.sealing.encrypt_raw("episodic", b"Dan sails.", subject=fresh("dan"))
        bob = fresh("bob")
        with w.unit() as u:
            self.assertRegex(u.id, "^[0-9a-f]{16}$")
            d = u.decrypt(alice.ciphertext, holder="summarizer-1")
            self.assertEqual((d.lease.unit, d.lease.holder), (u.id, "summarizer-1"))
            b = u.decrypt_batch([carol.ciphertext, "shredd:v1:AAAA"])
            self.assertTrue(b[0].ok and not b[1].ok)
            rd = u.decrypt_raw(dan.envelope)
            reads = [d.lease.id, b[0].unwrap().lease.id, rd.lease_id]
            self.assertEqual(u.leases, reads)

            # Another unit of the token does not answer for u's reads; a
            # write outside every unit does.
            with w.unit() as v:
                v.encrypt("episodic", b"alone", subject=fresh("erin"))
            with self.assertRaises(shredd.UndeclaredDerivation) as cm:
                w.sealing.encrypt("episodic", b"x", subject=fresh("erin"))
            self.assertUndeclared(cm.exception, reads)

            arts = {
                "encrypt": u.encrypt("summary", b"s", subject=bob).artifact,
                "derive": u.derive("summary", b"s", [alice.artifact]).artifact,
                "encrypt_raw": u.encrypt_raw("summary", b"s", subject=bob).artifact,
                "seal": u.seal("summary", b"s", subject=bob).artifact,
                "register": u.register("embedding", "summarizer-1", subject=bob).artifact,
                "encrypt_batch": u.encrypt_batch([{"kind": "summary", "plaintext": b"s", "subject": bob}])[0]
                .unwrap().artifact,
                "seal_many": u.seal_many([{"kind": "summary", "plaintext": b"s", "subject": bob}])[0]
                .unwrap().artifact,
            }
            with self.assertRaises(shredd.InvalidInput):
                u.encrypt_batch([{"kind": "summary", "plaintext": b"s", "subject": bob, "unit": "another"}])
        for name, art in arts.items():
            with self.subTest(name):
                self.assertEqual(self.reads(art), {x: "named" for x in reads})
                self.assertGreaterEqual(self.admin.artifacts.get(art).lineage_size, 3)
        # The block's end released the leases and closed the unit.
        for x in reads:
            self.assertIsNotNone(w.leases.release(x).released_at)
        with self.assertRaises(shredd.InvalidInput):
            u.decrypt(alice.ciphertext)
        u.close()  # again: nothing

    def test_unit_block_error_wins(self) -> None:
        e = self.record(fresh("mask"))
        tok = SRV.token("mask-%d" % os.getpid(), ["encrypt", "decrypt", "register"])
        c = shredd.Client(SRV.url, tok, retries=0)
        with self.assertRaises(RuntimeError) as cm:
            with c.unit() as u:
                d = u.decrypt(e.ciphertext)
                c.transport.token = "shredd_revoked-meanwhile"  # the release will fail: 401
                raise RuntimeError("the step failed")
        self.assertEqual(str(cm.exception), "the step failed")
        notes = getattr(cm.exception, "__notes__", [])
        self.assertEqual(len(notes), 1, notes)
        self.assertIn("lease %s of unit %s was not released" % (d.lease.id, u.id), notes[0])
        # Without an exception of the block, the failed release is raised.
        c.transport.token = tok
        with self.assertRaises(shredd.Unauthorized):
            with c.unit() as u2:
                u2.decrypt(e.ciphertext)
                c.transport.token = "shredd_revoked-meanwhile"
        c.transport.token = tok
        self.admin.leases.release(d.lease)
        self.admin.leases.release(u2.leases[0])

    def test_expired_reads_are_not_attributable(self) -> None:
        w = writer()
        alice = self.record(fresh("alice"))
        d = w.sealing.decrypt(alice.ciphertext)
        with self.assertRaises(shredd.UndeclaredDerivation):
            w.sealing.encrypt("summary", b"x", subject=fresh("bob"))
        wait = (d.lease.expires_at.timestamp() - time.time()) + 0.5
        time.sleep(max(0.0, wait))
        e = w.sealing.encrypt("summary", b"x", subject=fresh("bob"))
        self.assertEqual((e.lineage_size, e.inherited), (1, []))
        self.assertEqual(self.reads(e.artifact), {})


class AsyncUnitTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_unit(self) -> None:
        admin = _client.admin(SRV, "episodic", "summary")
        alice = admin.sealing.encrypt("episodic", b"Alice", subject=fresh("alice"))
        w = shredd.AsyncClient.of(writer())
        bob = fresh("bob")
        async with w.unit() as u:
            self.assertTrue(re.fullmatch("[0-9a-f]{16}", u.id))
            d = await u.decrypt(alice.ciphertext)
            s = await u.encrypt("summary", b"about alice", subject=bob)
            self.assertEqual(u.leases, [d.lease.id])
        self.assertEqual({r.lease: r.how for r in admin.artifacts.get(s.artifact).reads}, {d.lease.id: "named"})
        self.assertIsNotNone(admin.leases.release(d.lease).released_at)  # released already: unchanged
        with self.assertRaises(shredd.InvalidInput):
            await u.decrypt(alice.ciphertext)
        # Outside a unit: the typed error, as in the synchronous client. A
        # write outside every unit answers for the unit's read too: it is
        # released, not forgotten, until its lease expires.
        d2 = await w.sealing.decrypt(alice.ciphertext)
        with self.assertRaises(shredd.UndeclaredDerivation) as cm:
            await w.sealing.encrypt("summary", b"x", subject=bob)
        self.assertEqual(cm.exception.leases, sorted([d.lease.id, d2.lease.id]))
        await asyncio.sleep(0)


if __name__ == "__main__":
    unittest.main()
