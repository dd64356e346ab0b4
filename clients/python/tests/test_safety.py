"""The client must not lose lineage, context or leases on a caller's slip
(issue 27, part 1), against the real shredd binary on 127.0.0.1:

- a misspelt key of a batch item (``parent``, ``contxt``) is refused
  before anything is sent, in every call that takes items;
- bad values (text for bytes, one string for a list of ids, a lone
  surrogate) raise a shredd error, never a bare TypeError or
  UnicodeEncodeError;
- Forgets.wait times out with a shredd error that is a TimeoutError and
  names the lease the forget waits for; shredd.Timeout is a TimeoutError;
- a plain decrypt holds its lease until the caller releases it (issue
  46: a released lease is not a forgotten read, and the client no longer
  releases behind the caller's back); Leases.open never masks the
  block's exception with a failed release;
- batches over MAX_BATCH items are split, not refused.

The server here holds leases for an hour (--lease-ttl 1h): a lease this
client forgot to release would keep a forget waiting for the whole test
run, so every assertion about leases is about a release, never a timing."""

from __future__ import annotations

import os
import sys
import unittest
from typing import Any, List

sys.path.insert(0, os.path.dirname(__file__))
import _server  # noqa: E402
import _wire  # noqa: E402

import _client  # noqa: E402  (the package under test: installed, or the checkout's)
import shredd  # noqa: E402

SRV = _server.Shared("--cache-ttl", "1s", "--lease-ttl", "1h")
setUpModule, tearDownModule = SRV.start, SRV.stop
fresh = _server.fresh


def reader() -> shredd.Client:
    """reader returns a client whose token only decrypts: its reads never
    fall on a write of the admin token, which would have to declare them
    for as long as they last (an hour here)."""
    return shredd.Client(SRV.url, SRV.token("reader", ["decrypt"]), timeout=20)


class Base(unittest.TestCase):
    c: shredd.Client

    @classmethod
    def setUpClass(cls) -> None:
        _client.admin(SRV, "episodic", "summary")

    def setUp(self) -> None:
        self.c = _client.own(SRV, timeout=30)  # this test's reads are its own

    def nothing_registered(self, subject: str) -> None:
        self.assertEqual(self.c.forgets.preview(subject).counts.total, 0, "something was sent for " + subject)


class ItemKeysTest(Base):
    def test_misspelt_keys_refused_before_sending(self) -> None:
        parent_subject, s = fresh("parent"), fresh("child")
        parent = self.c.sealing.encrypt("episodic", b"Alice's message", subject=parent_subject)
        calls = {"encrypt_batch": self.c.sealing.encrypt_batch, "seal_many": self.c.sealing.seal_many}
        bad: List[Any] = [
            ({"kind": "summary", "plaintext": b"derived", "subject": s, "parent": [parent.artifact]}, "'parents'"),
            ({"kind": "episodic", "plaintext": b"x", "subject": s, "contxt": b"tenant=acme"}, "'context'"),
            ({"kind": "episodic", "plaintext": b"x", "subjetc": s}, "'subject'"),
            ({"kind": "episodic", "subject": s}, "'plaintext'"),
            ("not a dict", "dict"),
        ]
        for name, call in calls.items():
            for item, says in bad:
                with self.subTest(call=name, item=item):
                    good = {"kind": "episodic", "plaintext": b"first, valid", "subject": s}
                    with self.assertRaises(shredd.InvalidInput) as cm:
                        call([good, item])
                    self.assertIsInstance(cm.exception, shredd.Error)
                    self.assertIn("item 1", str(cm.exception))
                    self.assertIn(says, str(cm.exception))
        # Neither the valid first item nor the misspelt one was sent.
        self.nothing_registered(s)
        for item in ({"ciphertext": parent.ciphertext, "contxt": b"tenant=acme"}, {"ciphertxt": parent.ciphertext}):
            with self.assertRaises(shredd.InvalidInput) as cm2:
                self.c.sealing.decrypt_batch([item])  # type: ignore[list-item]
            self.assertIn("item 0", str(cm2.exception))

        # The same item spelt right keeps its lineage: forgetting the
        # parent's subject erases the derivative. (Every write first: the
        # reads that check them would have to be declared by later writes.)
        made = {name: call([{"kind": "summary", "plaintext": b"derived", "parents": [parent.artifact]}])
                for name, call in calls.items()}
        for name, res in made.items():
            with self.subTest(call=name, spelt="right"):
                ct = res[0].unwrap().ciphertext
                self.assertEqual(self.c.artifacts.get(res[0].unwrap().artifact).parents, [parent.artifact])
                self.assertEqual(self.c.sealing.decrypt(ct).plaintext, b"derived")
        self.c.forgets.forget(parent_subject)
        for name, res in made.items():
            with self.subTest(call=name, forgotten=True):
                with self.assertRaises(shredd.Shredded):
                    self.c.sealing.decrypt(res[0].unwrap().ciphertext)

    def test_key_sets_are_the_typed_items(self) -> None:
        # The run-time check and the TypedDicts mypy checks name the same keys.
        from shredd import types as st
        self.assertEqual(st.ENCRYPT_ITEM_KEYS, set(st.EncryptItem.__annotations__))
        self.assertEqual(st.DECRYPT_ITEM_KEYS, set(st.DecryptItem.__annotations__))
        self.assertEqual(set(st.EncryptItem.__required_keys__), {"kind", "plaintext"})  # type: ignore[attr-defined]
        self.assertEqual(set(st.DecryptItem.__required_keys__), {"ciphertext"})  # type: ignore[attr-defined]

    def test_bad_values_are_shredd_errors(self) -> None:
        s = fresh("values")
        rec = self.c.sealing.encrypt("episodic", b"r", subject=s)
        lone = "\ud800"
        cases: List[Any] = [
            ("text plaintext", lambda: self.c.sealing.encrypt("episodic", "text", subject=s), TypeError),
            ("text context", lambda: self.c.sealing.encrypt("episodic", b"x", subject=s, context="ctx"), TypeError),
            ("one string of subjects", lambda: self.c.sealing.encrypt("episodic", b"x", subjects=s), TypeError),
            ("one string of parents", lambda: self.c.sealing.encrypt("summary", b"x", parents=rec.artifact), ValueError),
            ("a parent that is no id", lambda: self.c.sealing.encrypt("summary", b"x", parents=[s]), ValueError),
            ("lone surrogate subject", lambda: self.c.sealing.encrypt("episodic", b"x", subject=s + lone), ValueError),
            ("lone surrogate forget", lambda: self.c.forgets.forget(lone), ValueError),
            ("lone surrogate kind", lambda: self.c.kinds.put("k" + lone), ValueError),
            ("lone surrogate raw subject", lambda: self.c.sealing.encrypt_raw("episodic", b"x", subject=lone), ValueError),
            ("lone surrogate holder", lambda: self.c.sealing.decrypt(rec.ciphertext, holder=lone), ValueError),
            ("lone surrogate in a batch", lambda: self.c.sealing.seal_many(
                [{"kind": "episodic", "plaintext": b"x", "subjects": [s, lone]}]), ValueError),
            ("a bytes ciphertext", lambda: self.c.sealing.decrypt(rec.ciphertext.encode()), TypeError),
            ("an inventory item", lambda: self.c.holders.inventory("h", ["not a pair"]), TypeError),
            ("a state", lambda: self.c.forgets.wait("0" * 32, "gone"), ValueError),
        ]
        for what, fn, builtin in cases:
            with self.subTest(what):
                with self.assertRaises(shredd.InvalidInput) as cm:
                    fn()
                self.assertIsInstance(cm.exception, shredd.Error)
                self.assertIsInstance(cm.exception, builtin)  # code written against the builtin still works
                self.assertNotIn(lone, str(cm.exception))
        self.assertEqual(self.c.forgets.preview(s).counts.total, 1)  # rec alone


class LeaseTest(Base):
    def test_plain_decrypt_holds_its_lease(self) -> None:
        """A plain decrypt (decrypt_raw, decrypt_batch) returns its lease
        unreleased: the forget waits (here an hour) until the caller
        releases it; hold=False, the release-right-away of earlier
        clients, is refused rather than silently changed."""
        s = fresh("plain")
        e = self.c.sealing.encrypt("episodic", b"read once", subject=s)
        raw = self.c.sealing.encrypt_raw("episodic", b"raw", subject=s)
        r = reader()
        d = r.sealing.decrypt(e.ciphertext)
        self.assertEqual(d.plaintext, b"read once")
        self.assertIsNone(d.lease.released_at)
        rd = r.sealing.decrypt_raw(raw.envelope)
        self.assertIsNone(rd.released_at)
        batch = r.sealing.decrypt_batch([e.ciphertext, raw.ciphertext])
        self.assertTrue(all(x.unwrap().lease.released_at is None for x in batch))
        for bad in (lambda: r.sealing.decrypt(e.ciphertext, hold=False),
                    lambda: r.sealing.decrypt_raw(raw.envelope, hold=False),
                    lambda: r.sealing.decrypt_batch([e.ciphertext], hold=False)):
            with self.assertRaises(shredd.InvalidInput):
                bad()
        f = self.c.forgets.forget(s)
        wq = self.c.forgets.verify(f.id).condition("workers_quiesced")
        assert wq is not None
        self.assertEqual(wq.status, "pending", wq.reason)
        # Released, no lease of these decrypts keeps the forget waiting.
        for lid in [d.lease.id, rd.lease_id] + [x.unwrap().lease.id for x in batch]:
            self.assertIsNotNone(r.leases.release(lid).released_at)
        wq = self.c.forgets.verify(f.id).condition("workers_quiesced")
        assert wq is not None
        self.assertEqual(wq.status, "ok", wq.reason)

    def test_wait_names_the_lease(self) -> None:
        s = fresh("held")
        e = self.c.sealing.encrypt("episodic", b"kept by a worker", subject=s)
        d = self.c.sealing.decrypt(e.ciphertext, holder="summarizer-7", hold=True)
        self.assertIsNone(d.lease.released_at)
        f = self.c.forgets.forget(s)
        for want in (shredd.WaitTimeout, shredd.Error, TimeoutError):
            with self.assertRaises(want) as cm:
                self.c.forgets.wait(f.id, "erased", timeout=0.2, interval=0.1)
        err = cm.exception
        assert isinstance(err, shredd.WaitTimeout)
        self.assertNotIsInstance(err, shredd.TransportError)
        self.assertIn("workers_quiesced", str(err))
        self.assertIn("lease %s (summarizer-7)" % d.lease.id, str(err))
        self.assertEqual(err.forget.id, f.id)
        self.assertIn("workers_quiesced", [c.name for c in err.pending])
        self.assertNotIn(s, str(err))
        # Released, the forget no longer waits for it.
        self.c.leases.release(d.lease)
        wq = self.c.forgets.verify(f.id).condition("workers_quiesced")
        assert wq is not None
        self.assertEqual(wq.status, "ok", wq.reason)

    def test_open_never_masks_the_block_error(self) -> None:
        e = self.c.sealing.encrypt("episodic", b"x", subject=fresh("mask"))
        c = shredd.Client(SRV.url, SRV.admin_token, retries=0)
        with self.assertRaises(RuntimeError) as cm:
            with c.leases.open(e.ciphertext) as d:
                c.transport.token = "shredd_revoked-meanwhile"  # the release will fail: 401
                raise RuntimeError("the worker failed")
        self.assertEqual(str(cm.exception), "the worker failed")
        notes = getattr(cm.exception, "__notes__", [])
        self.assertEqual(len(notes), 1, notes)
        self.assertIn("lease %s was not released" % d.lease.id, notes[0])
        self.assertIn("401 invalid_token", notes[0])
        # Without an exception of the block, the failed release is raised.
        c.transport.token = SRV.admin_token
        with self.assertRaises(shredd.Unauthorized):
            with c.leases.open(e.ciphertext):
                c.transport.token = "shredd_revoked-meanwhile"
        c.transport.token = SRV.admin_token
        with self.assertRaises(KeyError) as cm2:
            with c.leases.held(d.lease):
                c.transport.token = ""
                raise KeyError("k")
        self.assertIn("not released", getattr(cm2.exception, "__notes__", [""])[0])
        self.assertIsNotNone(self.c.leases.release(d.lease).released_at)


class TimeoutTest(unittest.TestCase):
    def test_timeout_is_a_timeout_error(self) -> None:
        ln = _wire.Listener("hang")
        try:
            c = shredd.Client(ln.url, "t", timeout=0.2, retries=0)
            with self.assertRaises(TimeoutError) as cm:
                c.kinds.list()
            self.assertIsInstance(cm.exception, shredd.Timeout)
            self.assertIsInstance(cm.exception, shredd.TransportError)
            self.assertEqual(str(cm.exception), "shredd: GET /v1/kinds: no answer within 0.2s")
        finally:
            ln.close()


class BatchLimitTest(Base):
    def test_split_past_max_batch(self) -> None:
        s = fresh("many")
        n = shredd.MAX_BATCH + 7
        items: List[shredd.EncryptItem] = [{"kind": "episodic", "plaintext": b"%d" % i, "subject": s} for i in range(n)]
        sealed = self.c.sealing.seal_many(items)
        self.assertEqual(len(sealed), n)
        self.assertTrue(all(r.ok for r in sealed))
        enc = self.c.sealing.encrypt_batch(items)
        self.assertEqual(len(enc), n)
        self.assertEqual(len({r.unwrap().artifact for r in sealed + enc}), 2 * n)
        # Item indexes in errors count over the whole call.
        res = self.c.sealing.encrypt_batch(items[:1000] + [{"kind": "no-such-kind", "plaintext": b"x", "subject": s}])
        err = res[1000].error
        self.assertIsInstance(err, shredd.UnknownKind)
        assert err is not None
        self.assertIn("item 1000", str(err))
        cts = [r.unwrap().ciphertext for r in sealed[-3:] + enc[:1000] + enc[-4:]]
        opened = self.c.sealing.decrypt_batch(cts)
        self.assertEqual([o.unwrap().plaintext for o in opened],
                         [b"%d" % i for i in range(n - 3, n)] + [b"%d" % i for i in range(1000)] +
                         [b"%d" % i for i in range(n - 4, n)])
        self.assertEqual(self.c.forgets.preview(s).counts.direct, 2 * n + 1000)

    def test_a_later_part_that_fails_keeps_the_earlier_results(self) -> None:
        # A server that takes bodies up to 128 KiB: the first part (1,000
        # empty plaintexts) fits, the second (one 100 KB plaintext) does
        # not and is refused as a whole (413).
        srv = _server.Server("--max-body", "131072")
        try:
            c = shredd.Client(srv.url, srv.admin_token, timeout=30)
            c.kinds.ensure("episodic")
            s = fresh("parts")
            items: List[shredd.EncryptItem] = [{"kind": "episodic", "plaintext": b"", "subject": s}
                                               for _ in range(shredd.MAX_BATCH)]
            items += [{"kind": "episodic", "plaintext": bytes(100_000), "subject": s},
                      {"kind": "episodic", "plaintext": b"never sent", "subject": s}]
            res = c.sealing.encrypt_batch(items)
            self.assertEqual(len(res), len(items))
            self.assertTrue(all(r.ok for r in res[:shredd.MAX_BATCH]))
            for r in res[shredd.MAX_BATCH:]:
                self.assertIsInstance(r.error, shredd.TooLarge)
            self.assertIs(res[-1].error, res[-2].error)
            # The first part took effect: its 1,000 artifacts are registered.
            self.assertEqual(c.forgets.preview(s).counts.direct, shredd.MAX_BATCH)
            self.assertEqual(c.sealing.decrypt(res[0].unwrap().ciphertext).plaintext, b"")
            # A first part refused as a whole raises: nothing took effect.
            with self.assertRaises(shredd.TooLarge):
                c.sealing.encrypt_batch(items[shredd.MAX_BATCH:])
        finally:
            srv.stop()


class KeywordTest(Base):
    def test_misspelt_keywords(self) -> None:
        s = fresh("kw")
        for fn, says in (
            (lambda: self.c.sealing.encrypt("episodic", b"x", subject=s, contxt=b"c"), "'context'"),
            (lambda: self.c.sealing.seal("episodic", b"x", subject=s, parent=["0" * 32]), "'parents'"),
            (lambda: self.c.sealing.decrypt("shredd:v1:AAAA", hodl=True), "'hold'"),
            (lambda: self.c.forgets.wait("0" * 32, timout=1), "'timeout'"),
            (lambda: self.c.artifacts.register("episodic", "h", subjects=[s], leasse=[]), "'leases'"),
        ):
            with self.subTest(says):
                with self.assertRaises(shredd.InvalidInput) as cm:
                    fn()
                self.assertIn("did you mean %s?" % says, str(cm.exception))
                self.assertIsInstance(cm.exception, TypeError)
        self.nothing_registered(s)


if __name__ == "__main__":
    unittest.main()
