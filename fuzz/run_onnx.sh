#!/usr/bin/env bash
# Fuzzes the ONNX importer (fuzz_onnx.cpp) on one core, niced, for SECONDS
# (default 600), seeded with ONNX's backend test models (libonnx-testdata) and
# the import tests' models. Builds like fuzz/run.sh; the corpus it grows is
# build-fuzz/fuzz-onnx-corpus/, findings build-fuzz/fuzz-onnx-findings/.
#
#   bash fuzz/run_onnx.sh [SECONDS] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
build=build-fuzz
if [[ ! -f $build/build.ninja ]]; then
  CC=clang-19 CXX=clang++-19 nice -n 10 cmake -S . -B $build -G Ninja -DGRADC_FUZZ=ON >/dev/null
fi
nice -n 10 ninja -C $build -j2 gradc_fuzz_onnx
seeds=$build/fuzz-onnx-seeds
rm -rf "$seeds"
mkdir -p "$seeds" $build/fuzz-onnx-corpus $build/fuzz-onnx-findings
for f in /usr/include/onnx/backend/test/data/*/*/model.onnx; do
  [[ -f $f ]] && [[ $(stat -c %s "$f") -le 65536 ]] && cp "$f" "$seeds/$(basename "$(dirname "$f")").onnx"
done
/usr/bin/python3 test/import/Inputs/make_models.py "$seeds/made" >/dev/null && mv "$seeds"/made/*.onnx "$seeds"/ && rm -rf "$seeds/made"
ASAN_OPTIONS=detect_leaks=0 nice -n 10 $build/fuzz/gradc_fuzz_onnx $build/fuzz-onnx-corpus "$seeds" \
  -max_total_time="$seconds" -max_len=65536 -timeout=20 -rss_limit_mb=4096 -fork=1 -ignore_crashes=1 \
  -ignore_timeouts=1 -ignore_ooms=1 -artifact_prefix=$build/fuzz-onnx-findings/ "$@" 2>&1 | tee $build/fuzz-onnx.log | \
  grep -E "^#[0-9]+.*(NEW|pulse|DONE)|ERROR|crash|Test unit written" | tail -n 30
