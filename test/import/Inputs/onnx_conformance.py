"""Runs ONNX's backend test cases (libonnx-testdata) through gradc: for each
case, model.onnx and test_data_set_0/input_*.pb are imported and run with
`gradc run` (the model's weights are its own), and every output is compared
with output_*.pb (dtype, shape, and values within rtol 1e-3, atol 1e-5 as
ONNX's backend tests do for float).

A case is "unsupported" when the importer refuses it (an operator without a
mapping, an attribute or dtype a mapping does not support: the message
says which), "failed" when gradc accepts it and gets it wrong or cannot
compile it, "passed" otherwise. Prints one line per case that did not pass,
then "N passed, M failed, K unsupported".

usage: onnx_conformance.py GRADC WORKDIR [--suite node,pytorch-converted,pytorch-operator] [--filter SUBSTR]
       [--expect-failures FILE] [-j JOBS]
"""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

DATA = "/usr/include/onnx/backend/test/data"
UNSUPPORTED = re.compile(r"no mapping for ONNX operator|not supported|has no gradc dtype|is not a tensor|"
                         r"external data|operators of domain")


def sanitize(name):
    """The parameter name gradc import gives an ONNX name (frontend/Onnx.cpp)."""
    out = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return "v" + out if not out or out[0].isdigit() else out


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def run_case(gradc, case, work):
    name = os.path.relpath(case, DATA).replace("/", "__")
    out_dir = os.path.join(work, name)
    os.makedirs(out_dir, exist_ok=True)
    model_path = os.path.join(case, "model.onnx")
    try:
        model = onnx.load(model_path)
    except Exception as e:  # noqa: BLE001 - a case the library cannot read
        return name, "unsupported", "onnx cannot load it: %s" % e
    inits = {t.name for t in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in inits]
    sets = sorted(glob.glob(os.path.join(case, "test_data_set_*")))
    if not sets:
        return name, "unsupported", "no test data"
    data = sets[0]
    args = [gradc, "run", model_path, "--output-dir", os.path.join(out_dir, "out")]
    files = sorted(glob.glob(os.path.join(data, "input_*.pb")), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
    if len(files) != len(inputs):
        return name, "unsupported", "%d inputs, %d input files" % (len(inputs), len(files))
    for i, (n, f) in enumerate(zip(inputs, files)):
        try:
            a = load_pb(f)
        except Exception as e:  # noqa: BLE001 - sequences, optionals
            return name, "unsupported", "input %d is not a tensor (%s)" % (i, type(e).__name__)
        p = os.path.join(out_dir, "input_%d.npy" % i)
        np.save(p, a)
        args += ["--input", "%s=%s" % (sanitize(n), p)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[0]
        if p.returncode == 1 and UNSUPPORTED.search(p.stderr):
            return name, "unsupported", msg
        return name, "failed", msg
    expected = sorted(glob.glob(os.path.join(data, "output_*.pb")), key=lambda q: int(re.findall(r"\d+", os.path.basename(q))[0]))
    for i, f in enumerate(expected):
        try:
            want = load_pb(f)
        except Exception as e:  # noqa: BLE001
            return name, "unsupported", "output %d is not a tensor (%s)" % (i, type(e).__name__)
        got_path = os.path.join(out_dir, "out", "output_%d.npy" % i)
        if not os.path.exists(got_path):
            return name, "failed", "no output %d" % i
        got = np.load(got_path)
        if got.dtype != want.dtype or got.shape != want.shape:
            return name, "failed", "output %d: %s %s, expected %s %s" % (i, got.dtype, got.shape, want.dtype, want.shape)
        if want.dtype.kind == "f":
            if not np.allclose(got, want, rtol=1e-3, atol=1e-5, equal_nan=True):
                return name, "failed", "output %d: max abs error %g" % (i, float(np.nanmax(np.abs(got - want))))
        elif not np.array_equal(got, want):
            return name, "failed", "output %d differs" % i
    return name, "passed", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gradc")
    ap.add_argument("work")
    ap.add_argument("--suite", default="node,pytorch-converted,pytorch-operator")
    ap.add_argument("--filter", default="")
    ap.add_argument("-j", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    cases = []
    for suite in args.suite.split(","):
        cases += sorted(d for d in glob.glob(os.path.join(DATA, suite, "*")) if args.filter in d)
    results = []
    with concurrent.futures.ThreadPoolExecutor(args.j) as ex:
        for r in ex.map(lambda c: run_case(args.gradc, c, args.work), cases):
            results.append(r)
    counts = {"passed": 0, "failed": 0, "unsupported": 0}
    for name, status, msg in results:
        counts[status] += 1
        if status != "passed":
            print("%-11s %s: %s" % (status.upper(), name, msg))
    print("%d passed, %d failed, %d unsupported" % (counts["passed"], counts["failed"], counts["unsupported"]))


if __name__ == "__main__":
    main()
