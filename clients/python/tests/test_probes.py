"""The holder kit answers probes (docs/attestation.md §6a), against the real
shredd binary: an agent memory whose retrieval path is its index and a
cache in front of it. Its purge deletes the index rows only, so its acks
are honest about the rows while its path still answers from the cache: the
probe finds the vector and the forget waits; once the cache is dropped, a
later probe is clean, the forget is erased, and its attestation carries
the holder's signed clean answers, which the Python reader verifies."""

from __future__ import annotations

import os
import sys
import threading
import time
import unittest
from datetime import timedelta
from typing import List, Set

sys.path.insert(0, os.path.dirname(__file__))
import _client  # noqa: E402  (the package under test: installed, or the checkout's)

import shredd  # noqa: E402
import shredd.verify as sv  # noqa: E402
from shredd.holder import HolderKit, ProbeOutcome  # noqa: E402

import _server  # noqa: E402


class AgentMemory:
    """AgentMemory keeps vectors in an index and, on its query path, a
    cache of recent ones; search looks in both, as the agent's answers do."""

    def __init__(self) -> None:
        self.index: Set[str] = set()
        self.cache: Set[str] = set()
        self.lock = threading.Lock()
        self.searched: List[tuple] = []

    def put(self, art: str) -> None:
        with self.lock:
            self.index.add(art)
            self.cache.add(art)

    def purge(self, work: shredd.PurgeWork) -> List[str]:
        with self.lock:
            for a in work.artifacts:
                self.index.discard(a)  # the cache is left: the ack is honest about the rows only
            return list(work.artifacts)

    def search(self, forget: str, artifacts: List[str], markers: List[str]) -> List[str]:
        with self.lock:
            self.searched.append((forget, list(artifacts), list(markers)))
            return [a for a in artifacts if a in self.index or a in self.cache]


class ProbesTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = _server.Server("--epoch-interval", "1s", "--cache-ttl", "0s")
        self.addCleanup(self.srv.stop)
        self.admin = _client.admin(self.srv, "episodic", "embedding")

    def kit(self, hid: str) -> HolderKit:
        hc = shredd.Client(self.srv.url, self.srv.token("kit-" + hid, ["register"], holder=hid))
        kit = HolderKit(hc, hid, HolderKit.generate_key())
        kit.register(self.admin)
        return kit

    def rounds(self, kit: HolderKit, mem: AgentMemory, until, timeout: float = 60) -> List[ProbeOutcome]:
        """rounds runs purge and probe rounds until until(outcomes) holds."""
        seen: List[ProbeOutcome] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for o in kit.purge(mem.purge):
                self.assertIsNone(o.error)
            seen += kit.probe_once(mem.search)
            if until(seen):
                return seen
            time.sleep(0.1)
        self.fail("no such round in %ss: %r" % (timeout, seen))

    def test_probe_rounds(self) -> None:
        hid = "agent-cache"
        kit = self.kit(hid)
        self.assertEqual(kit.declare_probes("1s"), "1s")
        self.assertEqual(kit.declare_probes(timedelta(seconds=1)), "1s")
        with self.assertRaises(shredd.InvalidRequest) as cm:
            kit.declare_probes("0s")
        self.assertEqual(cm.exception.status, 400)
        with self.assertRaises(shredd.InvalidInput):
            kit.declare_probes(-1)
        self.assertEqual(kit.probes(), [])
        mem = AgentMemory()
        rec = self.admin.sealing.encrypt("episodic", b"alice: allergic to penicillin", subject="alice@example.com")
        vec = kit.register_artifact("embedding", parents=[rec.artifact])
        mem.put(vec.artifact)
        f = self.admin.forgets.forget("alice@example.com")

        # The first probe comes once the holder acked: its path still
        # returns the cached vector, and says so, signed.
        while not kit.probes():
            for o in kit.purge(mem.purge):
                self.assertIsNone(o.error)
            time.sleep(0.05)
        w = kit.probes()[0]
        self.assertEqual((w.forget, w.artifacts, w.markers, len(w.nonce)), (f.id, [vec.artifact], [], 64))
        impostor = HolderKit(kit.client, hid, HolderKit.generate_key())
        with self.assertRaises(shredd.InvalidSignature) as cm2:
            impostor.answer_probe(w, [])
        self.assertEqual((cm2.exception.status, cm2.exception.code), (400, "invalid_signature"))
        # A path that returns what was not asked answers nothing; one that fails neither.
        out = kit.probe_once(lambda forget, arts, marks: ["not-asked"])
        self.assertIsInstance(out[0].error, shredd.InvalidInput)
        self.assertIsNone(out[0].result)

        def boom(forget: str, arts: List[str], marks: List[str]) -> List[str]:
            raise OSError("index down")
        self.assertIsInstance(kit.probe_once(boom)[0].error, OSError)
        out = kit.probe_once(mem.search)
        self.assertEqual([(o.probe, o.found, o.result) for o in out],
                         [(w.probe, [vec.artifact], shredd.ProbeResult(probe=w.probe, clean=False))])
        self.assertEqual(mem.searched[-1], (f.id, [vec.artifact], []))
        with self.assertRaises(shredd.Conflict):
            kit.answer_probe(w, [vec.artifact])  # answered already
        with self.assertRaises(shredd.NotFound):
            kit.answer_probe(shredd.ProbeWork(probe="0" * 32, forget=f.id, nonce=w.nonce, artifacts=w.artifacts, markers=[],
                                              deadline=w.deadline), [])
        time.sleep(2.5)  # past the compaction interval: the forget still waits for this holder
        self.rounds(kit, mem, lambda seen: any(o.result is not None for o in seen))
        g = self.admin.forgets.get(f.id)
        self.assertNotEqual(g.state, "erased")
        self.assertIn(hid, g.condition("cascade_closed").reason)

        # The cache is dropped: a later probe is clean, and the forget erased.
        with mem.lock:
            mem.cache.clear()
        self.rounds(kit, mem, lambda seen: self.admin.forgets.get(f.id).state == "erased")
        with open(os.path.join(self.srv.dir, "attestation.pub"), "rb") as fh:
            att = sv.verify_attestation(self.admin.forgets.attestation(f.id), fh.read(), forget=f.id)
        self.assertTrue(att.probes)
        for p in att.probes:
            self.assertEqual((p["holder"], p["artifacts"], p["found"]), (hid, [vec.artifact], []))
        self.assertNotIn("ack_only_holders", [r["kind"] for r in att.predicate["residuals"]])
        kit.withdraw_probes()


if __name__ == "__main__":
    unittest.main()
