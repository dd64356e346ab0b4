#!/usr/bin/env bash
# The whole test suite: builds the Vault server the tests run against when it
# is missing (scripts/vault-build.sh: from the official Go module, cached in
# .cache/bin), then go vet and every package's tests with the race detector,
# against real SQLite files, real Vault servers on 127.0.0.1 (started and
# stopped by the tests themselves, see internal/vaulttest) and the real
# shredd binary on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
# The attestation and export tests check signatures with OpenSSL and the
# documented shell recipe (jq, xxd, sha256sum), and inclusion proofs with
# the export's independent checker (python3); the machine image has them,
# install them where it does not. The tests fail, never skip, without them.
missing=""
for tool in openssl jq xxd sha256sum python3; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if [ -n "$missing" ]; then
  echo "installing the test tools:$missing" >&2
  apt-get update -qq && apt-get install -y -qq openssl jq xxd coreutils python3 >/dev/null
fi
./scripts/vault-build.sh
export SHREDD_VAULT_BIN="$PWD/.cache/bin/vault"
go vet ./...
go test -race -count=1 -timeout 30m ./...
