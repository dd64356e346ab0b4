#!/usr/bin/env bash
# The whole test suite: go vet, then every package's tests with the race
# detector against real SQLite files and the real shredd binary on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -race -count=1 ./...
