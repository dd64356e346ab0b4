#!/usr/bin/env bash
# The Python client's tests (clients/python) and the agent-memory example,
# against the real shredd binary on 127.0.0.1:
#   1. the binary: $SHREDD_BIN, else built into a temporary directory;
#   2. what is missing, from Debian: python3, cryptography (the holder kit's
#      Ed25519), setuptools, wheel, pip and venv (the install check), mypy;
#   3. mypy --strict on the package (it is shipped typed, with py.typed);
#   4. the README's install command, pip install --no-build-isolation
#      ./clients/python, into a fresh virtual environment with no package
#      index, and an import of the installed package;
#   5. python3 -m unittest: every method and error class, TLS, the
#      docs/clients.md snippets and the example end to end.
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

apt_install() {
  echo "test-python: installing from Debian: $*" >&2
  apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
}

PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || { apt_install python3; PY=python3; }
if ! "$PY" -c 'import cryptography' 2>/dev/null; then
  apt_install python3-cryptography
  # Debian's package serves Debian's interpreter; a python3 earlier on PATH
  # (pyenv, a venv) may not see it.
  "$PY" -c 'import cryptography' 2>/dev/null || PY=/usr/bin/python3
fi
# The install check needs pip, venv, setuptools and wheel (setuptools before
# 70.1 builds wheels only with the wheel package) in one interpreter: $PY
# when it has them, else Debian's python3 with Debian's packages.
has_build() { "$1" -c 'import setuptools, wheel, ensurepip, venv' 2>/dev/null && "$1" -m pip --version >/dev/null 2>&1; }
IPY=$PY
if ! has_build "$IPY"; then
  IPY=/usr/bin/python3
  missing=""
  [ -x "$IPY" ] || missing="python3"
  for m in setuptools wheel; do
    "$IPY" -c "import $m" 2>/dev/null || missing="$missing python3-$m"
  done
  "$IPY" -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
  "$IPY" -c 'import ensurepip, venv' 2>/dev/null || missing="$missing python3-venv"
  [ -z "$missing" ] || apt_install $missing
fi
MYPY=("$PY" -m mypy)
if ! "${MYPY[@]}" --version >/dev/null 2>&1; then
  /usr/bin/python3 -m mypy --version >/dev/null 2>&1 || apt_install python3-mypy
  MYPY=(/usr/bin/python3 -m mypy)
fi
echo "test-python: tests on $("$PY" --version) ($(command -v "$PY")), install check on $IPY, shredd $SHREDD_BIN" >&2

# 3. Types.
(cd clients/python && "${MYPY[@]}" --strict --no-incremental shredd)

# 4. The install command of the README, offline, in a venv that sees the
# interpreter's packages (setuptools, cryptography), from a copy of the
# package so that the checkout gets no build/ or egg-info.
"$IPY" -m venv --system-site-packages "$tmp/venv"
cp -r clients/python "$tmp/src"
"$tmp/venv/bin/python" -m pip install -q --no-index --no-build-isolation "$tmp/src"
(cd "$tmp" && "$tmp/venv/bin/python" -c '
import shredd, shredd.holder, shredd.verify, os, sys
assert shredd.__file__.startswith(sys.prefix), shredd.__file__
assert os.path.exists(os.path.join(os.path.dirname(shredd.__file__), "py.typed"))
print("test-python: installed", shredd.__version__, "at", os.path.dirname(shredd.__file__))
')

# 5. The tests, the docs snippets and the example.
(cd clients/python/tests && "$PY" -m unittest discover -s . -v)
