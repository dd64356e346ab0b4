#!/usr/bin/env bash
# Installs what the browser tests of the auditor page (ui/browser_test.go)
# need where it is missing: headless Chromium from Debian's own packages
# (the `chromium` package; never a browser downloaded from anywhere else)
# and the fonts it renders the screenshots with. scripts/test.sh calls it
# before `go test`; the tests fail, never skip, when Chromium is missing.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
echo "installing chromium (Debian package) for the browser tests" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
command -v chromium >/dev/null
chromium --version
