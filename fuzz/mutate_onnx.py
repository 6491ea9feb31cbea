"""Byte-mutation fuzzing of `gradc import` without libFuzzer (which needs a
clang build, fuzz/run_onnx.sh): each seed model is mutated N times (bytes
flipped, runs overwritten, the file cut, a varint inflated) and imported;
any exit other than 0, 1 or 2, a signal, a timeout or a sanitizer report is
a finding, kept under OUT/findings/. Run it with a sanitizer build's gradc
(tools/sanitize.sh builds one).

Seeds: ONNX's backend node tests up to 64 KiB, the import tests' models,
and two models whose initializers are large enough (over 4 KiB) that the
importer leaves their bytes in the mapped file.

usage: mutate_onnx.py GRADC OUT [MUTATIONS_PER_SEED] [SEEDS_LIMIT]   (MUTATE_SEED=N: another random sequence)
"""
import glob
import os
import random
import shutil
import subprocess
import sys


def large_seeds(out):
    import numpy as np
    from onnx import TensorProto as T, helper as H, numpy_helper as N
    rng = np.random.default_rng(1)
    w1 = N.from_array(rng.standard_normal((32, 64)).astype(np.float32), "w1")
    w2 = N.from_array(rng.standard_normal((64, 16)), "w2")
    nodes = [H.make_node("MatMul", ["x", "w1"], ["h"]), H.make_node("Relu", ["h"], ["r"]),
             H.make_node("Cast", ["r"], ["c"], to=T.DOUBLE), H.make_node("MatMul", ["c", "w2"], ["y"])]
    g = H.make_graph(nodes, "large", [H.make_tensor_value_info("x", T.FLOAT, [2, 32])],
                     [H.make_tensor_value_info("y", T.DOUBLE, [2, 16])], [w1, w2])
    paths = []
    for opset in (13, 17):
        p = os.path.join(out, "large_%d.onnx" % opset)
        with open(p, "wb") as f:
            f.write(H.make_model(g, opset_imports=[H.make_opsetid("", opset)]).SerializeToString())
        paths.append(p)
    return paths


def mutate(data, rnd):
    b = bytearray(data)
    kind = rnd.randrange(4)
    if kind == 0:  # flip bytes
        for _ in range(rnd.randint(1, 8)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    elif kind == 1:  # overwrite a run
        at = rnd.randrange(len(b))
        for i in range(at, min(len(b), at + rnd.randint(1, 32))):
            b[i] = rnd.choice([0, 0xFF, 0x7F, 0x80, rnd.randrange(256)])
    elif kind == 2:  # cut
        del b[rnd.randrange(1, len(b)):]
    else:  # an inflated varint (a length or a dimension)
        at = rnd.randrange(len(b))
        b[at:at + 1] = bytes([0xFF] * rnd.randint(1, 9) + [0x01])
    return bytes(b)


def main():
    gradc, out = sys.argv[1], sys.argv[2]
    per_seed = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    limit = int(sys.argv[4]) if len(sys.argv) > 4 else 10 ** 9
    os.makedirs(os.path.join(out, "findings"), exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    made = os.path.join(out, "made")
    os.makedirs(made, exist_ok=True)
    subprocess.run([sys.executable, os.path.join(here, "..", "test", "import", "Inputs", "make_models.py"), made],
                   check=True, capture_output=True)
    seeds = large_seeds(made) + sorted(glob.glob(os.path.join(made, "*.onnx")))
    seeds += [p for p in sorted(glob.glob("/usr/include/onnx/backend/test/data/node/*/model.onnx"))
              if os.path.getsize(p) <= 65536]
    seeds = seeds[:limit]
    rnd = random.Random(int(os.environ.get("MUTATE_SEED", "12345")))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    runs, findings = 0, 0
    case = os.path.join(out, "case.onnx")
    for seed in seeds:
        data = open(seed, "rb").read()
        for _ in range(per_seed):
            with open(case, "wb") as f:
                f.write(mutate(data, rnd))
            try:
                p = subprocess.run([gradc, "import", case, "-o", os.path.join(out, "imported")], env=env,
                                   capture_output=True, timeout=60)
                bad = p.returncode not in (0, 1, 2) or b"Sanitizer" in p.stderr or b"runtime error" in p.stderr
                why = "exit %d" % p.returncode
            except subprocess.TimeoutExpired:
                bad, why = True, "timeout"
            runs += 1
            if bad:
                findings += 1
                kept = os.path.join(out, "findings", "%d.onnx" % findings)
                shutil.copy(case, kept)
                print("FINDING %s: %s (from %s)" % (kept, why, seed))
    print("%d mutated models from %d seeds: %d findings" % (runs, len(seeds), findings))


if __name__ == "__main__":
    main()
