"""A model compiled in partitions (several LLVM modules on several threads, their objects merged)
against the same model compiled as one module (`--emit=obj,asm`: the text of the whole module
needs one). Both objects are linked with object_harness.c (outputs and workspace filled with 0xFF
first) and every entry point is called on the same random inputs: the results must be the same
bit for bit. The partitioned object must export exactly what the one-module object exports (the
entry points and the thread-count functions) and no kernel may stay global.

Usage: partition_check.py GRADC MODEL WORKDIR [GRADC FLAGS...]"""
import json
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
gradc, model, work = sys.argv[1:4]
flags = sys.argv[4:]
rng = np.random.default_rng(5)


def compile_to(name, emit):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    base = os.path.join(d, "m")
    done = subprocess.run([gradc, "compile", model, "-v", "--emit=" + emit, "-o", base, *flags], check=True,
                          capture_output=True, text=True)
    m = re.search(r"\[codegen\] (\d+) kernels in (\d+) partition\(s\), compiled on (\d+) thread", done.stderr)
    return base, (int(m.group(2)) if m else 1)


def symbols(obj, *options):
    out = subprocess.run(["nm", *options, obj], check=True, capture_output=True, text=True).stdout
    return sorted(line.split()[-1] for line in out.splitlines() if line.strip())


def call(base, fn, inputs):
    d = os.path.dirname(base)
    exe = os.path.join(d, "run_" + fn["name"])
    subprocess.run(["cc", "-O1", "-std=c11", "-DENTRY=" + fn["symbol"], os.path.join(HERE, "object_harness.c"),
                    base + ".o", "-lm", "-lpthread", "-o", exe], check=True)
    cmd = [exe, str(fn["workspace_bytes"])]
    for p in fn["parameters"]:
        path = os.path.join(d, fn["name"] + "_" + p["c_field"] + ".in")
        inputs[p["c_field"]].tofile(path)
        cmd.append("in:%d:%s" % (p["bytes"], path))
    outs = []
    for r in fn["results"]:
        path = os.path.join(d, fn["name"] + "_" + r["c_field"] + ".out")
        outs.append(path)
        cmd.append("out:%d:%s" % (r["bytes"], path))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return [open(p, "rb").read() for p in outs]


def random_input(p):
    dtype = np.dtype(p["dtype"])
    if dtype.kind == "f":
        return rng.standard_normal(p["shape"]).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, p["shape"]).astype(dtype)
    return rng.integers(0, 2, p["shape"]).astype(dtype)  # indices: valid for any axis of length 2 or more


split, parts = compile_to("split", "obj,header,manifest")
whole, whole_parts = compile_to("whole", "obj,header,manifest,asm")
assert parts >= 2, "expected the model to be compiled in partitions, got %d" % parts
assert whole_parts == 1, whole_parts
exported = symbols(split + ".o", "-g", "--defined-only")
assert exported == symbols(whole + ".o", "-g", "--defined-only"), (exported, symbols(whole + ".o", "-g", "--defined-only"))
manifest = json.load(open(split + ".json"))
entry_points = {f["symbol"] for f in manifest["functions"]}
assert entry_points <= set(exported), (entry_points, exported)
assert all(s in entry_points or s.endswith(("_set_num_threads", "_get_num_threads", "_shutdown_threads"))
           for s in exported), exported
for fn in manifest["functions"]:
    inputs = {p["c_field"]: random_input(p) for p in fn["parameters"]}
    a, b = call(split, fn, inputs), call(whole, fn, inputs)
    for r, x, y in zip(fn["results"], a, b):
        assert x == y, "%s: result %s differs between the partitioned and the one-module object" % (fn["name"], r["c_field"])
    print("%s: %d results, bit for bit the same in %d partitions and in one module" % (fn["name"], len(a), parts))
print("exported: " + " ".join(exported))
