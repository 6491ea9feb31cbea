#!/usr/bin/env bash
# Benchmark: the compiled MLP training step (batch 64, 784-256-10, float32)
# against PyTorch CPU eager, in one run, with the same threads available.
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
torch_ms=$(/usr/bin/python3 "$root/bench/torch_mlp.py" "$iters")
threads=$(/usr/bin/python3 -c "import torch; print(torch.get_num_threads())")
echo "MLP 64x784-256-10 training step (forward + gradient), median of $iters:"
echo "  gradc           ${gradc_ms} ms"
echo "  PyTorch eager   ${torch_ms} ms   (${threads} threads)"
/usr/bin/python3 -c "print(f'  ratio gradc/PyTorch = {float(\"$gradc_ms\") / float(\"$torch_ms\"):.2f} (lower is better for gradc)')"
