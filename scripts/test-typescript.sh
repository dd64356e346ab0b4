#!/usr/bin/env bash
# The TypeScript client's tests (clients/typescript), LangGraph's checkpoint
# saver conformance suite over the LangGraph adapter (clients/langgraph) on
# both inner savers, the adapter's own tests and the LangGraph example
# (examples/langgraph), against the real shredd binary on 127.0.0.1 and a
# real PostgreSQL 15:
#   1. the binary: $SHREDD_BIN, else built into a temporary directory;
#   2. Node.js >= 20 and npm, from Debian where missing; the npm packages
#      from the committed lockfiles (npm ci);
#   3. a throwaway PostgreSQL 15 server ($SHREDD_PG_BIN) on a free loopback
#      port, in a temporary directory, as the user postgres when run as
#      root; stopped at the end;
#   4. tsc --strict builds, node --test for the client (the envelope
#      vectors, every call against the binary, the docs/clients.md
#      snippets), vitest --globals for the adapter (the validation suite
#      over MemorySaver and PostgresSaver, the store, the sealing cost),
#      then the example.
# Exits nonzero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
tmp=$(mktemp -d)
chmod 755 "$tmp"
PG_BIN=${SHREDD_PG_BIN:-/usr/lib/postgresql/15/bin}
pgdir="$tmp/pg"
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
cleanup() {
  if [ -f "$pgdir/postmaster.pid" ]; then as_pg "$PG_BIN/pg_ctl" -D "$pgdir" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

if [ -z "${SHREDD_BIN:-}" ]; then
  go build -o "$tmp/shredd" ./cmd/shredd
  SHREDD_BIN="$tmp/shredd"
fi
export SHREDD_BIN

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "test-typescript: installing from Debian: nodejs npm" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
node -e 'if (+process.versions.node.split(".")[0] < 20) { console.error("test-typescript: Node.js >= 20 is needed, this is " + process.version); process.exit(1) }'
echo "test-typescript: node $(node --version), npm $(npm --version), shredd $SHREDD_BIN" >&2

# PostgreSQL 15, throwaway.
mkdir "$pgdir"
[ "$(id -u)" != 0 ] || chown postgres "$pgdir"
as_pg "$PG_BIN/initdb" -D "$pgdir" -A trust -U postgres >/dev/null
port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')
as_pg "$PG_BIN/pg_ctl" -D "$pgdir" -l "$pgdir/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -k $pgdir -c fsync=off" start >/dev/null
export SHREDD_TEST_PG_URL="postgres://postgres@127.0.0.1:$port/postgres"

(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build && npm test)
echo "test-typescript: the client: $((SECONDS - start)) s" >&2
(cd clients/langgraph && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build && npx vitest run --globals)
echo "test-typescript: the LangGraph adapter: $((SECONDS - start)) s" >&2
(cd examples/langgraph && npm ci --no-audit --no-fund --loglevel=error && npm start)
echo "test-typescript: all: $((SECONDS - start)) s" >&2
