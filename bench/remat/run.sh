#!/usr/bin/env bash
# gradc's rematerialization benchmark: builds gradc, installs
# matplotlib for the plot where it is missing (Debian: python3-matplotlib),
# then bench/remat/run.py compiles every model of bench/remat/models.py with
# --remat=none, sqrt and auto over a sweep of budgets and writes the table,
# the figures and the trade-off plot (build/bench_remat/ by default).
# Usage: bench/remat/run.sh [--quick] [--only chain16,mlp,...] [--out DIR]   (not part of the tests)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/tools/build.sh" >/dev/null
if ! /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get install -y python3-matplotlib >/dev/null
fi
exec /usr/bin/python3 "$root/bench/remat/run.py" "$@"
