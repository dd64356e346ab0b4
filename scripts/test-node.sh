#!/usr/bin/env bash
# Installs Node.js where it is missing (Debian's nodejs package): the
# differential tests of the page's verifier (ui/evidence_test.go) run
# ui/static/verify.js under node beside the Go reader. The tests fail,
# never skip, when node is missing.
set -euo pipefail
if command -v node >/dev/null 2>&1; then
  exit 0
fi
echo "installing nodejs (Debian package) for the verifier's differential tests" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs >/dev/null
node --version
