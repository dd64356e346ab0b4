#!/usr/bin/env bash
# The whole test suite: builds the Vault server the tests run against when it
# is missing (scripts/vault-build.sh: from the official Go module, cached in
# .cache/bin), installs from Debian's packages what the tests need where it
# is missing (PostgreSQL 15, Chromium, Python's cryptography), then go vet
# and every package's tests with the race detector, against real SQLite
# files, a real PostgreSQL server, real Vault servers on 127.0.0.1 (started
# and stopped by the tests themselves, see testkit/vaulttest and
# testkit/pgtest), a real headless Chromium and the real shredd
# binary on 127.0.0.1; then the packages built on testkit/shreddtest once
# more on PostgreSQL; then the TypeScript client, the LangGraph.js adapter
# (with LangGraph's checkpoint-saver conformance suite over an in-memory and
# a PostgreSQL saver) and its example, from the committed lockfiles (npm ci);
# and the Python client's tests and example.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
apt_install() {
  echo "installing from Debian's packages: $*" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
# The attestation and export tests check signatures with OpenSSL and the
# documented shell recipe (jq, xxd, sha256sum), and inclusion proofs with
# the export's independent checker (python3); the completion test runs the
# bash and zsh scripts. Install them where the machine lacks them: the
# tests fail, never skip, without them.
missing=""
for tool in openssl jq xxd sha256sum python3 zsh; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  apt_install openssl jq xxd coreutils python3 zsh
fi
# PostgreSQL 15's server binaries (testkit/pgtest starts its own
# server from them, as the user postgres).
export SHREDD_PG_BIN=${SHREDD_PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$SHREDD_PG_BIN/postgres" ]; then
  apt_install postgresql-15
fi
./scripts/test-browser.sh && ./scripts/test-node.sh
./scripts/vault-build.sh
export SHREDD_VAULT_BIN="$PWD/.cache/bin/vault"
go vet ./...
go test -race -count=1 -timeout 30m ./...
echo "go test (SQLite and the PostgreSQL conformance suite): $((SECONDS - start)) s" >&2
# The service's own suites once more, every stack on PostgreSQL.
SHREDD_TEST_STORE=postgres go test -race -count=1 -timeout 20m ./registry/ ./sealing/ ./erasure/ ./api/ ./api/client/
echo "go test on PostgreSQL: $((SECONDS - start)) s" >&2
./scripts/test-typescript.sh
./scripts/test-python.sh
echo "the whole suite: $((SECONDS - start)) s" >&2
