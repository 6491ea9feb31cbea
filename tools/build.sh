#!/usr/bin/env bash
# Configures and builds gradc into ./build (Ninja, RelWithDebInfo, ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build
