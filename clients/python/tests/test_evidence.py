"""The shared corpus of evidence cases (testdata/evidence) through
shredd.verify: every case must get the corpus's verdict and reason code,
those of ``shredd verify`` and the page. An export case goes through
verify_export (with its witnesses' key files and witnesses_required when
it has them), a bare attestation case (``attestation``) through
verify_attestation; the verdict ``usage`` (reason ``usage``) is a
ValueError, the Python reader's usage signal."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from shredd.verify import Refused, verify_attestation, verify_export  # noqa: E402

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "evidence")


def _read(rel):
    with open(os.path.join(CORPUS, rel), "rb") as f:
        return f.read()


def run_case(c, read=_read):
    """run_case runs one corpus case (its files read with read) through the
    Python reader and returns (verdict, reason) as the corpus spells them."""
    def opt(field):
        return read(c[field]) if c.get(field) is not None else None
    try:
        if c.get("attestation") is not None:
            verify_attestation(read(c["attestation"]), opt("key"), subject=c.get("subject"), salt=c.get("salt"))
        else:
            witnesses = c.get("witnesses")
            verify_export(read(c["export"]), opt("key"), opt("log_key"), subject=c.get("subject"), salt=c.get("salt"),
                          saved=opt("saved"), witnesses=None if witnesses is None else [read(w) for w in witnesses],
                          witnesses_required=c.get("witnesses_required"))
        return "verified", "ok"
    except Refused as e:
        return "refused", e.reason
    except ValueError:
        return "usage", "usage"


class EvidenceCorpusTest(unittest.TestCase):
    def test_corpus(self):
        with open(os.path.join(CORPUS, "cases.json"), encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 150)
        for c in cases:
            with self.subTest(c["name"]):
                self.assertEqual(run_case(c), (c["verdict"], c["reason"]), "%s: %s" % (c["name"], c["about"]))


if __name__ == "__main__":
    unittest.main()
