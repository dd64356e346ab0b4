"""Starts the real shredd binary for the tests: on 127.0.0.1:0, in a fresh
temporary data directory, and reads the address from its "listening" log
line and the admin token from the data directory.

The binary is $SHREDD_BIN, else one built once per test run with
``go build`` from the repository (slower: scripts/test-python.sh builds it
and passes it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Any, List, Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_built: Optional[str] = None
_lock = threading.Lock()


def binary() -> str:
    """binary returns the shredd binary to run, building it when
    $SHREDD_BIN is not set."""
    global _built
    env = os.environ.get("SHREDD_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError("SHREDD_BIN=%s is not an executable file" % env)
        return env
    with _lock:
        if _built is None:
            d = tempfile.mkdtemp(prefix="shredd-pytest-bin-")
            out = os.path.join(d, "shredd")
            subprocess.run(["go", "build", "-o", out, "./cmd/shredd"], cwd=REPO, check=True)
            _built = out
        return _built


_n = [0]


def fresh(prefix: str) -> str:
    """fresh returns a subject id no other test of this process uses."""
    _n[0] += 1
    return "%s-%d-%d@example.com" % (prefix, os.getpid(), _n[0])


class Server:
    """Server is one running shredd process."""

    def __init__(self, *args: str, data_dir: Optional[str] = None, scheme: str = "http") -> None:
        self.bin = binary()
        self._own_dir = data_dir is None
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="shredd-pytest-")
        self.log_path = os.path.join(self.data_dir + ".log")
        self._log = open(self.log_path, "wb")
        cmd = [self.bin, "serve", "--data-dir", os.path.join(self.data_dir, "d"), "--addr", "127.0.0.1:0"] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        self.url = ""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("shredd exited with %s before listening:\n%s" % (self.proc.returncode, self.logs()))
            for line in self.logs().splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "listening":
                    self.url = "%s://%s" % (rec.get("scheme", scheme), rec["addr"])
                    break
            if self.url:
                break
            time.sleep(0.02)
        if not self.url:
            self.stop()
            raise RuntimeError("shredd did not log 'listening' within 20s:\n" + self.logs())
        with open(os.path.join(self.data_dir, "d", "admin.token"), encoding="ascii") as f:
            self.admin_token = f.read().strip()

    @property
    def dir(self) -> str:
        """dir is shredd's data directory."""
        return os.path.join(self.data_dir, "d")

    def logs(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def token(self, name: str, scopes: List[str], holder: Optional[str] = None, *flags: str) -> str:
        """token creates a token with ``shredd token create`` (and its
        further flags: ``--reads``, ``inherit``)."""
        cmd = [self.bin, "token", "create", "--name", name, "--scopes", ",".join(scopes), "--data-dir", self.dir]
        if holder:
            cmd += ["--holder", holder]
        cmd += list(flags)
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out.stdout.strip().splitlines()[0]

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """cli runs a shredd subcommand (verify ...) and returns its result."""
        return subprocess.run([self.bin] + list(args), capture_output=True, text=True, check=check)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            try:
                os.remove(self.log_path)
            except OSError:
                pass


class Shared:
    """Shared is the one server of a test module, started by the module's
    setUpModule and stopped by its tearDownModule::

        SRV = _server.Shared("--cache-ttl", "1s")
        setUpModule, tearDownModule = SRV.start, SRV.stop

    Between the two it answers as the Server it started (SRV.url ...)."""

    def __init__(self, *args: str) -> None:
        self._args = args
        self._srv: Optional[Server] = None

    def start(self) -> None:
        self._srv = Server(*self._args)

    def stop(self) -> None:
        if self._srv is not None:
            self._srv.stop()

    def __getattr__(self, name: str) -> Any:
        if self._srv is None:
            raise AttributeError("%s: the module's server is not started" % name)
        return getattr(self._srv, name)
