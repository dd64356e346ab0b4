"""The shared corpus of evidence cases (testdata/evidence) through
shredd.verify.verify_export: every case must get the corpus's verdict and
reason code, those of ``shredd verify`` and the page."""

import json
import os
import sys
import unittest

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

from shredd.verify import Refused, verify_export  # noqa: E402

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "testdata", "evidence")


def _read(rel):
    with open(os.path.join(CORPUS, rel), "rb") as f:
        return f.read()


class EvidenceCorpusTest(unittest.TestCase):
    def test_corpus(self):
        with open(os.path.join(CORPUS, "cases.json"), encoding="utf-8") as f:
            cases = json.load(f)["cases"]
        self.assertGreaterEqual(len(cases), 150)
        for c in cases:
            with self.subTest(c["name"]):
                saved = _read(c["saved"]) if c["saved"] else None
                try:
                    verify_export(_read(c["export"]), _read(c["key"]), _read(c["log_key"]), subject=c["subject"],
                                  salt=c["salt"], saved=saved)
                    verdict, reason = "verified", "ok"
                except Refused as e:
                    verdict, reason = "refused", e.reason
                self.assertEqual((verdict, reason), (c["verdict"], c["reason"]), "%s: %s" % (c["name"], c["about"]))


if __name__ == "__main__":
    unittest.main()
