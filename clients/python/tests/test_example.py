"""The agent-memory example (examples/agent-memory/run.py), end to end
against the real binary, as a reader runs it: one command."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import _server  # noqa: E402

RUN = os.path.join(_server.REPO, "examples", "agent-memory", "run.py")


class ExampleTest(unittest.TestCase):
    def test_run(self) -> None:
        env = dict(os.environ, SHREDD_BIN=_server.binary())
        # Not installed: run.py finds the client in clients/python itself.
        env.pop("PYTHONPATH", None)
        r = subprocess.run([sys.executable, RUN], capture_output=True, text=True, env=env, timeout=120,
                           cwd=_server.REPO)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        out = r.stdout
        for want in ("7. epoch, then verification", "refused: 410 shredded", "cascade_closed pending",
                     "index: re-embed ran once and was refused; still 5 vectors, none added",
                     "ack closed 3, missing 0", "backups_epoch ok", "5/5 conditions ok, 1 holder ack(s) verified",
                     "holder ack: ann-index-1, key ", "(the index's), 3 vectors",
                     "shredd verify: VERIFIED", "OK: every way back to Alice's data is closed"):
            self.assertIn(want, out)
        self.assertEqual(out.count("refused: 410 shredded"), 7)
        self.assertNotIn("FAILED", out)


if __name__ == "__main__":
    unittest.main()
