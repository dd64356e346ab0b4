#!/usr/bin/env bash
# Builds the Vault server the tests run against, from the official Go module
# pinned in tools/vault/go.mod, into .cache/bin/vault. Does nothing when that
# binary exists and reports the pinned version. The first build downloads
# about 3.8 GB of modules and takes about 11 minutes on 2 cores.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/.cache/bin/vault"
want=$(awk '$1=="github.com/hashicorp/vault" {print $2; exit}' "$top/tools/vault/go.mod")
if [ -x "$bin" ] && "$bin" version 2>/dev/null | grep -qE "Vault ${want}([^.0-9]|$)"; then
  exit 0
fi
mkdir -p "$top/.cache/bin"
echo "building Vault ${want} from the Go module proxy into .cache/bin/vault (first time: ~11 minutes)" >&2
start=$(date +%s)
(cd "$top/tools/vault" && GOFLAGS=-mod=mod go build -o "$bin.tmp" github.com/hashicorp/vault)
mv "$bin.tmp" "$bin"
echo "built $("$bin" version) in $(( $(date +%s) - start ))s" >&2
