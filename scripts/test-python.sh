#!/usr/bin/env bash
# The Python client's tests (clients/python) and the agent-memory example,
# against the real shredd binary on 127.0.0.1:
#   1. the binary: $SHREDD_BIN, else built into a temporary directory;
#   2. the interpreter, said out loud: $PYTHON, else python3 on PATH when it
#      has the cryptography package (the holder kit's Ed25519, client-side
#      sealing), else Debian's /usr/bin/python3 with python3-cryptography;
#   3. what is missing, from Debian: python3-venv, the setuptools and wheel
#      wheels (the offline package index below) and mypy;
#   4. the README's install line, `pip install ./clients/python`, into a
#      fresh virtual environment of that interpreter (--system-site-packages,
#      for cryptography), with pip's package index replaced by a directory of
#      Debian's setuptools and wheel wheels (PIP_NO_INDEX, PIP_FIND_LINKS:
#      there is no PyPI here), so that pip builds in isolation exactly as it
#      does with PyPI; the same line for python3 on PATH when that is another
#      interpreter (a pyenv or python.org build, with no wheel package); and
#      the fully offline `pip install --no-build-isolation --no-index` into a
#      second environment;
#   5. mypy --strict on the package and on the example;
#   6. the tests (every method and error class, the asyncio client, TLS, the
#      docs/clients.md snippets, the example end to end) with the virtual
#      environment's python, on the installed package, not the checkout.
# Exits nonzero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "${SHREDD_BIN:-}" ]; then
  go build -o "$tmp/shredd" ./cmd/shredd
  SHREDD_BIN="$tmp/shredd"
fi
export SHREDD_BIN

updated=""
apt_install() {
  echo "test-python: installing from Debian: $*" >&2
  [ -n "$updated" ] || apt-get update -qq
  updated=1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=300 "$@" >/dev/null
}

# 2. The interpreter.
path_py=$(command -v python3 || true)
if [ -n "${PYTHON:-}" ]; then
  PY=$(command -v "$PYTHON")
  why="\$PYTHON"
elif [ -n "$path_py" ] && "$path_py" -c 'import cryptography' 2>/dev/null; then
  PY=$path_py
  why="python3 on PATH"
else
  PY=/usr/bin/python3
  why="python3 on PATH (${path_py:-none}) has no cryptography package: Debian's python3, with python3-cryptography"
  [ -x "$PY" ] || apt_install python3
  "$PY" -c 'import cryptography' 2>/dev/null || apt_install python3-cryptography
fi
if ! "$PY" -c 'import cryptography' 2>/dev/null; then
  echo "test-python: $PY has no cryptography package (the holder kit and client-side sealing need it): install it for that interpreter, or unset PYTHON" >&2
  exit 1
fi
echo "test-python: interpreter $PY ($("$PY" --version 2>&1)), $why; shredd $SHREDD_BIN" >&2

# 3. What the install checks and the type check need.
missing=""
"$PY" -c 'import ensurepip, venv' 2>/dev/null || missing="$missing python3-venv"
wheels=/usr/share/python-wheels
ls "$wheels"/setuptools-*.whl >/dev/null 2>&1 || missing="$missing python3-setuptools-whl"
ls "$wheels"/wheel-*.whl >/dev/null 2>&1 || missing="$missing python3-wheel-whl"
/usr/bin/python3 -m mypy --version >/dev/null 2>&1 || missing="$missing python3-mypy"
[ -z "$missing" ] || apt_install $missing

# 4. The install line of the README, offline. From a copy of the package,
# so that the checkout gets no build/ or egg-info.
cp -r clients/python "$tmp/src"
installed() { # venv: the package imports from the venv, typed
  (cd "$tmp" && "$1/bin/python" -c '
import os, sys, shredd, shredd.aio, shredd.holder, shredd.verify
d = os.path.dirname(shredd.__file__)
assert d.startswith(sys.prefix), d
assert os.path.exists(os.path.join(d, "py.typed"))
print("test-python: %s: shredd %s installed in %s" % (sys.version.split()[0], shredd.__version__, d))
')
}
index_for() { # interpreter, directory: a package index of setuptools and wheel for it
  # The setuptools its ensurepip bundles (Python up to 3.11; Debian's
  # ensurepip takes the one of python3-setuptools-whl, which is patched for
  # Debian's interpreter and fails in another), and Debian's wheel.
  local bundled
  bundled=$("$1" -c 'import ensurepip, os; print(os.path.join(os.path.dirname(ensurepip.__file__), "_bundled"))')
  mkdir -p "$2"
  cp "$bundled"/setuptools-*.whl "$2"/ 2>/dev/null || cp "$wheels"/setuptools-*.whl "$2"/
  cp "$wheels"/wheel-*.whl "$2"/
}
# pip install ./clients/python, with an index that is a directory.
index_for "$PY" "$tmp/index"
"$PY" -m venv --system-site-packages "$tmp/venv"
(cd "$tmp" && PIP_NO_INDEX=1 PIP_FIND_LINKS=$tmp/index venv/bin/pip install -q ./src)
installed "$tmp/venv"
if [ -n "$path_py" ] && [ "$(readlink -f "$path_py")" != "$(readlink -f "$PY")" ] &&
   "$path_py" -c 'import ensurepip, venv' 2>/dev/null; then
  index_for "$path_py" "$tmp/index-path"
  "$path_py" -m venv "$tmp/venv-path"
  (cd "$tmp" && PIP_NO_INDEX=1 PIP_FIND_LINKS=$tmp/index-path venv-path/bin/pip install -q ./src)
  installed "$tmp/venv-path"
fi
# With neither an index nor an isolated build: the interpreter's own
# setuptools and wheel (Debian's python3-setuptools, python3-wheel) or,
# when it lacks them, those of the wheels directory, installed first.
"$PY" -m venv --system-site-packages "$tmp/venv-nbi"
"$tmp/venv-nbi/bin/python" -c 'import setuptools, wheel' 2>/dev/null ||
  "$tmp/venv-nbi/bin/pip" install -q --no-index --find-links "$tmp/index" setuptools wheel
"$tmp/venv-nbi/bin/pip" install -q --no-index --no-build-isolation "$tmp/src"
installed "$tmp/venv-nbi"

# 5. Types: the package (shipped typed, with py.typed) and the example.
(cd clients/python && /usr/bin/python3 -m mypy --strict --no-incremental shredd)
MYPYPATH=clients/python /usr/bin/python3 -m mypy --strict --no-incremental --cache-dir=/dev/null \
  examples/agent-memory/run.py examples/agent-memory/memory.py

# 6. The tests, the docs snippets and the example, on the installed package.
VPY="$tmp/venv/bin/python"
echo "test-python: tests with $VPY ($("$VPY" --version 2>&1), a virtual environment of $PY)" >&2
(cd clients/python/tests && SHREDD_TEST_INSTALLED=1 "$VPY" -m unittest discover -s . -v)
