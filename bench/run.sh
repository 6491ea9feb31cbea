#!/usr/bin/env bash
# Benchmark: the compiled MLP training step (batch 64, 784-256-10, float32)
# against PyTorch CPU eager at 1 thread and at nproc threads, in one run.
# Usage: bench/run.sh [ITERATIONS]   (builds gradc first; not part of the tests)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
iters="${1:-50}"
bash "$root/tools/build.sh" >/dev/null
work="$root/build/bench"
mkdir -p "$work" && cd "$work"
"$root/build/gradc" compile "$root/samples/mlp.relay" --grad --wrt=%w1,%b1,%w2,%b2 -O3 -o mlp
cc -O2 -std=c11 -I. "$root/bench/mlp_bench.c" mlp.o -lm -lpthread -o mlp_bench
gradc_ms=$(./mlp_bench "$iters")
torch1_ms=$(/usr/bin/python3 "$root/bench/torch_mlp.py" "$iters" 1)
cores=$(nproc)
torchn_ms=$(/usr/bin/python3 "$root/bench/torch_mlp.py" "$iters" "$cores")
echo "MLP 64x784-256-10 training step (forward + gradient), float32, median of $iters:"
echo "  gradc                     ${gradc_ms} ms   (1 thread)"
echo "  PyTorch eager, 1 thread   ${torch1_ms} ms"
echo "  PyTorch eager, $cores threads  ${torchn_ms} ms"
/usr/bin/python3 -c "print(f'  ratio gradc/PyTorch = {float(\"$gradc_ms\") / float(\"$torch1_ms\"):.2f} (1 thread), {float(\"$gradc_ms\") / float(\"$torchn_ms\"):.2f} ($cores threads); lower is better for gradc')"
