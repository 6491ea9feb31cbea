#!/usr/bin/env bash
# Builds gradc with AddressSanitizer and UndefinedBehaviorSanitizer into
# ./build-sanitize (Debug: asserts on, and the IR verifiers after every pass)
# and runs every test suite under them. Slower than tools/build.sh; run it
# before resolving a structural change.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGRADC_SANITIZE=ON >/dev/null
ninja -C build-sanitize
cd build-sanitize
# LLVM keeps some allocations for the process's lifetime on purpose: no leak report.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
ctest --output-on-failure "$@"
