#!/bin/sh
# Draws the plots of docs/performance.md: every docs/perf/NAME.csv (the
# numbers of the runs the page quotes) becomes docs/perf/NAME.svg, by
# tools/perfplot (the standard library only). --check writes nothing and
# fails when a checked-in SVG differs from what its CSV gives; the test of
# tools/perfplot checks the same.
set -eu
cd "$(dirname "$0")/.."
case "${1:-}" in
--check) exec go run ./tools/perfplot -check docs/perf ;;
"") exec go run ./tools/perfplot docs/perf ;;
*) echo "usage: scripts/perf-plots.sh [--check]" >&2; exit 2 ;;
esac
