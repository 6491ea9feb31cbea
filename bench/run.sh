#!/usr/bin/env bash
# Benchmark: the compiled MLP training step (784-256-10, float32, batch 64 and
# 256) against PyTorch CPU eager, gradc and PyTorch each at 1 thread and at
# nproc threads, in one run. Names the host first.
# Usage: bench/run.sh [ITERATIONS]   (builds gradc first; not part of the tests)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
iters="${1:-50}"
bash "$root/tools/build.sh" >/dev/null
work="$root/build/bench"
mkdir -p "$work" && cd "$work"
cores=$(nproc)
isa=$(grep -q avx512f /proc/cpuinfo && echo AVX-512 || (grep -q avx2 /proc/cpuinfo && echo AVX2 || echo SSE))
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $cores cores, $isa"
echo "MLP 784-256-10 training step (forward + gradient), float32, median ms of $iters:"
printf '  %-6s %12s %12s %14s %14s %10s\n' batch "gradc 1T" "gradc ${cores}T" "PyTorch 1T" "PyTorch ${cores}T" "best ratio"
for batch in 64 256; do
  sed "s/(64, 784)/($batch, 784)/; s/(64,)/($batch,)/" "$root/samples/mlp.relay" > mlp.relay
  "$root/build/gradc" compile mlp.relay --grad --wrt=%w1,%b1,%w2,%b2 -O3 -o mlp
  cc -O2 -std=c11 -I. "$root/bench/mlp_bench.c" mlp.o -lm -o mlp_bench
  g1=$(./mlp_bench "$iters" 1)
  gn=$(./mlp_bench "$iters" "$cores")
  t1=$(/usr/bin/python3 "$root/bench/torch_mlp.py" "$iters" 1 "$batch")
  tn=$(/usr/bin/python3 "$root/bench/torch_mlp.py" "$iters" "$cores" "$batch")
  ratio=$(/usr/bin/python3 -c "print(f'{min($t1, $tn) / min($g1, $gn):.2f}x')")
  printf '  %-6s %12s %12s %14s %14s %10s\n' "$batch" "$g1" "$gn" "$t1" "$tn" "$ratio"
done
echo "best ratio = PyTorch at its best thread count / gradc at its best; above 1 means gradc is faster"
