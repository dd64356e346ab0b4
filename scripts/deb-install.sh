#!/usr/bin/env bash
# deb-install.sh COMMAND MESSAGE PACKAGE...: installs Debian's own PACKAGEs
# (never software downloaded from anywhere else) when COMMAND is missing,
# saying MESSAGE on stderr first, then checks that COMMAND is there. The
# installers of the tests' tools (test-browser.sh, test-node.sh) call it.
set -euo pipefail
cmd=$1 msg=$2
shift 2
if command -v "$cmd" >/dev/null 2>&1; then
  exit 0
fi
echo "$msg" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
command -v "$cmd" >/dev/null
"$cmd" --version
