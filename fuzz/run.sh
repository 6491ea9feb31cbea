#!/usr/bin/env bash
# Builds the libFuzzer targets into build-fuzz/ (clang-19, ASan+UBSan, every
# layer instrumented) and fuzzes the whole pipeline (fuzz_pipeline.cpp) on one
# core, niced, for SECONDS (default 1800):
#
#   bash fuzz/run.sh [SECONDS] [extra libFuzzer flags...]
#
# The seeds are generated at run time into build-fuzz/fuzz-seeds/: fuzz/corpus/,
# every .relay under test/ and samples/, and one model per example of every
# operator (`gradc ops --json`); so is the dictionary (operator names, dtypes,
# keywords, the option words the target reads from its input). The corpus the
# fuzzer grows is build-fuzz/fuzz-corpus/ (kept between runs), findings are
# build-fuzz/fuzz-findings/{crash,leak,timeout,oom}-*, the log build-fuzz/fuzz.log.
# One finding does not stop the run (-fork=1 -ignore_crashes=1 ...: one worker
# process at a time). Reproduce or minimize one with
#   GRADC_FUZZ_VERBOSE=1 build-fuzz/fuzz/gradc_fuzz_pipeline FILE
#   build-fuzz/fuzz/gradc_fuzz_pipeline -minimize_crash=1 -runs=20000 FILE
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-1800}
shift || true
build=build-fuzz

if [[ ! -f $build/build.ninja ]]; then
  CC=clang-19 CXX=clang++-19 nice -n 10 cmake -S . -B $build -G Ninja -DGRADC_FUZZ=ON >/dev/null
fi
nice -n 10 ninja -C $build -j2 gradc_fuzz_pipeline gradc_fuzz_frontend gradc

seeds=$build/fuzz-seeds
rm -rf "$seeds"
mkdir -p "$seeds" $build/fuzz-corpus $build/fuzz-findings
cp fuzz/corpus/* "$seeds"/
find test samples -name '*.relay' | while read -r f; do cp "$f" "$seeds/$(echo "$f" | tr / _)"; done
ASAN_OPTIONS=detect_leaks=0 $build/gradc ops --json > $build/ops.json
python3 - "$build/ops.json" "$seeds" "$build/fuzz-pipeline.dict" <<'EOF'
import json, sys
ops = json.load(open(sys.argv[1]))
n = 0
for op in ops:
    for i, ex in enumerate(op["examples"]):
        with open(f"{sys.argv[2]}/op_{op['name']}_{i}.relay", "w") as f:
            f.write('#[version = "0.0.5"]\n'
                    f'def @main({ex["params"]}) {{\n  {ex["body"]}\n}}\n')
        n += 1
words = {op["name"] for op in ops} | {a for op in ops for a in op["aliases"]}
words |= {a["name"] + "=" for op in ops for a in op["attributes"]}
words |= {"def", "fn", "let", "Tensor", "True", "False", "None", "meta", "version", "virtual_device",
          "float16", "float32", "float64", "int32", "int64", "bool", "inff", "nan",
          "#[version = \"0.0.5\"]", "-> ", "%0", "@main", "@f", "f16", "f64", "i64", "i32", "1e38",
          "2147483648", "4294967297", "--grad=main", "--grad=f", "--wrt=%x", "--remat=none", "--target=cuda",
          "(", ")", "[", "]", "{", "}", ",", ";", ".0", ".1", "= "}
with open(sys.argv[3], "w") as f:
    for w in sorted(words):
        f.write('"' + w.replace("\\", "\\\\").replace('"', '\\"') + '"\n')
print(f"{n} operator examples as seeds, {len(words)} dictionary words")
EOF
echo "$(ls "$seeds" | wc -l) seeds in $seeds"

# Leaks are findings too (libFuzzer checks an input when its mallocs and frees do not balance).
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}"
set -x
nice -n 10 $build/fuzz/gradc_fuzz_pipeline -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=16384 \
  -dict=$build/fuzz-pipeline.dict -artifact_prefix=$build/fuzz-findings/ -print_final_stats=1 \
  "$@" $build/fuzz-corpus "$seeds" 2>&1 | tee $build/fuzz.log
