#!/usr/bin/env bash
# Measures registrations/s (POST /v1/encrypt: each one registers its
# artifact) on 1 and 3 shredd nodes sharing one PostgreSQL and one Vault,
# for two builds side by side in one run: BEFORE (a commit, built from
# `git archive`) and this checkout (docs/performance-archive.md, "Locks by what is
# touched"). While the load runs, a session of PostgreSQL samples pg_locks
# every 10 ms: the sessions in a write transaction (holding or waiting for
# the cluster-wide write lock) and those of them waiting for an advisory
# lock; it reports the share of transaction time spent waiting and the
# commits in flight. It also reports what the model of the page needs: CPU
# seconds of the nodes and of PostgreSQL per registration and per commit,
# and the WAL's fsyncs (pg_stat_wal with track_wal_io_timing).
#
#   BEFORE=a6682e2 scripts/bench-locks.sh
#
# Settings (environment): BEFORE (the commit to compare with; default
# main), ROUNDS (2), DURATION (10s), CLIENTS (32), OPS (encrypt),
# SUBJECTS (the load tool's --subjects; 1000; forgets take the upper
# half, so give OPS=forget twice the forgets a run makes), RESULTS (a directory to keep the reports in), SHREDD_PG_BIN,
# SHREDD_VAULT_BIN, STATEMENTS (1: also count the measured run's
# statements with pg_stat_statements, into RESULTS/NAME.statements, the
# most called first).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${BEFORE:-main}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10s}
CLIENTS=${CLIENTS:-32}
OPS=${OPS:-encrypt}
SUBJECTS=${SUBJECTS:-1000}
STATEMENTS=${STATEMENTS:-0}
PG_BIN=${SHREDD_PG_BIN:-/usr/lib/postgresql/15/bin}
VAULT_BIN=${SHREDD_VAULT_BIN:-$top/.cache/bin/vault}
for tool in jq curl python3 bc; do
  command -v "$tool" >/dev/null || { echo "bench-locks: needs $tool" >&2; exit 1; }
done

work=$(mktemp -d /tmp/shredd-bench-locks-XXXXXX)
chmod 755 "$work"
RESULTS=${RESULTS:-$work/results}
mkdir -p "$RESULTS/logs" "$work/bin"
pids=()
pg_up=""
as_pg=()
log() { echo "bench-locks: $*" >&2; }
. "$top/scripts/bench-lib.sh"
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the two builds ----------------------------------------------------------
before_rev=$(git -C "$top" rev-parse --short "$BEFORE")
after_rev=$(git -C "$top" rev-parse --short HEAD)
[ -z "$(git -C "$top" status --porcelain -- '*.go' go.mod go.sum)" ] || after_rev="$after_rev+changes"
mkdir -p "$work/src-before"
git -C "$top" archive "$before_rev" | tar -x -C "$work/src-before"
log "building before ($before_rev) and after ($after_rev)"
(cd "$work/src-before" && go build -o "$work/bin/shredd-before" ./cmd/shredd)
(cd "$top" && go build -o "$work/bin/shredd-after" ./cmd/shredd && go build -o "$work/bin/shredd-bench" ./cmd/shredd-bench)
bench="$work/bin/shredd-bench"

# --- PostgreSQL (testkit/pgtest's durable settings) and Vault ------------------
mkdir -p "$work/pg"
if [ "$(id -u)" = 0 ]; then chown postgres: "$work/pg"; as_pg=(runuser -u postgres --); fi
"${as_pg[@]}" "$PG_BIN/initdb" -D "$work/pg/data" -U shredd -A trust -E UTF8 --no-locale >/dev/null
pg_port=$(free_port)
pg_up=1
pg_extra=""
[ "$STATEMENTS" = 1 ] && pg_extra="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.track=all"
"${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w -t 60 start \
  -o "-p $pg_port -k $work/pg -c listen_addresses=127.0.0.1 -c max_connections=200 -c shared_buffers=256MB -c fsync=on -c synchronous_commit=on -c track_wal_io_timing=on $pg_extra" \
  >/dev/null || { cat "$work/pg/log" >&2; exit 1; }
pg_pid=$(head -1 "$work/pg/data/postmaster.pid")
start_vault

# --- nodes -------------------------------------------------------------------
node_pids=() node_urls=()
start_node() { # BIN DIR DSN KEY
  local bin=$1 dir=$2 db=$3 key=$4 nlog="$RESULTS/logs/$(basename "$2").log" addr=""
  mkdir -p "$dir" && chmod 700 "$dir"
  "$bin" serve --data-dir "$dir" --addr 127.0.0.1:0 --store "$db" --root vault --vault-addr "$vault_addr" --vault-key "$key" >"$nlog" 2>&1 &
  local pid=$!
  pids+=("$pid"); node_pids+=("$pid")
  for _ in $(seq 3000); do
    addr=$(jq -r 'select(.msg=="listening") | .addr' "$nlog" 2>/dev/null | head -1 || true)
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { tail -20 "$nlog" >&2; return 1; }
    sleep 0.1
  done
  [ -n "$addr" ] || { tail -20 "$nlog" >&2; return 1; }
  node_urls+=("http://$addr")
}
start_cluster() { # BIN N NAME
  local bin=$1 n=$2 name=$3 first="$work/nodes/$3-1"
  node_pids=() node_urls=()
  psql -d postgres -c "CREATE DATABASE $name"
  start_node "$bin" "$first" "$(dsn "$name")" "bench-$name"
  for i in $(seq 2 "$n"); do
    copy_secrets "$first" "$work/nodes/$name-$i"
    start_node "$bin" "$work/nodes/$name-$i" "$(dsn "$name")" "bench-$name"
  done
}
# cpu_ticks PID...: user+system clock ticks of the processes; with
# --children, those of the postmaster's children, live and reaped.
cpu_ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(awk '{print $14+$15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo "$t"
}
pg_ticks() {
  local t kids
  t=$(awk '{print $14+$15+$16+$17}' "/proc/$pg_pid/stat")
  kids=$(pgrep -P "$pg_pid" | tr '\n' ' ')
  echo $((t + $(cpu_ticks $kids)))
}
hz=$(getconf CLK_TCK)
# sample NAME SECONDS: every 10 ms, the sessions of database NAME in a write
# transaction (holding or awaiting the write lock, key 0x7368726564640001)
# and those of them waiting for one of shredd's advisory locks (the write
# lock or a shard's, classid 0x73687265). Prints "samples in_tx waiting
# max_in_flight", and on stderr, for the samples where a session waited, the
# statements of the sessions holding the write lock alone, counted.
sample() {
  local name=$1 secs=$2
  psql -d "$name" -tA 2>&1 >/dev/null <<SQL | sed -n 's/.*NOTICE: *//p' | awk '/^holder / {sub(/^holder /, ""); h[$0]++; next} {print} END {for (k in h) print h[k] "\t" k >"/dev/stderr"}'
DO \$\$
DECLARE n int := 0; tx bigint := 0; w bigint := 0; mx int := 0; a int; b int; q record;
  stop timestamptz := clock_timestamp() + interval '$secs seconds';
  db oid := (SELECT oid FROM pg_database WHERE datname = current_database());
BEGIN
  WHILE clock_timestamp() < stop LOOP
    SELECT count(DISTINCT pid) FILTER (WHERE objid = 1684275201),
           count(DISTINCT pid) FILTER (WHERE NOT granted)
      INTO a, b FROM pg_locks
      WHERE locktype = 'advisory' AND database = db AND classid = 1936224869 AND objsubid = 1;
    n := n + 1; tx := tx + a; w := w + b; mx := greatest(mx, a - b);
    IF b > 0 THEN -- who holds the write lock alone while others wait
      PERFORM pg_stat_clear_snapshot();
      FOR q IN SELECT left(regexp_replace(s.query, '\s+', ' ', 'g'), 60) AS t FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid
          WHERE l.locktype = 'advisory' AND l.database = db AND l.classid = 1936224869 AND l.objid = 1684275201
            AND l.mode = 'ExclusiveLock' AND l.granted LOOP
        RAISE NOTICE 'holder %', q.t;
      END LOOP;
    END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RAISE NOTICE '% % % %', n, tx, w, mx;
END \$\$;
SQL
}
wal_sync() { psql -d postgres -tAc "SELECT wal_sync || ' ' || wal_sync_time FROM pg_stat_wal"; }
commits() { psql -d postgres -tAc "SELECT xact_commit FROM pg_stat_database WHERE datname='$1'"; }

secs=${DURATION%s}
printf '%s\n' "build nodes round regs_per_s p50_ms p99_ms errors samples mean_in_tx mean_waiting wait_share mean_in_flight max_in_flight commits node_cpu_s pg_cpu_s bench_cpu_s wal_syncs wal_sync_ms" >"$RESULTS/runs.txt"
for round in $(seq "$ROUNDS"); do
  order=(before:1 before:3 after:1 after:3)
  [ $((round % 2)) = 0 ] && order=(after:3 after:1 before:3 before:1)
  for cfg in "${order[@]}"; do
    build=${cfg%:*} n=${cfg#*:} name="r${round}_${build}_$n"
    log "round $round: $build, $n node(s)"
    start_cluster "$work/bin/shredd-$build" "$n" "$name"
    tok="$work/nodes/$name-1/admin.token"
    # A short run first: it registers the kinds and creates the subjects'
    # keys (undeclared transactions), so that the measured run registers.
    "$bench" --url "$(urls)" --token-file "$tok" --ops "$OPS" --subjects "$SUBJECTS" --clients "$CLIENTS" --duration 1s --noop=false --json >/dev/null 2>&1
    if [ "$STATEMENTS" = 1 ]; then
      psql -d "$name" -c "CREATE SCHEMA IF NOT EXISTS bench_stats; CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA bench_stats; SELECT bench_stats.pg_stat_statements_reset()" >/dev/null
    fi
    c0=$(commits "$name"); w0=$(wal_sync); n0=$(cpu_ticks "${node_pids[@]}"); p0=$(pg_ticks)
    out="$RESULTS/$name.json"
    sample "$name" "$secs" >"$RESULTS/$name.locks" 2>"$RESULTS/$name.holders" &
    spid=$!
    /usr/bin/time -f '%U %S' -o "$RESULTS/$name.time" "$bench" --url "$(urls)" --token-file "$tok" --ops "$OPS" --subjects "$SUBJECTS" --clients "$CLIENTS" \
      --duration "$DURATION" --noop=false --json >"$out" 2>"$RESULTS/$name.log"
    wait "$spid" || true
    c1=$(commits "$name"); w1=$(wal_sync); n1=$(cpu_ticks "${node_pids[@]}"); p1=$(pg_ticks)
    if [ "$STATEMENTS" = 1 ]; then
      psql -d "$name" -A -F' | ' -c "SELECT calls, round(total_exec_time::numeric, 1) AS ms, left(regexp_replace(query, '\s+', ' ', 'g'), 120) AS query
        FROM bench_stats.pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$name' ORDER BY calls DESC LIMIT 40" >"$RESULTS/$name.statements"
      psql -d postgres -tAc "SELECT 'multixacts since the database was made: ' || mxid_age(datminmxid) FROM pg_database WHERE datname = '$name'" >>"$RESULTS/$name.statements"
    fi
    stop_cluster
    read -r samples intx waiting maxf <"$RESULTS/$name.locks" || true
    read -r ws0 wt0 <<<"$w0"; read -r ws1 wt1 <<<"$w1"
    bcpu=$(awk '{print $1+$2}' "$RESULTS/$name.time" 2>/dev/null || echo 0)
    jq -r --arg b "$build" --arg n "$n" --arg r "$round" --arg s "$samples" --arg tx "$intx" --arg w "$waiting" --arg mx "$maxf" \
      --arg c "$((c1 - c0))" --arg nc "$(echo "scale=2; ($n1 - $n0) / $hz" | bc)" --arg pc "$(echo "scale=2; ($p1 - $p0) / $hz" | bc)" \
      --arg bc "$bcpu" --arg ws "$((ws1 - ws0))" --arg wt "$(echo "$wt1 - $wt0" | bc)" \
      '.results[0] | "\($b) \($n) \($r) \(.items_per_s|floor) \(.p50_ms) \(.p99_ms) \(.errors) \($s) \(($tx|tonumber)/($s|tonumber)*100|round/100) \(($w|tonumber)/($s|tonumber)*100|round/100) \(if ($tx|tonumber) > 0 then ($w|tonumber)/($tx|tonumber)*1000|round/10 else 0 end)% \((($tx|tonumber)-($w|tonumber))/($s|tonumber)*100|round/100) \($mx) \($c) \($nc) \($pc) \($bc) \($ws) \($wt)"' "$out" \
      | tee -a "$RESULTS/runs.txt" >&2
    psql -d postgres -c "DROP DATABASE $name WITH (FORCE)"
  done
done
echo "# before $before_rev, after $after_rev; $OPS, $CLIENTS clients, $DURATION; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
column -t "$RESULTS/runs.txt"
for f in "$RESULTS"/*_3.holders; do
  echo "$(basename "$f" .holders): samples with a session waiting, by the statement of the transaction that held the write lock alone:"
  sort -rn "$f" | head -6 | sed 's/^/  /'
done
echo "fsync (pg_test_fsync, 2 s per method, on the data directory's file system):"
"$PG_BIN/pg_test_fsync" -s 2 -f "$work/pg/fsync.test" 2>&1 | grep -E 'fdatasync|fsync ' | head -4
