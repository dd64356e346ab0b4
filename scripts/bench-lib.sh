# Functions the cluster benchmarks (bench-cluster.sh, bench-locks.sh)
# share; sourced by them, never run. They use the caller's variables:
# work (the scratch directory), pids (every process started, stopped by
# id at the end), node_pids and node_urls (the running nodes), pg_port,
# pg_up and as_pg (the PostgreSQL server started, and how to run as its
# user), PG_BIN and VAULT_BIN.

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
psql() { "$PG_BIN/psql" -q -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U shredd "$@"; }
dsn() { echo "postgres://shredd@127.0.0.1:$pg_port/$1?sslmode=disable"; }

# cleanup, the scripts' EXIT trap: stops every process of pids by id, then
# the PostgreSQL server when pg_up is set (pg_ctl run as as_pg), and
# removes work (RESULTS too when it is inside).
cleanup() {
  set +e
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "$pg_up" ]; then "${as_pg[@]}" "$PG_BIN/pg_ctl" -D "$work/pg/data" -m fast -w -t 60 stop >/dev/null; fi
  rm -rf "$work"
}

# start_vault: a Vault dev server on a free port with the transit engine
# mounted; sets vault_addr and exports VAULT_TOKEN (read by shredd serve
# and shredd-bench fill with --root vault).
start_vault() {
  local port
  port=$(free_port)
  vault_addr="http://127.0.0.1:$port"
  VAULT_DISABLE_MLOCK=true HOME="$work" "$VAULT_BIN" server -dev -dev-root-token-id=root \
    -dev-listen-address="127.0.0.1:$port" -log-level=error >"$work/vault.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    curl -fs "$vault_addr/v1/sys/health" >/dev/null && break
    sleep 0.1
  done
  curl -fsS -H "X-Vault-Token: root" -X POST -d '{"type":"transit"}' "$vault_addr/v1/sys/mounts/transit"
  export VAULT_TOKEN=root
}

# copy_secrets FIRST DIR: the first node's secrets copied to another
# node's data directory DIR, as an operator distributes them.
copy_secrets() {
  mkdir -p "$2" && chmod 700 "$2"
  local f
  for f in subject.key attestation.key attestation.pub log.key log.vkey admin.token; do cp -p "$1/$f" "$2/$f"; done
}

# stop_cluster: SIGTERM to every node, then wait for each.
stop_cluster() {
  local p
  for p in "${node_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${node_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  node_pids=() node_urls=()
}

# urls: the nodes' URLs, comma-separated.
urls() { local IFS=,; echo "${node_urls[*]}"; }
