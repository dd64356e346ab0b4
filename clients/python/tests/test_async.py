"""shredd.AsyncClient under asyncio against the real shredd binary on
127.0.0.1: the methods of Client, awaited, with the same answers and the
same exceptions."""

from __future__ import annotations

import asyncio
import os
import sys
import unittest
from typing import List

sys.path.insert(0, os.path.dirname(__file__))
import _server  # noqa: E402
import _wire  # noqa: E402

import _client  # noqa: E402,F401  (the package under test: installed, or the checkout's)
import shredd  # noqa: E402

SRV = _server.Shared("--cache-ttl", "1s", "--lease-ttl", "1h")
setUpModule, tearDownModule = SRV.start, SRV.stop
fresh = _server.fresh


class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        await shredd.AsyncClient(SRV.url, SRV.admin_token, timeout=30).kinds.ensure("episodic", "summary", "embedding")
        self.c = shredd.AsyncClient.of(_client.own(SRV, timeout=30))  # this test's reads are its own

    async def test_seal_open_forget(self) -> None:
        h = await self.c.health()
        self.assertEqual(h.status, "ok")
        self.assertTrue(await self.c.live())
        s = fresh("async")
        # Concurrent calls: each in its own worker thread and connection.
        recs = await asyncio.gather(*[self.c.sealing.encrypt("episodic", b"m%d" % i, subject=s, context=b"t")
                                      for i in range(16)])
        self.assertEqual(len({r.artifact for r in recs}), 16)
        # The reads and the writes made from them, in a unit of work: its
        # writes name its reads, and its end releases their leases (the
        # server holds leases for an hour: one left would keep the forget
        # below waiting).
        async with self.c.unit() as u:
            opened = await asyncio.gather(*[u.decrypt(r.ciphertext, context=b"t") for r in recs])
            self.assertEqual([o.plaintext for o in opened], [b"m%d" % i for i in range(16)])
            self.assertTrue(all(o.lease.released_at is None and o.lease.unit == u.id for o in opened))
            summary = await u.derive("summary", b"all of them", [r.artifact for r in recs[:2]])
            self.assertEqual(summary.lineage_size, 1)
            sealed = await u.seal_many([{"kind": "episodic", "plaintext": b"sealed here", "subject": s}])
            raw = await u.encrypt_raw("episodic", b"raw", subject=s)
            self.assertEqual((await u.decrypt_raw(raw.envelope)).plaintext, b"raw")
            batch = await u.decrypt_batch([sealed[0].unwrap().ciphertext, summary.ciphertext])
            self.assertEqual([b.unwrap().plaintext for b in batch], [b"sealed here", b"all of them"])
            self.assertEqual(len(u.leases), 19)
        for lid in u.leases:
            self.assertIsNotNone((await self.c.leases.release(lid)).released_at)  # released by the block's end

        async with self.c.leases.open(recs[0].ciphertext, context=b"t", holder="async-worker") as d:
            self.assertEqual(d.plaintext, b"m0")
            self.assertIsNone(d.lease.released_at)
            lease = d.lease
        self.assertIsNotNone((await self.c.leases.release(lease)).released_at)

        pv = await self.c.forgets.preview(s)
        self.assertEqual((pv.counts.direct, pv.counts.derived), (18, 1))
        f = await self.c.forgets.forget(s)
        self.assertRegex(f.commitment_salt, "^[0-9a-f]{64}$")
        with self.assertRaises(shredd.Shredded) as cm:
            await self.c.sealing.decrypt(recs[0].ciphertext, context=b"t")
        self.assertEqual((cm.exception.status, cm.exception.code), (410, "shredded"))
        with self.assertRaises(shredd.Shredded):
            await self.c.sealing.decrypt(summary.ciphertext)
        self.assertIn(f.id, [x.id async for x in self.c.forgets.iterate(limit=2)])
        await self.c.epoch()
        done = await self.c.forgets.wait(f.id, "erased", timeout=30, interval=0.2)
        self.assertEqual(done.state, "erased")
        att = await self.c.forgets.attestation(f.id)
        self.assertTrue(att.startswith(b"{"))
        r = await self.c.forgets.reinstate(s, "returned")
        self.assertEqual((r.generation, r.previous_generation, r.forget), (2, 1, f.id))
        with self.assertRaises(shredd.NotForgotten):
            await self.c.forgets.reinstate(s)

    async def test_same_errors(self) -> None:
        s = fresh("async-err")
        with self.assertRaises(shredd.InvalidInput) as cm:
            await self.c.sealing.encrypt_batch([{"kind": "episodic", "plaintext": b"x", "subject": s,
                                                 "parent": ["0" * 32]}])  # type: ignore[typeddict-item]
        self.assertIn("'parents'", str(cm.exception))
        self.assertEqual((await self.c.forgets.preview(s)).counts.total, 0)
        with self.assertRaises(shredd.InvalidInput):
            await self.c.sealing.encrypt("episodic", "text", subject=s)  # type: ignore[arg-type]
        with self.assertRaises(shredd.NotFound):
            await self.c.forgets.get("d" * 32)
        with self.assertRaises(shredd.UnknownKind):
            await self.c.sealing.encrypt("no-such-kind", b"x", subject=s)
        # A lease held keeps the forget waiting, and the timeout names it.
        e = await self.c.sealing.encrypt("episodic", b"x", subject=s)
        d = await self.c.sealing.decrypt(e.ciphertext, hold=True, holder="async-holder")
        f = await self.c.forgets.forget(s)
        with self.assertRaises(shredd.WaitTimeout) as cm2:
            await self.c.forgets.wait(f.id, timeout=0.2, interval=0.1)
        self.assertIsInstance(cm2.exception, TimeoutError)
        self.assertIn(d.lease.id, str(cm2.exception))
        # The block's exception wins over a failed release.
        c2 = shredd.AsyncClient.of(shredd.Client(SRV.url, SRV.admin_token, retries=0))
        e2 = await self.c.sealing.encrypt("episodic", b"y", subject=fresh("async-mask"),
                                          independent_of=[d.lease.id])  # this token still holds that read
        with self.assertRaises(RuntimeError) as cm3:
            async with c2.leases.open(e2.ciphertext):
                c2.sync.transport.token = "shredd_revoked"
                raise RuntimeError("worker failed")
        self.assertIn("not released", getattr(cm3.exception, "__notes__", [""])[0])

    async def test_probe_calls(self) -> None:
        from shredd.holder import HolderKit
        hid = "async-probes-%d" % os.getpid()
        kit = HolderKit(self.c.sync, hid, HolderKit.generate_key())
        await self.c.holders.register(hid, kit.public_key)
        self.assertEqual(await self.c.holders.declare_probes(hid, 90), "1m30s")
        self.assertEqual(await self.c.holders.probes(hid), [])
        await self.c.holders.withdraw_probes(hid)
        with self.assertRaises(shredd.NotFound):
            await self.c.holders.answer_probe(hid, "0" * 32, [], b"\0" * 64)

    async def test_transport_timeout(self) -> None:
        ln = _wire.Listener("hang")
        try:
            c = shredd.AsyncClient(ln.url, "t", timeout=0.2, retries=0)
            with self.assertRaises(shredd.Timeout) as cm:
                await c.kinds.list()
            self.assertIsInstance(cm.exception, TimeoutError)
        finally:
            await asyncio.to_thread(ln.close)

    async def test_every_method_is_mirrored(self) -> None:
        sync = shredd.Client(SRV.url, SRV.admin_token)
        parts = ("kinds", "sealing", "leases", "artifacts", "forgets", "holders", "log")
        missing: List[str] = []
        for p in parts + ("", "unit"):
            s_obj = sync.unit() if p == "unit" else getattr(sync, p) if p else sync
            a_obj = self.c.unit() if p == "unit" else getattr(self.c, p) if p else self.c
            for name in dir(s_obj):
                if name.startswith("_") or name in parts or name in ("transport", "from_data_dir"):
                    continue
                if callable(getattr(s_obj, name)) and not hasattr(a_obj, name):
                    missing.append("%s.%s" % (p, name))
        self.assertEqual(missing, [])


if __name__ == "__main__":
    unittest.main()
