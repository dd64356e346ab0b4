#!/usr/bin/env bash
# Runs a command (by default the whole suite, ./scripts/test.sh) while busy
# CPU workers load the machine, to show that the tests do not depend on the
# machine's load or speed: no timing assertions, every wait on a state with
# a bound that only catches a hang.
#
#   scripts/test-under-load.sh [COMMAND [ARG...]]
#   SHREDD_LOAD_WORKERS=N scripts/test-under-load.sh go test -count=1 ./api/ -run TestMetrics
#
# The workers (SHREDD_LOAD_WORKERS, by default twice the number of CPUs)
# are plain shell busy loops at normal priority; they are killed when the
# script exits, however it exits. The exit status is the command's; the
# command's wall time is printed on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=${SHREDD_LOAD_WORKERS:-$(( 2 * $(nproc) ))}
if [ "$#" -eq 0 ]; then
  set -- ./scripts/test.sh
fi
pids=()
stop_workers() {
  if [ "${#pids[@]}" -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
}
trap stop_workers EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$workers"); do
  ( trap - EXIT INT TERM; while :; do :; done ) &
  pids+=("$!")
done
echo "test-under-load: $workers busy workers on $(nproc) CPUs; running: $*" >&2
start=$SECONDS
status=0
"$@" || status=$?
echo "test-under-load: $* exited $status after $((SECONDS - start)) s under load" >&2
exit "$status"
