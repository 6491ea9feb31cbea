#!/usr/bin/env bash
# Every test: installs what is missing, builds, then runs the Catch2 unit
# tests and the lit suite through ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/install-deps.sh"
bash "$root/tools/build.sh"
cd "$root/build"
ctest --output-on-failure
