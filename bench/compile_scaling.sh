#!/usr/bin/env bash
# Compile-time scaling: -O2 compile time of models with N
# distinct kernels (softmax over N different shapes, widths 16..1015 and one more
# row every 1000 kernels, so no two kernels share a function and the kernels do
# not grow with N) and of N identical ones, for N from 250 to 4000. Time per kernel
# should stay roughly constant. Names the host first.
# Usage: bench/compile_scaling.sh   (builds gradc first; not part of the tests)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/build.sh" >/dev/null
work="$root/build/bench/compile" && mkdir -p "$work" && cd "$work"
echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
printf '  %-8s %-10s %10s %14s\n' kernels kind seconds "ms per kernel"
for n in 250 500 1000 2000 4000; do
  /usr/bin/python3 - "$n" <<'PY'
import sys
n = int(sys.argv[1])
params = ", ".join("%%x%d: Tensor[(%d, %d), float32]" % (i, 4 + i // 1000, 16 + i % 1000) for i in range(n))
body = ["  %%s%d = nn.softmax(%%x%d);" % (i, i) for i in range(n)]
open("distinct.relay", "w").write('#[version = "0.0.5"]\ndef @main(%s) {\n%s\n  (%s)\n}\n' % (
    params, "\n".join(body), ", ".join("%%s%d" % i for i in range(n))))
chain = ["  %%%d = nn.softmax(%s);" % (i, "%x" if i == 0 else "%%%d" % (i - 1)) for i in range(n)]
open("identical.relay", "w").write('#[version = "0.0.5"]\ndef @main(%%x: Tensor[(4, 64), float32]) {\n%s\n  %%%d\n}\n' % (
    "\n".join(chain), n - 1))
PY
  for kind in distinct identical; do
    start=$(date +%s.%N)
    "$root/build/gradc" compile "$kind.relay" -O2 -o "$kind"
    end=$(date +%s.%N)
    /usr/bin/python3 -c "s = $end - $start; print('  %-8d %-10s %10.2f %14.2f' % ($n, '$kind', s, 1000 * s / $n))"
  done
done
