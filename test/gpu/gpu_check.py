#!/usr/bin/env python3
"""GPU check: every operator example and the sample and benchmark models, compiled with
--target=cuda and run on a GPU, against `gradc run` on the CPU with the same inputs.

    gpu_check.py prepare GRADC_BINARY BUNDLE.tar.xz [--only SUBSTRING] [--gpu-arch sm_90]
    gpu_check.py check BUNDLE.tar.xz [--report FILE] [--time N]
    gpu_check.py simulate GRADC_BINARY [--only SUBSTRING] [-j N] [-v]

`prepare` runs where gradc is built (no GPU needed, the CUDA toolkit's cuda.h and stub libcuda
are): for each case it writes the program, draws its inputs with a fixed seed (as the forward
oracle does: floats from ±[0.5, 1.5], integers from [0, int_range)), computes the reference
outputs with `gradc run` on the CPU, compiles the same program with `--target=cuda`, and links
the CUDA object with harness.c into an executable. Cases:
  * every example of `gradc ops --json` and every extra example of test/oracle/oracle.py,
    with the gradient (`--grad`) whenever the program has one, else the forward function;
  * samples/*.relay, bench/gpt_step.relay and bench.py's CNN training step, with --grad; the CNN
    and transformer samples again with --remat=auto at half the workspace; a small CNN built as
    ONNX and imported (`gradc import`, where python3-onnx is installed);
  * the samples that return a loss again as a fused training step (--train=adam, sgd with
    momentum): @main_train_step, the optimizer state and step count starting at zeros, every
    parameter and state updated in place on the device and compared after the call.
Everything goes into one compressed bundle, so it can travel to a machine with a GPU.

`simulate` needs no GPU: every case above runs with `gradc run --target=cuda --simulate`
(the same GPU loop program executed on this CPU, block by block and thread by thread, barriers
and warp shuffles as on the device) and is compared with the CPU target's outputs as `check`
compares the device's. The test suite runs it (test/gpu/simulate.test).

`check` runs there: it unpacks the bundle, runs each executable (outputs and workspace filled
with 0xFF bytes before the call, so an unwritten element is a NaN or -1), and compares every
output with the CPU's: integers and bools exactly, floats with
|gpu - cpu| <= rtol * |cpu| + max(atol * max|cpu|, floor) per output (float64 1e-9 / 1e-12 /
1e-13, float32 1e-4 / 1e-5 / 1e-5, float16 1e-2 / 1e-3 / 1e-3: the two targets sum in different
orders and use different exp and log). A float32 model is compared through its float64 twin
instead: the GPU's largest error against it may be 4 times the CPU's plus rtol times the
output's largest magnitude. It prints `PASS case` or `FAIL case: reason` per case and
`N passed, M failed` last, and exits 1 if anything failed. With --time N the models are timed too (median of N calls).
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CUDA = os.environ.get("CUDA_HOME", "/usr/local/cuda")
# rtol, atol as a fraction of the output's largest magnitude, and an absolute floor (an output
# that cancels to rounding noise, such as the gradient of a sum of softmax rows).
TOLERANCE = {"float64": (1e-9, 1e-12, 1e-13), "float32": (1e-4, 1e-5, 1e-5), "float16": (1e-2, 1e-3, 1e-3)}
# A model is checked against its float64 twin: the GPU's error may be this many times the CPU's,
# plus rtol times the output's largest magnitude (libdevice's expf and logf are within 2 ulp, the
# CPU's within 1, and a deep float32 model amplifies the difference).
ERROR_RATIO = 4


def load_module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------------------------------------
# prepare
# ----------------------------------------------------------------------------------------------


def op_cases(gradc, oracle):
    """(name, program text, int_range, positive) for every registry and oracle example."""
    ops = json.loads(subprocess.run([gradc, "ops", "--json"], check=True, capture_output=True, text=True).stdout)
    known = {o["name"] for o in ops} | {a for o in ops for a in o.get("aliases", [])}
    cases = []
    for o in ops:
        examples = [(str(k), e["params"], e["body"], e["positive"], e["int_range"])
                    for k, e in enumerate(o["examples"])]
        for k, (params, body, positive, int_range) in enumerate(oracle.EXTRA_EXAMPLES.get(o["name"], [])):
            try:
                if not set(oracle.calls_in(oracle.Parser(body).body())) <= known:
                    continue
            except oracle.ParseError:
                pass
            examples.append((f"x{k}", params, body, positive, int_range))
        for label, params, body, positive, int_range in examples:
            text = f'#[version = "0.0.5"]\ndef @main({params}) {{ {body} }}\n'
            cases.append((f"{o['name']}#{label}", text, int_range, positive))
    return cases


# Integer inputs are drawn from [0, 10): class indices and token ids, except where a sample has fewer.
SAMPLE_INT_RANGE = {"lstm.relay": 4}


# A model again with recomputation (--remat=auto at half its adjoint's planned workspace).
REMAT_SUFFIX = " --remat=auto"
REMAT_SAMPLES = ("cnn.relay", "transformer.relay")


def onnx_case(gradc):
    """A small CNN built as ONNX (Conv, BatchNormalization, Relu, MaxPool, Flatten, Gemm) and
    imported by `gradc import`: the imported text, or None without python3-onnx."""
    try:
        import onnx
        from onnx import TensorProto, helper
    except ImportError:
        return None
    rng = np.random.default_rng(11)

    def init(name, *shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, rng.uniform(-0.5, 0.5, shape).ravel().tolist())

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "g", "beta", "mu", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)]
    var = helper.make_tensor("var", TensorProto.FLOAT, [8], rng.uniform(0.5, 1.5, 8).tolist())
    graph = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 10])],
                              [init("w", 8, 3, 3, 3), init("b", 8), init("g", 8), init("beta", 8), init("mu", 8), var,
                               init("fc", 10, 128), init("fcb", 10)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with tempfile.TemporaryDirectory(prefix="gradc-onnx-") as d:
        onnx.save(model, os.path.join(d, "small_cnn.onnx"))
        proc = run([gradc, "import", os.path.join(d, "small_cnn.onnx"), "-o", os.path.join(d, "small_cnn")])
        if proc.returncode != 0:
            raise RuntimeError("gradc import: " + proc.stderr.strip())
        with open(os.path.join(d, "small_cnn.relay")) as f:
            return f.read()


def model_cases(bench, gradc):
    cases = []
    for path in sorted(os.listdir(os.path.join(ROOT, "samples"))):
        if path.endswith(".relay"):
            with open(os.path.join(ROOT, "samples", path)) as f:
                cases.append(("samples/" + path, f.read(), SAMPLE_INT_RANGE.get(path, 10), False))
    with open(os.path.join(ROOT, "bench", "gpt_step.relay")) as f:
        cases.append(("bench/gpt_step.relay", f.read(), 10, False))
    cases.append(("bench/cnn_step", '#[version = "0.0.5"]\n' + bench.CNN_STEP + "\n", 10, False))
    for path in REMAT_SAMPLES:
        with open(os.path.join(ROOT, "samples", path)) as f:
            cases.append(("samples/" + path + REMAT_SUFFIX, f.read(), SAMPLE_INT_RANGE.get(path, 10), False))
    text = onnx_case(gradc)
    if text:
        cases.append(("onnx/small_cnn (imported)", text, 10, True))  # positive: the variance is a parameter
    return cases


# The fused training step (--train) on the samples whose @main returns a loss.
TRAIN_SAMPLES = ("mlp.relay", "cnn.relay", "transformer.relay")
# Adam's first step moves a weight by lr * g / (|g| + eps): about lr whatever |g|, so a gradient
# that cancels to float32 rounding noise (a sum of terms of 1e-2 that come to 1e-7) would move it by
# +lr on one target and -lr on the other. An eps above that noise keeps such a step small.
TRAIN_OPTIMIZERS = ("adam(lr=0.01, eps=1e-5)", "sgd(lr=0.1, momentum=0.9)")


def train_cases():
    cases = []
    for path in TRAIN_SAMPLES:
        with open(os.path.join(ROOT, "samples", path)) as f:
            text = f.read()
        for opt in TRAIN_OPTIMIZERS:
            cases.append((f"samples/{path} --train={opt}", text, SAMPLE_INT_RANGE.get(path, 10), False, opt))
    return cases


def float64_twin(text):
    """The program with every float32 type and literal made float64 (models only)."""
    return re.sub(r"([0-9])f(?![0-9A-Za-z_])", r"\1f64", text.replace("float32", "float64"))


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)


def case_dir(work, name):
    return os.path.join(work, re.sub(r"[^A-Za-z0-9_#.-]", "_", name))


def stage_case(gradc, oracle, d, name, text, int_range, positive, train, compile_cmd):
    """Writes the program and its inputs into `d` and computes the CPU's outputs (and, for a
    float32 model, its float64 twin's). `compile_cmd` (a gradc compile command writing
    d/m.json, without the program and --grad) decides whether the gradient can be taken.
    Returns (case, None): the manifest's function, the gradient flags, the inputs drawn and
    the outputs' descriptions; or (None, why it was skipped)."""
    os.makedirs(d)
    model = os.path.join(d, "model.relay")
    with open(model, "w") as f:
        f.write(text)
    grad = ["--train=" + train] if train else ["--grad"]
    if name.endswith(REMAT_SUFFIX):  # half the workspace the plain adjoint plans
        proc = run(compile_cmd(model) + grad)
        if proc.returncode != 0:
            return None, "gradc compile failed: " + " | ".join(proc.stderr.strip().splitlines()[:3])
        with open(os.path.join(d, "m.json")) as f:
            adjoint = next(f for f in json.load(f)["functions"] if f["name"] == "main_adjoint")
        grad += ["--remat=auto", "--memory-budget=%d" % (adjoint["workspace_bytes"] // 2)]
    proc = run(compile_cmd(model) + grad)
    if proc.returncode != 0 and not train:  # no floating-point parameter, or an operator without a gradient
        grad = []
        proc = run(compile_cmd(model))
    if proc.returncode != 0:
        return None, "gradc compile failed: " + " | ".join(proc.stderr.strip().splitlines()[:3])
    with open(os.path.join(d, "m.json")) as f:
        manifest = json.load(f)
    entry = "main_train_step" if train else "main_adjoint" if grad else "main"
    fn = next(f for f in manifest["functions"] if f["name"] == entry)
    lr = (fn.get("optimizer") or {}).get("hyper_parameters", {}).get("lr")

    def draw(p):
        kind = p.get("training")
        if kind in ("optimizer_state", "step"):  # how the caller starts them
            return np.zeros(tuple(p["shape"]), dtype=p["dtype"])
        if kind == "learning_rate":
            return np.full(tuple(p["shape"]), lr, dtype=p["dtype"])
        return np.array(oracle.draw(rng, tuple(p["shape"]), p["dtype"], positive, int_range), order="C")

    rng = np.random.default_rng(zlib.crc32(name.encode()))
    inputs = []
    for i, p in enumerate(fn["parameters"]):
        x = draw(p)
        np.save(os.path.join(d, f"in_{i}.npy"), x)
        inputs += ["--input", f"{p['name']}={os.path.join(d, f'in_{i}.npy')}"]
    proc = run([gradc, "run", model, *grad, *inputs, "--output-dir", os.path.join(d, "ref")])
    if proc.returncode != 0:
        return None, "gradc run (the CPU reference) failed: " + " | ".join(proc.stderr.strip().splitlines()[:3])
    outputs = [{"dtype": r["dtype"], "shape": r["shape"], "file": f"out_{i}.bin", "ref": f"ref/output_{i}.npy"}
               for i, r in enumerate(fn["results"])]
    if "#" not in name and "float32" in text:
        # A float32 model's outputs carry float32 rounding of its whole depth: both targets are
        # measured against its float64 twin on the same inputs (cast), and the GPU may be at most
        # ERROR_RATIO times as far from it as the CPU.
        with open(os.path.join(d, "model64.relay"), "w") as f:
            f.write(float64_twin(text))
        twin = [gradc, "run", os.path.join(d, "model64.relay"), *grad, "--output-dir", os.path.join(d, "truth")]
        for i, p in enumerate(fn["parameters"]):
            x = np.load(os.path.join(d, f"in_{i}.npy"))
            np.save(os.path.join(d, f"in64_{i}.npy"), x.astype(np.float64) if x.dtype == np.float32 else x)
            twin += ["--input", f"{p['name']}={os.path.join(d, f'in64_{i}.npy')}"]
        proc = run(twin)
        if proc.returncode != 0:
            return None, "gradc run of the float64 twin failed: " + " | ".join(proc.stderr.strip().splitlines()[:3])
        for i, o in enumerate(outputs):
            o["truth"] = f"truth/output_{i}.npy"
    return {"fn": fn, "grad": grad, "inputs": inputs, "model": model, "outputs": outputs}, None


def prepare_case(gradc, oracle, gpu_arch, work, name, text, int_range, positive, train=None):
    """Builds one case directory; returns (name, None) or (name, why it was skipped). With
    `train` (an optimizer), the case is @main_train_step: the state starts at zeros, the rate is
    the optimizer's, and each parameter updated in place is read back after the call."""
    d = case_dir(work, name)
    cuda = lambda model: [gradc, "compile", model, "--target=cuda", "--gpu-arch=" + gpu_arch, "--cpu=x86-64-v2",
                          "--emit=obj,header,manifest", "-o", os.path.join(d, "m")]
    case, why = stage_case(gradc, oracle, d, name, text, int_range, positive, train, cuda)
    if why:
        return name, why
    fn, outputs = case["fn"], case["outputs"]
    updated = {r["updates"]: i for i, r in enumerate(fn["results"]) if r["role"] == "in_place"}
    args = [str(fn["workspace_bytes"])]
    for i, p in enumerate(fn["parameters"]):
        np.load(os.path.join(d, f"in_{i}.npy")).tofile(os.path.join(d, f"in_{i}.bin"))
        if p["role"] == "inout":  # the call writes result `updated[name]` here
            args.append(f"inout:{p['bytes']}:in_{i}.bin:out_{updated[p['name']]}.bin")
        else:
            args.append(f"in:{p['bytes']}:in_{i}.bin")
    why = link_harness(d, name, fn, args, outputs)
    for leftover in os.listdir(d):  # only the raw inputs travel
        if re.fullmatch(r"in(64)?_[0-9]+\.npy|m\.[oh]", leftover):
            os.remove(os.path.join(d, leftover))
    return name, why


def link_harness(d, name, fn, args, outputs, bench=None):
    """Links d/m.o with harness.c into d/run and writes d/case.json; returns why it failed, or None.
    args: the harness's arguments for the inputs (the outputs' are added)."""
    for i, r in enumerate(fn["results"]):
        if r["role"] != "in_place":
            args.append(f"out:{r['bytes']}:out_{i}.bin")
    proc = run(["cc", "-O1", "-std=c11", "-DENTRY=" + fn["symbol"], "-I" + os.path.join(CUDA, "include"),
                os.path.join(HERE, "harness.c"), os.path.join(d, "m.o"), "-L" + os.path.join(CUDA, "lib64", "stubs"),
                "-lcuda", "-lm", "-lpthread", "-o", os.path.join(d, "run")])
    if proc.returncode != 0:
        return "linking the harness failed: " + proc.stderr.strip()
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"name": name, "function": fn["name"], "args": args, "outputs": outputs,
                   "kernels": len(fn.get("kernels", [])), "model": not name.count("#"), "bench": bench,
                   "parameters": [{k: p[k] for k in ("name", "dtype", "role", "training") if k in p}
                                  for p in fn["parameters"]]}, f)
    return None


# ----------------------------------------------------------------------------------------------
# benchmark cases (prepare only): compiled here, their inputs made on the device (harness.c's
# patterns: too large to travel), timed there against PyTorch (bench/gpu_table.py, gpu_peers.py)
# ----------------------------------------------------------------------------------------------

PRODUCT_SIZES = (1024, 2048, 4096, 8192)       # C = A B, n x n x n, float32 (and --gpu-math=tf32)
RESNET_CONVS = ((64, 56), (128, 28), (256, 14), (512, 7))  # 3x3 convolutions: channels, height
CONV_BATCH = 32
ZOO_MODELS = (("resnet18", ["--batch", "16"]), ("gpt2", []))  # bench/zoo/models.py, training mode


def bench_cases():
    """(name, program text or None, whether to take the gradient, the PyTorch peer's description)."""
    cases = []
    for n in PRODUCT_SIZES:
        text = (f'#[version = "0.0.5"]\ndef @main(%a: Tensor[({n}, {n}), float32], '
                f'%b: Tensor[({n}, {n}), float32]) {{ matmul(%a, %b) }}\n')
        cases.append((f"bench:matmul {n}", text, False, {"kind": "matmul", "n": n}))
        cases.append((f"bench:matmul {n} tf32", text, False, {"kind": "matmul", "n": n, "tf32": True}))
    for c, h in RESNET_CONVS:
        for grad in (False, True):
            conv = f"nn.conv2d(%x, %w, padding=[1, 1, 1, 1])"
            text = (f'#[version = "0.0.5"]\ndef @main(%x: Tensor[({CONV_BATCH}, {c}, {h}, {h}), float32], '
                    f'%w: Tensor[({c}, {c}, 3, 3), float32]) {{ {"sum(" + conv + ")" if grad else conv} }}\n')
            cases.append((f"bench:conv3x3 {CONV_BATCH}x{c}x{h}x{h}{' grad' if grad else ''}", text, grad,
                          {"kind": "conv", "batch": CONV_BATCH, "c": c, "h": h, "grad": grad}))
    for model, sizes in ZOO_MODELS:
        cases.append((f"bench:{model} step", None, True, {"kind": "zoo", "model": model, "args": sizes}))
    return cases


def zoo_program(gradc, d, peer):
    """Exports a zoo model (float32, training mode) and imports it into d: (model.relay, the
    --wrt flag of the parameters PyTorch trains), or raises."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "zoo"))
    import timing
    args = argparse.Namespace(gradc=gradc, quick=False, res=None, batch=None, timeout=1800, out=d)
    for k, v in zip(peer["args"][::2], peer["args"][1::2]):
        setattr(args, k.lstrip("-"), int(v))
    case, _ = timing.build_case(args, peer["model"])
    imported = timing.export_and_import(args, case, d)
    if imported.get("error"):
        raise RuntimeError(imported["error"])
    for f in os.listdir(d):  # the weights stay here: the device makes its own
        if f not in ("model.relay", ".gradc_stderr"):
            p = os.path.join(d, f)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    return imported["base"] + ".relay", "--wrt=" + ",".join("%" + n for n in imported["wrt"])


def prepare_bench_case(gradc, gpu_arch, work, name, text, grad, peer):
    d = case_dir(work, name)
    os.makedirs(d)
    flags = (["--grad"] if grad else []) + (["--gpu-math=tf32"] if peer.get("tf32") else [])
    try:
        if text is None:
            model, wrt = zoo_program(gradc, d, peer)
            flags.append(wrt)
        else:
            model = os.path.join(d, "model.relay")
            with open(model, "w") as f:
                f.write(text)
    except Exception as e:  # no PyTorch, torchvision or onnx here
        return name, f"could not export the model: {e}"
    proc = run([gradc, "compile", model, *flags, "--target=cuda", "--gpu-arch=" + gpu_arch, "--cpu=x86-64-v2",
                "--emit=obj,header,manifest", "-o", os.path.join(d, "m")])
    if proc.returncode != 0:
        return name, "gradc compile failed: " + " | ".join(proc.stderr.strip().splitlines()[:3])
    with open(os.path.join(d, "m.json")) as f:
        fn = next(f for f in json.load(f)["functions"] if f["name"] == ("main_adjoint" if grad else "main"))
    # Integer inputs (labels, tokens) below 10: in range for every model here.
    args = [str(fn["workspace_bytes"])] + [
        f"in:{p['bytes']}:@{p['dtype']}" + (":10" if p["dtype"].startswith("int") else "") for p in fn["parameters"]]
    why = link_harness(d, name, fn, args, [], bench=peer)
    for leftover in ("m.o", "m.h", "model.relay"):
        if os.path.exists(os.path.join(d, leftover)):
            os.remove(os.path.join(d, leftover))
    return name, why


def all_cases(gradc, only):
    oracle = load_module("oracle", os.path.join(ROOT, "test", "oracle", "oracle.py"))
    bench = load_module("bench", os.path.join(ROOT, "bench", "bench.py"))
    cases = [(*c, None) for c in op_cases(gradc, oracle) + model_cases(bench, gradc)] + train_cases()
    return oracle, [c for c in cases if not only or only in c[0]]


def prepare(args):
    oracle, cases = all_cases(args.gradc, args.only)
    skipped = []
    with tempfile.TemporaryDirectory(prefix="gradc-gpu-") as tmp:
        work = os.path.join(tmp, "cases")
        os.makedirs(work)
        if args.bench:
            cases += [c for c in bench_cases() if not args.only or args.only in c[0]]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            futures = [pool.submit(prepare_bench_case, args.gradc, args.gpu_arch, work, *c) if c[0].startswith("bench:")
                       else pool.submit(prepare_case, args.gradc, oracle, args.gpu_arch, work, *c) for c in cases]
            for fut in futures:
                name, why = fut.result()
                if why:
                    skipped.append(name)
                    print(f"SKIP {name}: {why}")
                    shutil.rmtree(case_dir(work, name), ignore_errors=True)
        with tarfile.open(args.bundle, "w:xz") as tar:
            tar.add(work, arcname="cases")
    print(f"{len(cases) - len(skipped)} cases in {args.bundle} ({os.path.getsize(args.bundle) >> 10} KiB), "
          f"{len(skipped)} skipped")
    return 0


# ----------------------------------------------------------------------------------------------
# check
# ----------------------------------------------------------------------------------------------


def compare(got, want):
    if got.dtype.kind != "f":
        bad = got != want
        if not bad.any():
            return None
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"{int(bad.sum())} of {got.size} differ, first at {where}: gpu {got[where]!r} vs cpu {want[where]!r}"
    rtol, atol, floor = TOLERANCE[got.dtype.name]
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.isfinite(w)
    scale = float(np.max(np.abs(w[finite]))) if finite.any() else 0.0
    bad = ~np.isclose(g, w, rtol=rtol, atol=max(atol * scale, floor), equal_nan=True)
    if not bad.any():
        return None
    err = np.where(np.isnan(g) != np.isnan(w), np.inf, np.abs(g - w))
    err = np.where(bad, err, -1)
    where = np.unravel_index(int(np.nanargmax(err)), got.shape)
    return (f"{int(bad.sum())} of {got.size} differ, worst at {tuple(int(i) for i in where)}: "
            f"gpu {g[where]!r} vs cpu {w[where]!r} (max |cpu| {scale:.3g})")


def compare_to_truth(got, want, truth):
    """None if the GPU's output is about as close to the float64 truth as the CPU's."""
    if got.dtype.kind != "f":
        return compare(got, want)
    if (np.isnan(got) != np.isnan(want)).any():
        return compare(got, want)
    g, w = got.astype(np.float64), want.astype(np.float64)
    scale = float(np.max(np.abs(truth), initial=0.0))
    gpu, cpu = float(np.max(np.abs(g - truth), initial=0.0)), float(np.max(np.abs(w - truth), initial=0.0))
    if gpu <= ERROR_RATIO * cpu + TOLERANCE[got.dtype.name][0] * scale:
        return None
    return (f"max error against float64 {gpu:.3g} on the GPU, {cpu:.3g} on the CPU "
            f"(more than {ERROR_RATIO}x; max |truth| {scale:.3g})")


def check_case(d, repeats):
    with open(os.path.join(d, "case.json")) as f:
        case = json.load(f)
    cmd = [os.path.join(d, "run"), *case["args"]]
    if (repeats or case.get("bench")) and case["model"]:
        cmd.append(f"time:{repeats or 20}")
    try:
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return case, "timed out", None
    if proc.returncode != 0:
        return case, f"exit {proc.returncode}: {proc.stderr.strip()}", None
    timing = None
    m = re.search(r"TIME ([0-9.]+) ([0-9.]+)", proc.stdout)
    if m:
        timing = (float(m.group(1)), float(m.group(2)))
    if case.get("bench"):  # no CPU reference: a product is compared with PyTorch's on the same inputs
        try:
            sys.path.insert(0, os.path.join(ROOT, "bench"))
            import gpu_peers
            why = gpu_peers.verify(case["bench"], os.path.join(d, "out_0.bin"))
        except ImportError as e:
            why = None if case["bench"]["kind"] != "matmul" else f"not verified (no PyTorch: {e})"
        return case, why, timing
    for i, o in enumerate(case["outputs"]):
        want = np.load(os.path.join(d, o["ref"]))
        got = np.fromfile(os.path.join(d, o["file"]), dtype=o["dtype"]).reshape(o["shape"])
        why = compare_to_truth(got, want, np.load(os.path.join(d, o["truth"]))) if "truth" in o else compare(got, want)
        if why:
            return case, (f"output {i}: {why}" if len(case["outputs"]) > 1 else why), timing
    return case, None, timing


def check(args):
    work = tempfile.mkdtemp(prefix="gradc-gpu-")
    with tarfile.open(args.bundle) as tar:
        tar.extractall(work)
    cases = sorted(os.listdir(os.path.join(work, "cases")))
    lines, passed, failed = [], 0, 0
    for c in cases:
        case, why, timing = check_case(os.path.join(work, "cases", c), args.time)
        label = f"{case['name']} ({case['function']}, {case['kernels']} kernels)"
        if why is None:
            passed += 1
            line = f"PASS {label}"
        else:
            failed += 1
            line = f"FAIL {label}: {why}"
        if timing:
            line += f"  time median {timing[0]:.3f} ms, min {timing[1]:.3f} ms"
        print(line, flush=True)
        lines.append(line)
    summary = f"{passed} passed, {failed} failed"
    print(summary)
    if args.report:
        with open(args.report, "w") as f:
            f.write("\n".join(lines + [summary]) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


# ----------------------------------------------------------------------------------------------
# simulate
# ----------------------------------------------------------------------------------------------


def simulate_case(gradc, oracle, work, name, text, int_range, positive, train=None):
    """(name, None) when `gradc run --target=cuda --simulate` gives the CPU's outputs, else
    (name, why); (name, "SKIP: ...") when the case cannot be staged (as prepare skips it)."""
    d = case_dir(work, name)
    manifest = lambda model: [gradc, "compile", model, "--emit=manifest", "-o", os.path.join(d, "m")]
    case, why = stage_case(gradc, oracle, d, name, text, int_range, positive, train, manifest)
    if why:
        return name, "SKIP: " + why
    sim = os.path.join(d, "sim")
    proc = run([gradc, "run", case["model"], "--target=cuda", "--simulate", "--verify-each", *case["grad"],
                *case["inputs"], "--output-dir", sim])
    if proc.returncode != 0:
        return name, f"exit {proc.returncode}: " + " | ".join(proc.stderr.strip().splitlines()[:3])
    for i, o in enumerate(case["outputs"]):
        want = np.load(os.path.join(d, o["ref"]))
        got = np.load(os.path.join(sim, f"output_{i}.npy"))
        why = compare_to_truth(got, want, np.load(os.path.join(d, o["truth"]))) if "truth" in o else compare(got, want)
        if why:
            return name, f"output {i}: {why}"
    shutil.rmtree(d, ignore_errors=True)
    return name, None


def simulate(args):
    oracle, cases = all_cases(args.gradc, args.only)
    passed, failed, skipped = 0, 0, 0
    with tempfile.TemporaryDirectory(prefix="gradc-sim-") as work:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs or os.cpu_count() or 1) as pool:
            futures = [pool.submit(simulate_case, args.gradc, oracle, work, *c) for c in cases]
            for fut in futures:
                name, why = fut.result()
                if why is None:
                    passed += 1
                    if args.verbose:
                        print(f"PASS {name}", flush=True)
                elif why.startswith("SKIP"):
                    skipped += 1
                    print(f"SKIP {name}: {why[6:]}", flush=True)
                else:
                    failed += 1
                    print(f"FAIL {name}: {why}", flush=True)
    print(f"{passed} passed, {failed} failed, {skipped} skipped (simulated)")
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("gradc")
    p.add_argument("bundle")
    p.add_argument("--only")
    p.add_argument("--gpu-arch", default="sm_90")
    p.add_argument("--no-bench", dest="bench", action="store_false",
                   help="leave out the benchmark cases (products, ResNet convolutions, zoo models)")
    c = sub.add_parser("check")
    c.add_argument("bundle")
    c.add_argument("--report")
    c.add_argument("--time", type=int, default=0)
    m = sub.add_parser("simulate")
    m.add_argument("gradc")
    m.add_argument("--only")
    m.add_argument("-j", "--jobs", type=int, default=0)
    m.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    return {"prepare": prepare, "check": check, "simulate": simulate}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
