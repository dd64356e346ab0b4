#!/usr/bin/env bash
# Installs Node.js where it is missing (Debian's nodejs package): the
# differential tests of the page's verifier (ui/evidence_test.go) run
# ui/static/verify.js under node beside the Go reader. The tests fail,
# never skip, when node is missing.
set -euo pipefail
exec "$(dirname "$0")/deb-install.sh" node "installing nodejs (Debian package) for the verifier's differential tests" nodejs
