#!/usr/bin/env bash
# Installs what the browser tests of the auditor page (ui/browser_test.go)
# need where it is missing: headless Chromium from Debian's own packages
# (the `chromium` package; never a browser downloaded from anywhere else)
# and the fonts it renders the screenshots with. scripts/test.sh calls it
# before `go test`; the tests fail, never skip, when Chromium is missing.
set -euo pipefail
exec "$(dirname "$0")/deb-install.sh" chromium "installing chromium (Debian package) for the browser tests" \
  chromium fonts-dejavu-core
