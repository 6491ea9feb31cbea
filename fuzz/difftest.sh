#!/usr/bin/env bash
# A long run of the differential tester (test/difftest/README.md): random programs from the
# operator registry through `gradc run` and the compiled object, against numpy/PyTorch float64
# and against each other. The test suite runs seed 1 for two minutes; this runs other seeds for
# longer, with the IR verifiers after every pass.
#
#   bash fuzz/difftest.sh [SECONDS] [SEED] [GRADC]     defaults: 1800, the time of day, build/gradc
#
# Two worker processes under `nice`. Failing programs (shrunk reproducers, commands, inputs) stay
# under build-difftest/seed-SEED/; the summary line and every FAIL block go to stdout and to
# build-difftest/seed-SEED.log. Re-running the same seed draws the same programs.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-1800}"
seed="${2:-$(date +%s)}"
gradc="${3:-$root/build/gradc}"
out="$root/build-difftest"
mkdir -p "$out"
rm -rf "$out/seed-$seed"
echo "difftest: seed $seed, $seconds s, $gradc"
GRADC_VERIFY_EACH=1 nice -n 10 /usr/bin/python3 "$root/test/difftest/difftest.py" "$gradc" \
  --seed "$seed" --budget "$seconds" --jobs 2 --work "$out/seed-$seed" | tee "$out/seed-$seed.log"
