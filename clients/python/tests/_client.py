"""Puts the shredd package under test on the import path: the installed one
when $SHREDD_TEST_INSTALLED is 1 (scripts/test-python.sh installs the
package into a virtual environment and tests that), else this checkout's
(``python3 -m unittest`` from clients/python/tests, no install needed)."""

from __future__ import annotations

import os
import sys
from typing import Any

CHECKOUT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
INSTALLED = os.environ.get("SHREDD_TEST_INSTALLED") == "1"

if not INSTALLED and CHECKOUT not in sys.path:
    sys.path.insert(0, CHECKOUT)

import shredd  # noqa: E402

if INSTALLED and os.path.abspath(shredd.__file__).startswith(CHECKOUT + os.sep):
    raise RuntimeError("SHREDD_TEST_INSTALLED=1 but shredd comes from the checkout: %s" % shredd.__file__)


def admin(srv: Any, *kinds: str, timeout: float = 20) -> shredd.Client:
    """admin returns a client of srv (a _server.Shared or Server) with its
    admin token, after making sure the kinds exist."""
    c = shredd.Client(srv.url, srv.admin_token, timeout=timeout)
    if kinds:
        c.kinds.ensure(*kinds)
    return c


_own = [0]


def own(srv: Any, timeout: float = 20) -> shredd.Client:
    """own returns a client of srv with a new token of the admin scope.
    A token's reads are attributable to its writes until their leases
    expire (docs/api.md "What a read costs a writer"): tests that share a
    token would answer for each other's reads, so each test that reads
    takes a token of its own."""
    _own[0] += 1
    return shredd.Client(srv.url, srv.token("test-%d-%d" % (os.getpid(), _own[0]), ["admin"]), timeout=timeout)
