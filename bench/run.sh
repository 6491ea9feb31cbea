#!/usr/bin/env bash
# gradc's CPU benchmark table: builds gradc, then bench/bench.py prints
# the host (CPU, cores, vector ISA, measured FMA peak) and one row per
# benchmark, each a ratio measured in this run: matrix products
# against OpenBLAS (numpy), a fused elementwise chain against memcpy, softmax
# rows against PyTorch, the MLP training step against PyTorch eager. Every
# figure is timed in a process of its own, one at a time, with its thread count
# fixed before it starts, warmed up, best of several passes (bench/bench.py).
# Usage: bench/run.sh [--quick] [--only gemm,elementwise,softmax,mlp,cnn,gpt,lstm] [--cpu CPU --peer-isa ISA]
#                     [--repeat N] [--markdown]   (not part of the tests)
# --markdown ends with the README's table: host, date and one row per figure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/build.sh" >/dev/null
# A benchmark command only: OpenBLAS tuned for another core would not be a fair peer.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
exec /usr/bin/python3 "$root/bench/bench.py" "$@"
