#!/usr/bin/env bash
# The main job on the sample: install what is missing, build gradc, compile
# samples/mlp.relay with its gradient to an object and to PTX, link the C
# driver with the object, and run a few training steps.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/install-deps.sh"
bash "$root/tools/build.sh"
out="$root/build/demo"
mkdir -p "$out"
cd "$out"
gradc="$root/build/gradc"
set -x
"$gradc" compile "$root/samples/mlp.relay" --grad --wrt=%w1,%b1,%w2,%b2 -o mlp --report
"$gradc" compile "$root/samples/mlp.relay" --grad --wrt=%w1,%b1,%w2,%b2 --target=cuda --gpu-arch=sm_90 -o mlp_cuda
cc -O2 -std=c11 -I. "$root/samples/mlp_app.c" mlp.o -lm -o mlp_app
{ set +x; } 2>/dev/null
ls -l mlp.o mlp.h mlp.json mlp_cuda.ptx mlp_cuda.o
if command -v ptxas >/dev/null || [ -x /usr/local/cuda/bin/ptxas ]; then
  "$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)" -arch=sm_90 mlp_cuda.ptx -o /dev/null && echo "ptxas -arch=sm_90: ok"
fi
./mlp_app
