#!/usr/bin/env bash
# run_tests.sh - builds and runs the tests of gradc's C runtime (runtime/*.c) with the system C
# compiler: warning-free builds (and bitcode, when clang-19 is there), the thread pool under
# ASan+UBSan, TSan and without sanitizers, the CUDA launcher against a fake libcuda.so.1.
# Prints "N passed, M failed" last; exits nonzero if anything failed. CC and CLANG_19 override.
set -u
cd "$(dirname "$0")" || exit 1
CC=${CC:-cc}
CLANG_19=${CLANG_19:-clang-19}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

passed=0
failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
not_ok() { echo "not ok - $1"; failed=$((failed + 1)); }

# A command that must succeed and print nothing (so warnings fail it too).
quiet() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1) && [ -z "$out" ]; then ok "$name"; else not_ok "$name"; echo "$out" | sed 's/^/#   /'; fi
}

# Runs a test program; counts its "ok"/"not ok" lines, and a crash or a nonzero exit as a failure.
run() {
  local name=$1 out rc
  shift
  out=$(timeout 300 "$@" 2>&1)
  rc=$?
  echo "$out" | sed "s/^\(not \)\{0,1\}ok - /&$name: /"
  local good bad
  good=$(grep -c '^ok - ' <<<"$out")
  bad=$(grep -c '^not ok - ' <<<"$out")
  passed=$((passed + good))
  failed=$((failed + bad))
  if [ "$rc" -ne 0 ] && [ "$bad" -eq 0 ]; then not_ok "$name exited with status $rc"; fi
}

warnings=(-std=c11 -Wall -Wextra -Wpedantic)
for src in threads.c cuda.c; do
  quiet "$src compiles without warnings ($CC)" "$CC" "${warnings[@]}" -O2 -c "$src" -o "$work/${src%.c}.o"
  if command -v "$CLANG_19" >/dev/null; then
    quiet "$src compiles to bitcode without warnings ($CLANG_19)" \
      "$CLANG_19" "${warnings[@]}" -O2 -fPIC -emit-llvm -c "$src" -o "$work/${src%.c}.bc"
  else
    echo "ok - $src to bitcode # SKIP $CLANG_19 not found"
  fi
done

# The plain build links like an application links an emitted object: no -pthread, no -ldl.
sanitize=(-O1 -g -fno-omit-frame-pointer -fno-sanitize-recover=all)
quiet "test_threads links without -pthread" "$CC" -O2 test_threads.c "$work/threads.o" -o "$work/test_threads"
run "threads" "$work/test_threads"
quiet "test_threads builds with ASan+UBSan" \
  "$CC" "${sanitize[@]}" -pthread -fsanitize=address,undefined test_threads.c threads.c -o "$work/test_threads_asan"
run "threads (ASan+UBSan)" "$work/test_threads_asan"
if echo 'int main(void){return 0;}' | "$CC" -fsanitize=thread -x c - -o "$work/probe_tsan" 2>/dev/null &&
  "$work/probe_tsan"; then
  quiet "test_threads builds with TSan" \
    "$CC" "${sanitize[@]}" -pthread -fsanitize=thread test_threads.c threads.c -o "$work/test_threads_tsan"
  run "threads (TSan)" env TSAN_OPTIONS=halt_on_error=1 "$work/test_threads_tsan"
else
  echo "ok - threads (TSan) # SKIP $CC has no working -fsanitize=thread"
fi

mkdir -p "$work/fake" "$work/incomplete" "$work/absent" "$work/cached" "$work/graphs"
quiet "fake libcuda builds" "$CC" -std=c11 -Wall -Wextra -fPIC -shared fake_cuda.c -o "$work/fake/libcuda.so.1"
quiet "fake libcuda without cuModuleUnload builds" \
  "$CC" -std=c11 -Wall -Wextra -fPIC -shared -DFAKE_CUDA_WITHOUT_UNLOAD fake_cuda.c -o "$work/incomplete/libcuda.so.1"
quiet "fake libcuda with cuCtxGetId builds" \
  "$CC" -std=c11 -Wall -Wextra -fPIC -shared -DFAKE_CUDA_CONTEXT_IDS fake_cuda.c -o "$work/cached/libcuda.so.1"
quiet "fake libcuda with graphs builds" "$CC" -std=c11 -Wall -Wextra -fPIC -shared -DFAKE_CUDA_CONTEXT_IDS \
  -DFAKE_CUDA_GRAPHS fake_cuda.c -o "$work/graphs/libcuda.so.1"
quiet "test_cuda links without -ldl" "$CC" -O2 test_cuda.c "$work/cuda.o" -o "$work/test_cuda"
quiet "test_cuda builds with ASan+UBSan" \
  "$CC" "${sanitize[@]}" -fsanitize=address,undefined test_cuda.c cuda.c -o "$work/test_cuda_asan"
for mode in fake incomplete absent cached graphs; do
  run "cuda ($mode)" env LD_LIBRARY_PATH="$work/$mode" "$work/test_cuda" "$mode"
  run "cuda ($mode, ASan+UBSan)" env LD_LIBRARY_PATH="$work/$mode" "$work/test_cuda_asan" "$mode"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
