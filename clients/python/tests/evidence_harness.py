"""evidence_harness runs the Python evidence reader for another process
(the Go differential test, bundle/python_diff_test.go): one request a
line on stdin, a corpus case whose files are given inline as base64
(``export``, ``attestation``, ``key``, ``log_key``, ``saved``, each of
``witnesses``; the other fields as in testdata/evidence/cases.json), one
answer a line on stdout: {"verdict", "reason", "detail"}. An exception
that is neither a refusal nor a usage error is answered as the verdict
"crash", never swallowed."""

import base64
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import shredd.verify  # noqa: E402,F401  (imported first: a broken package fails at start)
from test_evidence import run_case  # noqa: E402


def main():
    shredd.verify._ed25519()  # the cryptography package, before any request
    out = sys.stdout
    for line in sys.stdin:
        c = json.loads(line)
        try:
            verdict, reason = run_case(c, read=lambda b64: base64.b64decode(b64, validate=True))
            detail = ""
        except Exception:  # anything else is a bug the test must see
            verdict, reason, detail = "crash", "", traceback.format_exc()
        out.write(json.dumps({"verdict": verdict, "reason": reason, "detail": detail}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
