"""Runs every ```python block of docs/clients.md, in order and in one
namespace, against a live shredd: the documentation's snippets are code
that works, not prose that once did."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import _client  # noqa: E402,F401  (the package under test: installed, or the checkout's)
import _server  # noqa: E402

DOC = os.path.join(_server.REPO, "docs", "clients.md")


def python_blocks(text: str) -> list:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


class DocsTest(unittest.TestCase):
    def test_python_snippets(self) -> None:
        with open(DOC, encoding="utf-8") as f:
            text = f.read()
        section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]   # up to the next language
        blocks = python_blocks(section)
        self.assertGreaterEqual(len(blocks), 8)
        self.assertEqual(len(blocks), len(python_blocks(text)), "python blocks outside the Python section")
        srv = _server.Server("--cache-ttl", "1s", "--lease-ttl", "1h")
        old = {k: os.environ.get(k) for k in ("SHREDD_URL", "SHREDD_TOKEN_FILE", "SHREDD_DATA_DIR",
                                              "SHREDD_READER_TOKEN", "SHREDD_SUMMARIZER_TOKEN")}
        os.environ.update(SHREDD_URL=srv.url, SHREDD_TOKEN_FILE=os.path.join(srv.dir, "admin.token"),
                          SHREDD_DATA_DIR=srv.dir,
                          SHREDD_READER_TOKEN=srv.token("reader", ["decrypt"]),
                          SHREDD_SUMMARIZER_TOKEN=srv.token("summarizer", ["encrypt", "decrypt", "register"]))
        ns: dict = {"__name__": "docs_clients"}
        out = io.StringIO()
        try:
            for i, b in enumerate(blocks):
                with self.subTest(block=i, first_line=b.splitlines()[0]), contextlib.redirect_stdout(out):
                    exec(compile(b, "docs/clients.md python block %d" % i, "exec"), ns)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            srv.stop()
        printed = out.getvalue()
        # What the comments of the snippets say they print.
        self.assertIn("Health(status='ok', root_store='local'", printed)
        self.assertIn("undeclared_derivation True\n2 ['independent']\n1 ['independent', 'named']\n", printed)
        self.assertIn("PreviewCounts(total=3, direct=1, derived=2, collateral=2, plaintext_held=0)", printed)
        self.assertIn("410 shredded", printed)
        self.assertIn("AckResult(closed=[", printed)
        self.assertIn("404 not_found", printed)
        self.assertIn("invalid_token", printed)
        self.assertIn("item 0: unknown key 'parent' (did you mean 'parents'?)", printed)
        self.assertIn("b'Hana likes jazz.'\nasync shredded", printed)
        self.assertIsNotNone(ns["kept"].lease.issued_at)
        self.assertEqual(ns["f"].state, "erased")
        self.assertEqual(set(ns["report"].conditions.values()), {"ok"})
        self.assertIn("key.trailing\n", printed)
        self.assertTrue(ns["checked"].subject_checked and ns["checked"].tree_size > 0 and ns["checked"].witnessed is None)

    def test_readme_snippets(self) -> None:
        """The ```python blocks of clients/python/README.md, against a live
        server at the address and with the token file they name."""
        with open(os.path.join(_server.REPO, "clients", "python", "README.md"), encoding="utf-8") as f:
            blocks = python_blocks(f.read())
        self.assertEqual(len(blocks), 2)
        srv = _server.Server()
        ns: dict = {"__name__": "readme"}
        out = io.StringIO()
        try:
            token_file = os.path.join(srv.dir, "admin.token")
            for i, b in enumerate(blocks):
                self.assertIn('"http://127.0.0.1:7750"', b)
                b = b.replace('"http://127.0.0.1:7750"', repr(srv.url)).replace('"shredd-data/admin.token"',
                                                                               repr(token_file))
                with contextlib.redirect_stdout(out):
                    exec(compile(b, "clients/python/README.md python block %d" % i, "exec"), ns)
            with contextlib.redirect_stdout(out):
                asyncio.run(ns["main"](srv.admin_token))
        finally:
            srv.stop()
        self.assertEqual(out.getvalue(), "erased\nb'Bob likes jazz.'\n")


if __name__ == "__main__":
    unittest.main()
