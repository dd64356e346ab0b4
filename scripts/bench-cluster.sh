#!/usr/bin/env bash
# Measures shredd on 1, 2 and 3 nodes sharing one PostgreSQL and one Vault,
# side by side with the SQLite default (one node, its local root file), and
# the forget -> committed latency at a million subjects on PostgreSQL
# (docs/performance-archive.md, "Many nodes on PostgreSQL").
#
# Everything runs on this machine, in a temporary directory: a PostgreSQL 15
# server (Debian's binaries, as the user postgres when run as root), a Vault
# dev server (.cache/bin/vault, scripts/vault-build.sh) with Transit, and
# shredd and shredd-bench built from this checkout. The configurations
# alternate (sqlite, pg1, pg2, pg3, then the reverse order, ...) so that each
# meets the same machine; each run gets a fresh database (or data directory)
# and a fresh Vault key. The load tool and every server share the cores.
#
#   scripts/bench-cluster.sh                      # everything, about 45 min on 2 cores
#   ROUNDS=1 DURATION=2s SCALE_SUBJECTS=20000 SCALE_ARTIFACTS=20000 scripts/bench-cluster.sh   # a quick try
#
# Settings (environment): ROUNDS (3), DURATION per operation (8s), CLIENTS
# (32), OPS (encrypt,decrypt,batch,forget), SCALE (1: also the run at
# scale; 0: skip it), SCALE_SUBJECTS (1000000), SCALE_ARTIFACTS (1000000),
# SCALE_DURATION (20s), SCALE_ROUNDS (2), SIDE (1; 0: skip the side by
# side runs), RESULTS (a directory to keep the
# JSON reports and logs in; default inside the temporary directory, removed
# at the end), SHREDD_PG_BIN, SHREDD_VAULT_BIN.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8s}
CLIENTS=${CLIENTS:-32}
OPS=${OPS:-encrypt,decrypt,batch,forget}
SCALE=${SCALE:-1}
SCALE_SUBJECTS=${SCALE_SUBJECTS:-1000000}
SCALE_ARTIFACTS=${SCALE_ARTIFACTS:-1000000}
SCALE_DURATION=${SCALE_DURATION:-20s}
SCALE_ROUNDS=${SCALE_ROUNDS:-2}
PG_BIN=${SHREDD_PG_BIN:-/usr/lib/postgresql/15/bin}
VAULT_BIN=${SHREDD_VAULT_BIN:-$top/.cache/bin/vault}

for tool in jq curl python3 bc; do
  if ! command -v "$tool" >/dev/null; then
    echo "bench-cluster: installing $tool from Debian" >&2
    apt-get install -y -q "$tool" >/dev/null
  fi
done
[ -x "$PG_BIN/postgres" ] || { echo "bench-cluster: no PostgreSQL in $PG_BIN (apt-get install postgresql-15)" >&2; exit 1; }
[ -x "$VAULT_BIN" ] || "$top/scripts/vault-build.sh"

work=$(mktemp -d /tmp/shredd-bench-cluster-XXXXXX)
chmod 755 "$work"
RESULTS=${RESULTS:-$work/results}
mkdir -p "$RESULTS" "$work/bin"
pids=()   # every process this script started, stopped by id at the end
pg_up=""

log() { echo "bench-cluster: $*" >&2; }
as_pg=()

. "$top/scripts/bench-lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -----------------------------------------------------------------
rev=$(git -C "$top" rev-parse --short HEAD)
[ -z "$(git -C "$top" status --porcelain -- '*.go' go.mod go.sum)" ] || rev="$rev+changes"
log "building shredd and shredd-bench from $rev"
(cd "$top" && go build -o "$work/bin/shredd" ./cmd/shredd && go build -o "$work/bin/shredd-bench" ./cmd/shredd-bench)
shredd="$work/bin/shredd"
bench="$work/bin/shredd-bench"

# --- PostgreSQL ------------------------------------------------------------
# The settings of testkit/pgtest (durable commits: fsync and
# synchronous_commit on), with a larger shared_buffers for the scale run.
mkdir -p "$work/pg"
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$work/pg"
  as_pg=(runuser -u postgres --)
fi
"${as_pg[@]}" "$PG_BIN/initdb" -D "$work/pg/data" -U shredd -A trust -E UTF8 --no-locale >/dev/null
pg_port=$(free_port)
pg_up=1
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w -t 60 start \
  -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB -c fsync=on -c synchronous_commit=on" \
  >/dev/null || { cat "$work/pg/log" >&2; exit 1; }
log "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$pg_port"

# --- Vault -----------------------------------------------------------------
start_vault
log "$("$VAULT_BIN" version) dev server on $vault_addr"

# --- shredd nodes ----------------------------------------------------------
mkdir -p "$RESULTS/logs"
node_pids=()
node_urls=()
# start_node DIR DSN KEY: shredd serve on DSN with the Vault key KEY; waits
# (up to 10 minutes) for its "listening" line, appends its URL to node_urls
# and logs how long it took. Its log is kept in $RESULTS/logs.
start_node() {
  local dir=$1 db=$2 key=$3 t0
  local nlog="$RESULTS/logs/$(basename "$dir")-$(date +%H%M%S).log"
  mkdir -p "$dir" && chmod 700 "$dir"
  t0=$(date +%s.%N)
  "$shredd" serve --data-dir "$dir" --addr 127.0.0.1:0 --store "$db" --root vault --vault-addr "$vault_addr" \
    --vault-key "$key" >"$nlog" 2>&1 &
  local pid=$!
  pids+=("$pid")
  node_pids+=("$pid")
  local addr=""
  for _ in $(seq 6000); do
    addr=$(jq -r 'select(.msg=="listening") | .addr' "$nlog" 2>/dev/null | head -1 || true)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$nlog" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$addr" ] || { log "node $dir did not listen"; tail -20 "$nlog" >&2; return 1; }
  log "node $(basename "$dir") listening after $(echo "$(date +%s.%N) - $t0" | bc)s"
  node_urls+=("http://$addr")
}
# start_cluster N NAME: N nodes on the database NAME (created when missing)
# and the Vault key bench-NAME; the first node's secrets are copied to the
# others, as an operator distributes them.
start_cluster() {
  local n=$1 name=$2 first="$work/nodes/$2-1"
  node_pids=() node_urls=()
  psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$name'" | grep -q 1 || psql -d postgres -c "CREATE DATABASE $name"
  start_node "$first" "$(dsn "$name")" "bench-$name"
  for i in $(seq 2 "$n"); do
    copy_secrets "$first" "$work/nodes/$name-$i"
    start_node "$work/nodes/$name-$i" "$(dsn "$name")" "bench-$name"
  done
}
# watch_db NAME OUT: until stopped, every half second, how many of the
# database's sessions wait for the cluster-wide write lock (an advisory
# lock) and how many run a statement; and the commits of the database.
watch_db() {
  local name=$1 out=$2
  psql -d postgres -tAc "SELECT 'commits_before ' || xact_commit FROM pg_stat_database WHERE datname='$name'" >"$out"
  while :; do
    psql -d postgres -tAc "SELECT 'sample ' || count(*) FILTER (WHERE wait_event='advisory') || ' ' || count(*) FILTER (WHERE state='active')
      FROM pg_stat_activity WHERE datname='$name'" >>"$out" 2>/dev/null || true
    sleep 0.5
  done
}
# watched NAME OUT: stops the watch_db of the last background job and
# prints what it saw: the mean sessions waiting for the write lock and the
# mean active ones, "waiting/active", then the commits.
watched() {
  local name=$1 out=$2
  kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null || true
  psql -d postgres -tAc "SELECT 'commits_after ' || xact_commit FROM pg_stat_database WHERE datname='$name'" >>"$out"
  awk '/^sample/ {n++; w+=$2; a+=$3} /^commits_before/ {b=$2} /^commits_after/ {c=$2}
    END {if (n) printf "%.1f/%.1f %d\n", w/n, a/n, c-b}' "$out"
}

# --- side by side: SQLite, 1, 2, 3 nodes on PostgreSQL -----------------------
configs=(sqlite pg1 pg2 pg3)
run=0
[ "${SIDE:-1}" = 1 ] || ROUNDS=0
for round in $(seq "$ROUNDS"); do
  order=("${configs[@]}")
  if [ $((round % 2)) = 0 ]; then order=(pg3 pg2 pg1 sqlite); fi
  for cfg in "${order[@]}"; do
    run=$((run + 1))
    out="$RESULTS/side-$round-$cfg.json"
    log "round $round: $cfg"
    common=(--ops "$OPS" --clients "$CLIENTS" --duration "$DURATION" --noop=false --json)
    if [ "$cfg" = sqlite ]; then
      "$bench" --serve-self --shredd-bin "$shredd" "${common[@]}" >"$out" 2>"$RESULTS/side-$round-$cfg.log"
    else
      n=${cfg#pg}
      name="side_${round}_$cfg"
      start_cluster "$n" "$name"
      watch_db "$name" "$RESULTS/side-$round-$cfg.locks" &
      watch_pid=$!; pids+=("$watch_pid")
      "$bench" --url "$(urls)" --token-file "$work/nodes/$name-1/admin.token" "${common[@]}" >"$out" 2>"$RESULTS/side-$round-$cfg.log"
      watched "$name" "$RESULTS/side-$round-$cfg.locks" | sed "s/^/$cfg round $round: sessions waiting for the write lock\/active, commits: /" | tee -a "$RESULTS/locks.txt" >&2
      stop_cluster
      psql -d postgres -c "DROP DATABASE $name WITH (FORCE)"
    fi
    jq -r --arg c "$cfg" '.results[] | "  \($c) \(.op): \(.items_per_s|floor) items/s, p99 \(.p99_ms) ms, errors \(.errors)"' "$out" >&2
  done
done

# The table: per operation and configuration, the median of the rounds and
# their range.
if [ "$ROUNDS" -gt 0 ]; then
echo
echo "## Side by side: $OPS, $CLIENTS clients, $DURATION per operation, $ROUNDS rounds (median, min-max)"
echo
echo "| op | configuration | items/s | p50 ms | p99 ms | errors | requests per node (last round) |"
echo "|---|---|--:|--:|--:|--:|---|"
jq -rs '
  def med: sort | if length % 2 == 1 then .[length/2|floor] else (.[length/2-1] + .[length/2]) / 2 end;
  def fmt(f; k): (map(f) | "\(med|.*k|round/k) (\(min|.*k|round/k)-\(max|.*k|round/k))");
  [ .[] | .config as $c | .results[] | . + {cfg: (if $c.serve_self then "SQLite, 1 node" else "PostgreSQL, \($c.nodes) node" + (if $c.nodes > 1 then "s" else "" end) end)} ]
  | group_by(.op) | .[] | group_by(.cfg) | .[]
  | "| \(.[0].op) | \(.[0].cfg) | \(fmt(.items_per_s; 1)) | \(fmt(.p50_ms; 10)) | \(fmt(.p99_ms; 10)) | \(map(.errors)|add) | \(.[-1].node_requests // [.[-1].requests] | map(tostring) | join(", ")) |"
' "$RESULTS"/side-*.json
echo
fi

# --- at scale: forget -> committed at SCALE_SUBJECTS subjects -----------------
if [ "$SCALE" = 1 ]; then
  log "filling PostgreSQL: $SCALE_SUBJECTS subjects, $SCALE_ARTIFACTS artifacts"
  psql -d postgres -c "CREATE DATABASE scale"
  mkdir -p "$work/nodes"
  start=$(date +%s)
  "$bench" fill --dir "$work/nodes/scale-1" --store "$(dsn scale)" --root vault --vault-addr "$vault_addr" --vault-key bench-scale \
    --subjects "$SCALE_SUBJECTS" --artifacts "$SCALE_ARTIFACTS" --chunk 200000 >"$RESULTS/fill.log" 2>&1 || { tail "$RESULTS/fill.log" >&2; exit 1; }
  fill_s=$(( $(date +%s) - start ))
  db_size=$(psql -d scale -tAc "SELECT pg_size_pretty(pg_database_size('scale'))")
  log "filled in ${fill_s}s ($db_size)"
  echo "## Forget -> committed at $SCALE_SUBJECTS subjects, $SCALE_ARTIFACTS artifacts on PostgreSQL"
  echo
  echo "fill: ${fill_s} s, database $db_size ($(tail -1 "$RESULTS/fill.log"))"
  echo
  echo "| nodes | clients | run | forgets/s | p50 ms | p99 ms | p99.9 ms | errors | sessions waiting for the write lock / active |"
  echo "|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
  # Each run forgets subjects no run forgot before: the top of --subjects
  # moves down a tenth of them per run (a run forgets far fewer).
  top_s=$SCALE_SUBJECTS
  step=$((SCALE_SUBJECTS / 10))
  for round in $(seq "$SCALE_ROUNDS"); do
    for n in 1 3; do
      for c in 1 4; do
        out="$RESULTS/scale-$round-n$n-c$c.json"
        start_cluster "$n" scale
        watch_db scale "${out%.json}.locks" &
        watch_pid=$!; pids+=("$watch_pid")
        "$bench" --url "$(urls)" --token-file "$work/nodes/scale-1/admin.token" --ops forget --clients "$c" \
          --duration "$SCALE_DURATION" --subjects "$top_s" --noop=false --json >"$out" 2>"${out%.json}.log"
        lk=$(watched scale "${out%.json}.locks")
        stop_cluster
        top_s=$((top_s - step))
        jq -r --arg n "$n" --arg c "$c" --arg r "$round" --arg lk "${lk%% *}" \
          '.results[] | "| \($n) | \($c) | \($r) | \(.items_per_s|floor) | \(.p50_ms) | \(.p99_ms) | \(.p999_ms) | \(.errors) | \($lk) |"' "$out"
      done
    done
  done
  backlog=$(psql -d scale -tAc "SELECT count(*) || ' forgets, ' || count(*) FILTER (WHERE rekeyed_at IS NULL) || ' of them waiting for their bucket re-key' FROM forgets")
  echo
  echo "after the runs: $backlog"
fi
echo
if [ -s "$RESULTS/locks.txt" ]; then
  echo "PostgreSQL runs, in order, the sessions waiting for the cluster-wide write lock:"
  sed 's/^/  /' "$RESULTS/locks.txt"
fi
echo "machine: $(nproc) cores, $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(go version | awk '{print $3}'), built from $rev; results in $RESULTS"
