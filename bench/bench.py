#!/usr/bin/env python3
"""gradc's CPU benchmark table: every row a ratio measured in this one run,
on this host, which is named first with its vector ISA, the single-core FMA
peak measured by bench/fma_peak.c and the load average.

  python3 bench/bench.py [--quick] [--only ROWS] [--cpu CPU --peer-isa ISA] [--repeat N] [--markdown]
  (bench/run.sh builds gradc and calls this)

--markdown prints, once every figure is in, one markdown table headed by the
host (CPU model, cores, vector ISA, FMA peak) and the date: the README's CPU
table. The running commentary then goes to stderr.

--cpu compiles gradc's code for another CPU of this host's family (e.g. haswell:
AVX2 tiles on an AVX-512 host) and --peer-isa pins the peers to the same vector
ISA (OPENBLAS_CORETYPE and ATEN_CPU_CAPABILITY: avx2 or avx512), so that an
AVX2 comparison can be made on an AVX-512 machine.

Rows: matrix products (nn.dense x·wᵀ and the gradient layouts dyᵀ·x and dy·w)
against OpenBLAS through numpy and torch, all single-threaded; a fused
elementwise chain against a C memcpy of the same bytes; softmax and
log_softmax rows against PyTorch; the MLP training step (784-256-10) at batch
16, 64 and 256, gradc at 1 and all threads against PyTorch eager at its best
thread count; conv2d 3x3 64->64 56x56 batch 8 and a depthwise 3x3 over 128
channels against PyTorch (oneDNN) with one thread, and a CNN training step (batch 32, 3x32x32: two conv+batch
norm+relu, max pool, a strided conv, global average pool, dense, nll loss)
against PyTorch at its best thread count; a GPT-style training step (bench/gpt_step.relay: batch 8,
sequence 64, width 128, 4 heads, MLP 512, vocabulary 1000, tied embedding, causal mask, two layer
norms, gelu, cross entropy) against PyTorch at its best thread count. Named with --only
convs (not by default): resnet18's convolutions one by one, forward, data and weight gradients
against PyTorch's (oneDNN), one thread, each with its share of the FMA peak; convs50: resnet50's,
and their sum with each as often as the model has it.

Every figure is timed in a process of its own, one process at a time: gradc
through its C ABI (bench/harness.c), OpenBLAS through numpy and PyTorch eager in
a fresh Python each, memcpy in C. Each process gets its thread count before its
first operation (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS in its
environment; torch.set_num_threads and set_num_interop_threads before any
PyTorch operation; gradc's set_num_threads before its first call), is warmed up
until its timings stop falling and reports the best of several passes
(bench/timing.h, bench/peer_timing.py). The table's legend says so.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRADC = os.environ.get("GRADC", os.path.join(ROOT, "build", "gradc"))  # another build: GRADC=path
WORK = os.path.join(ROOT, "build", "bench")
CORES = os.cpu_count() or 1
# The timing policy of every timed process (bench/timing.h): MIN_WARM_MS, MAX_WARM_MS, PASS_MS, PASSES.
MIN_WARM_MS, MAX_WARM_MS, PASS_MS, PASSES = 1000, 5000, 10, 20
POLICY = "%d,%d,%d,%d" % (MIN_WARM_MS, MAX_WARM_MS, PASS_MS, PASSES)
CPU = None       # --cpu
PEER_ISA = None  # --peer-isa
REPEAT = 1       # --repeat
MARKDOWN = False  # --markdown: the commentary to stderr, the table at the end to stdout
TABLE = []        # the markdown rows: (benchmark, gradc, peer, ratio)


def say(*args, **kwargs):
    """The running commentary: stdout, or stderr under --markdown."""
    print(*args, file=sys.stderr if MARKDOWN else sys.stdout, **kwargs)


def sh(cmd, env=None, cwd=WORK):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=cwd).stdout.strip()


def host():
    model = "unknown CPU"
    for line in sh(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return model, isa


def fma_peak():
    exe = os.path.join(WORK, "fma_peak")
    sh(["cc", "-O2", "-march=" + (CPU or "native"), "-ffp-contract=fast", os.path.join(ROOT, "bench", "fma_peak.c"),
        "-o", exe])
    return measure("FMA peak", [exe, POLICY], 1)


class Model:
    """A .relay program compiled by gradc and linked with bench/harness.c."""

    def __init__(self, name, text, compile_flags=()):
        self.name = name
        path = os.path.join(WORK, name + ".relay")
        with open(path, "w") as f:
            f.write('#[version = "0.0.5"]\n' + textwrap.dedent(text))
        cpu = ["--cpu=" + CPU] if CPU else []
        sh([GRADC, "compile", path, "-O2", "-o", os.path.join(WORK, name), *cpu, *compile_flags])
        with open(os.path.join(WORK, name + ".json")) as f:
            manifest = json.load(f)
        self.functions = {fn["name"]: fn for fn in manifest["functions"]}
        self.built = set()

    def time(self, function="main", threads=1, scales=None):
        """Milliseconds of one call (measure()); `scales` maps a parameter to
        the SCALE of its fill (harness.c), to match the peer's inputs."""
        fn = self.functions[function]
        exe = os.path.join(WORK, "%s_%s" % (self.name, function))
        if function not in self.built:
            self.built.add(function)
            sh(["cc", "-O2", "-std=c11", "-DENTRY=" + fn["symbol"], "-DSET_THREADS=%s_set_num_threads" % self.name,
                os.path.join(ROOT, "bench", "harness.c"), os.path.join(WORK, self.name + ".o"), "-lm", "-lpthread",
                "-o", exe])
        scales = scales or {}
        args = ["in:%d:%s:%g" % (p["bytes"], p["dtype"], scales.get(p["name"], 1)) for p in fn["parameters"]]
        args += ["out:%d" % r["bytes"] for r in fn["results"]]
        return measure("gradc %s %dT" % (self.name, threads),
                       [exe, POLICY, str(threads), str(fn["workspace_bytes"]), *args], threads)


def timed_env(threads):
    """The environment of a timed process: its thread count fixed before it
    starts, OpenBLAS tuned for this host's own core or pinned to --peer-isa,
    bench/ on Python's path (peer_timing)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["PYTHONPATH"] = os.path.join(ROOT, "bench")
    if PEER_ISA:
        env["OPENBLAS_CORETYPE"] = {"avx2": "Haswell", "avx512": "SkylakeX"}[PEER_ISA]
        env["ATEN_CPU_CAPABILITY"] = PEER_ISA
    return env


def measure(what, cmd, threads):
    """Runs one timed process to its end, alone (it prints "FIGURE SETTLED",
    bench/timing.h) and returns its figure: milliseconds per call, or GFLOP/s
    for the FMA peak. With --repeat N, N such processes one after the other,
    and the best of their figures: on a host whose neighbours take its cores
    for seconds at a time (a VM's steal time), the best of a few processes is
    the figure of an undisturbed one, for gradc and its peers alike."""
    figures = []
    for _ in range(REPEAT):
        figure, settled = sh(cmd, env=timed_env(threads)).split()
        if settled != "1":
            say("  (%s: warm-up still falling after %d ms; timed anyway)" % (what, MAX_WARM_MS), flush=True)
        figures.append(float(figure))
    return max(figures) if what == "FMA peak" else min(figures)


def python_peer(what, setup, expr, threads=1, torch=False):
    """Times `expr` after `setup` in a fresh Python; with `torch`, PyTorch's
    thread counts are set before anything else and autograd is off."""
    lines = ["import torch", "torch.set_num_threads(%d)" % threads, "torch.set_num_interop_threads(%d)" % threads,
             "torch.set_grad_enabled(False)"] if torch else []
    lines += ["import numpy as np", "import peer_timing", setup, "peer_timing.report(lambda: %s, %r)" % (expr, POLICY)]
    return measure(what, ["/usr/bin/python3", "-c", "\n".join(lines)], threads)


def row(name, ours, theirs, what, extra="", peer="PyTorch", notes=("", "")):
    """One row: printed, and kept for the markdown table (`peer` names the
    peer; `notes` add to the gradc and peer cells)."""
    say("  %-34s %10.3f %10.3f %8.2fx  %s%s" % (name, ours, theirs, theirs / ours, what, extra), flush=True)
    TABLE.append((name, "%.3f ms%s" % (ours, notes[0]), "%s %.3f ms%s" % (peer, theirs, notes[1]),
                  "%.2f×" % (theirs / ours)))


def threads_note(times):
    """' (1T 25.331, 2T 12.920)': a figure per thread count."""
    return " (%s)" % ", ".join("%dT %.3f" % kv for kv in times.items()) if len(times) > 1 else ""


def gemm_rows(peak, quick):
    say("\nmatrix products, float32, 1 thread: ms (gradc, OpenBLAS via numpy, PyTorch), ratio = the faster peer / "
          "gradc (above 1: gradc faster); gradc GFLOP/s and % of the FMA peak")
    say("  %-34s %10s %10s %10s %9s" % ("", "gradc", "OpenBLAS", "PyTorch", "ratio"))
    shapes = [(256, 256, 256), (512, 512, 512)] + ([] if quick else [(1024, 1024, 1024)])
    cases = []
    for m, n, k in shapes:
        cases.append(("dense x·wᵀ %dx%dx%d" % (m, n, k), "dense", m, n, k))
    # The MLP's products: forward x·w1ᵀ, weight gradient dyᵀ·x, and dy·w.
    cases += [("MLP dense 64x256x784 (x·w1ᵀ)", "dense", 64, 256, 784),
              ("MLP dW1 256x784x64 (dyᵀ·x)", "tn", 256, 784, 64),
              ("dy·w 64x784x256", "nn", 64, 784, 256),
              ("matmul a·b 512x512x512", "nn", 512, 512, 512),
              ("batch 16 dense 16x256x784", "dense", 16, 256, 784)]
    for name, layout, m, n, k in cases:
        if layout == "dense":
            text = """def @main(%%x: Tensor[(%d, %d), float32], %%w: Tensor[(%d, %d), float32]) {
                        nn.dense(%%x, %%w)
                      }""" % (m, k, n, k)
            np_expr = "x @ w.T"
            arrays = "x = np.random.rand(%d, %d).astype(np.float32); w = np.random.rand(%d, %d).astype(np.float32)" % (
                m, k, n, k)
        elif layout == "tn":
            text = """def @main(%%dy: Tensor[(%d, %d), float32], %%x: Tensor[(%d, %d), float32]) {
                        matmul(transpose(%%dy), %%x)
                      }""" % (k, m, k, n)
            np_expr = "dy.T @ x"
            arrays = "dy = np.random.rand(%d, %d).astype(np.float32); x = np.random.rand(%d, %d).astype(np.float32)" % (
                k, m, k, n)
        else:
            text = """def @main(%%a: Tensor[(%d, %d), float32], %%b: Tensor[(%d, %d), float32]) {
                        matmul(%%a, %%b)
                      }""" % (m, k, k, n)
            np_expr = "a @ b"
            arrays = "a = np.random.rand(%d, %d).astype(np.float32); b = np.random.rand(%d, %d).astype(np.float32)" % (
                m, k, k, n)
        model = Model("gemm_%s_%d_%d_%d" % (layout, m, n, k), text)
        ours = model.time()
        blas = python_peer("OpenBLAS " + name, arrays, np_expr)
        # The same product in PyTorch, on the same arrays (torch.from_numpy shares them).
        torch = python_peer("PyTorch " + name, arrays + "\n" + "; ".join(
            "%s = torch.from_numpy(%s)" % (v, v) for v in re.findall(r"(\w+) = np", arrays)), np_expr, torch=True)
        gflops = 2 * m * n * k / ours / 1e6
        say("  %-34s %10.3f %10.3f %10.3f %8.2fx  %6.1f GFLOP/s, %3.0f%% of peak" % (
            name, ours, blas, torch, min(blas, torch) / ours, gflops, 100 * gflops / peak), flush=True)
        TABLE.append((name + ", 1T", "%.3f ms (%.0f GFLOP/s, %.0f%% of peak)" % (ours, gflops, 100 * gflops / peak),
                      "OpenBLAS %.3f ms, PyTorch %.3f ms" % (blas, torch), "%.2f×" % (min(blas, torch) / ours)))


def elementwise_rows(quick):
    n = 1 << (22 if quick else 24)
    say("\nfused elementwise chain over %d float32 (2 inputs, 1 output), 1 thread: ms; ratio = memcpy of the "
          "same bytes / gradc (1 = memory bound)" % n)
    model = Model("chain", """def @main(%%x: Tensor[(%d,), float32], %%y: Tensor[(%d,), float32]) {
                                add(multiply(%%x, 2f), maximum(%%y, 0f))
                              }""" % (n, n))
    ours = model.time()
    exe = os.path.join(WORK, "memcpy_bench")
    sh(["cc", "-O2", os.path.join(ROOT, "bench", "memcpy_bench.c"), "-o", exe])
    theirs = measure("memcpy", [exe, POLICY, str(3 * 4 * n)], 1)  # 3 arrays' bytes moved once each
    row("x*2 + max(y, 0), 2^%d elements, 1T" % (n.bit_length() - 1), ours, theirs,
        "%5.1f GB/s moved" % (3 * 4 * n / ours / 1e6),
        peer="memcpy of the same bytes", notes=(" (%.1f GB/s)" % (3 * 4 * n / ours / 1e6), ""))


def softmax_rows(quick):
    rows, cols = (1024, 1024) if quick else (4096, 1024)
    say("\nrow-wise %s over (%d, %d) float32, 1 thread: ms; ratio = PyTorch / gradc" % ("softmax", rows, cols))
    for op, torch_fn in (("nn.softmax", "torch.softmax"), ("nn.log_softmax", "torch.log_softmax")):
        model = Model(op.replace(".", "_"), "def @main(%%x: Tensor[(%d, %d), float32]) { %s(%%x) }" % (rows, cols, op))
        ours = model.time()
        theirs = python_peer("PyTorch " + op, "x = torch.rand(%d, %d)" % (rows, cols), torch_fn + "(x, dim=-1)",
                             torch=True)
        row(op + " rows (%d, %d), 1T" % (rows, cols), ours, theirs, "")


def mlp_rows(quick):
    say("\nMLP 784-256-10 training step (forward, loss, weight gradients), float32: ms; ratio = PyTorch at its "
          "best thread count / gradc at its best")
    say("  %-34s %10s %10s %9s" % ("", "gradc", "PyTorch", "ratio"))
    sample = open(os.path.join(ROOT, "samples", "mlp.relay")).read().split("\n", 1)[1]
    for batch in (16, 64, 256):
        text = sample.replace("(64, 784)", "(%d, 784)" % batch).replace("(64,)", "(%d,)" % batch)
        model = Model("mlp%d" % batch, text, ["--grad", "--wrt=%w1,%b1,%w2,%b2"])
        scales = {"w1": 0.05, "b1": 0.01, "w2": 0.05, "b2": 0.01}  # bench/torch_mlp.py's inputs
        ours = {t: model.time("main_adjoint", t, scales=scales) for t in sorted({1, CORES})}
        theirs = {t: measure("PyTorch MLP batch %d %dT" % (batch, t), [
            "/usr/bin/python3", os.path.join(ROOT, "bench", "torch_mlp.py"), str(t), str(batch), POLICY], t)
            for t in sorted({1, CORES})}
        detail = "gradc " + ", ".join("%dT %.3f" % kv for kv in ours.items()) + "; PyTorch " + ", ".join(
            "%dT %.3f" % kv for kv in theirs.items())
        row("MLP step, batch %d" % batch, min(ours.values()), min(theirs.values()), detail,
            notes=(threads_note(ours), threads_note(theirs)))


CNN_STEP = """def @main(%x: Tensor[(32, 3, 32, 32), float32], %y: Tensor[(32,), int64],
          %w1: Tensor[(16, 3, 3, 3), float32], %g1: Tensor[(16,), float32], %b1: Tensor[(16,), float32],
          %w2: Tensor[(32, 16, 3, 3), float32], %g2: Tensor[(32,), float32], %b2: Tensor[(32,), float32],
          %w3: Tensor[(64, 32, 3, 3), float32], %w4: Tensor[(10, 64), float32], %b4: Tensor[(10,), float32]) {
  %0 = nn.conv2d(%x, %w1, padding=[1, 1]);
  %1 = nn.relu(nn.batch_norm(%0, %g1, %b1, mean(%0, axis=[0, 2, 3]), variance(%0, axis=[0, 2, 3])).0);
  %2 = nn.conv2d(%1, %w2, padding=[1, 1]);
  %3 = nn.relu(nn.batch_norm(%2, %g2, %b2, mean(%2, axis=[0, 2, 3]), variance(%2, axis=[0, 2, 3])).0);
  %4 = nn.max_pool2d(%3, pool_size=[2, 2], strides=[2, 2]);
  %5 = nn.relu(nn.conv2d(%4, %w3, strides=[2, 2], padding=[1, 1]));
  %6 = nn.batch_flatten(nn.global_avg_pool2d(%5));
  nn.nll_loss(nn.log_softmax(nn.bias_add(nn.dense(%6, %w4), %b4)), %y)
}"""


def cnn_rows(peak):
    say("\nCNN, float32: ms; ratio = PyTorch / gradc (above 1: gradc faster)")
    say("  %-34s %10s %10s %9s" % ("", "gradc", "PyTorch", "ratio"))
    model = Model("conv3x3", """def @main(%x: Tensor[(8, 64, 56, 56), float32], %w: Tensor[(64, 64, 3, 3), float32]) {
                                  nn.conv2d(%x, %w, padding=[1, 1])
                                }""")
    ours = model.time(scales={"w": 0.05})
    theirs = measure("PyTorch conv3x3 1T", ["/usr/bin/python3", os.path.join(ROOT, "bench", "torch_cnn.py"), "1", "conv",
                                            POLICY], 1)
    gflops = 2 * 8 * 64 * 56 * 56 * 64 * 9 / ours / 1e6
    row("conv2d 3x3 64->64 56x56 b8, 1T", ours, theirs, "%6.1f GFLOP/s, %3.0f%% of peak" % (gflops, 100 * gflops / peak),
        notes=(" (%.0f%% of peak)" % (100 * gflops / peak), ""))
    model = Model("dw3x3", """def @main(%x: Tensor[(8, 128, 56, 56), float32], %w: Tensor[(128, 1, 3, 3), float32]) {
                                nn.conv2d(%x, %w, padding=[1, 1], groups=128)
                              }""")
    ours = model.time(scales={"w": 0.05})
    theirs = python_peer("PyTorch depthwise", "x = torch.rand(8, 128, 56, 56); w = torch.rand(128, 1, 3, 3) * 0.05",
                         "torch.nn.functional.conv2d(x, w, padding=1, groups=128)", torch=True)
    row("depthwise 3x3 128ch 56x56 b8, 1T", ours, theirs, "")
    wrt = "--wrt=%w1,%g1,%b1,%w2,%g2,%b2,%w3,%w4,%b4"
    model = Model("cnn_step", CNN_STEP, ["--grad", wrt])
    scales = {"w1": 0.2, "w2": 0.1, "w3": 0.05, "w4": 0.1, "g1": 1, "g2": 1, "b1": 0, "b2": 0, "b4": 0}
    step_row("CNN training step b32 3x32x32", model, scales, "torch_cnn.py")


# resnet18's convolutions at batch 2, 3x224x224 (O, C, side of the input, kernel, stride), each
# once however often the model has it: the zoo's step spends about three quarters of its time here.
RESNET18_CONVS = [(64, 3, 224, 7, 2), (64, 64, 56, 3, 1), (128, 64, 56, 3, 2), (128, 64, 56, 1, 2),
                  (128, 128, 28, 3, 1), (256, 128, 28, 3, 2), (256, 128, 28, 1, 2), (256, 256, 14, 3, 1),
                  (512, 256, 14, 3, 2), (512, 256, 14, 1, 2), (512, 512, 7, 3, 1)]


# resnet50's (torchvision's, stride on the 3 x 3) distinct convolutions at batch 2, 3x224x224, with how
# often the model has each: (O, C, side of the input, kernel, stride, count).
RESNET50_CONVS = [(64, 3, 224, 7, 2, 1),
                  (64, 64, 56, 1, 1, 1), (64, 256, 56, 1, 1, 2), (64, 64, 56, 3, 1, 3), (256, 64, 56, 1, 1, 4),
                  (128, 256, 56, 1, 1, 1), (128, 128, 56, 3, 2, 1), (512, 256, 56, 1, 2, 1),
                  (512, 128, 28, 1, 1, 4), (128, 512, 28, 1, 1, 3), (128, 128, 28, 3, 1, 3),
                  (256, 512, 28, 1, 1, 1), (256, 256, 28, 3, 2, 1), (1024, 512, 28, 1, 2, 1),
                  (1024, 256, 14, 1, 1, 6), (256, 1024, 14, 1, 1, 5), (256, 256, 14, 3, 1, 5),
                  (512, 1024, 14, 1, 1, 1), (512, 512, 14, 3, 2, 1), (2048, 1024, 14, 1, 2, 1),
                  (2048, 512, 7, 1, 1, 3), (512, 2048, 7, 1, 1, 2), (512, 512, 7, 3, 1, 2)]


def conv_rows(peak, n=2, convs=None, model_name="resnet18"):
    """A model's convolutions one by one (resnet18's unless `convs` names others, as (O, C, side,
    kernel, stride[, count])), single-threaded: the forward product, the data gradient
    (nn.conv2d_transpose) and the weight gradient (nn.conv2d_backward_weight) against PyTorch's
    (aten::convolution_backward with one output asked for, oneDNN), each with its GFLOP/s as a
    share of the FMA peak measured in this run. The stem's data gradient is left out: a model never
    asks for its input's. With counts, a last row sums each side's time over the model's
    convolutions, each as often as the model has it, and says which rows weigh most."""
    say("\n%s's convolutions, batch %d, float32, 1 thread: ms; ratio = PyTorch / gradc" % (model_name, n))
    say("  %-34s %10s %10s %9s" % ("", "gradc", "PyTorch", "ratio"))
    total = [0.0, 0.0, 0.0]  # gradc ms, PyTorch ms, GFLOP, each weighted by the count
    weighed = []
    for conv in (convs or RESNET18_CONVS):
        o, c, side, k, s = conv[:5]
        count = conv[5] if len(conv) > 5 else 1
        p = k // 2
        out = (side + 2 * p - k) // s + 1
        flop = 2.0 * n * o * c * k * k * out * out
        name = "%dx%d %d->%d %dpx s%d" % (k, k, c, o, side, s)
        attrs = "strides=[%d, %d], padding=[%d, %d]" % (s, s, p, p)
        x, w, dy = "Tensor[(%d, %d, %d, %d), float32]" % (n, c, side, side), \
            "Tensor[(%d, %d, %d, %d), float32]" % (o, c, k, k), "Tensor[(%d, %d, %d, %d), float32]" % (n, o, out, out)
        pad = side - ((out - 1) * s - 2 * p + k)
        tag = "conv_%d_%d_%d_%d_%d_b%d" % (o, c, side, k, s, n)
        texts = {
            "forward": "def @main(%%x: %s, %%w: %s) { nn.conv2d(%%x, %%w, %s) }" % (x, w, attrs),
            "data grad": "def @main(%%dy: %s, %%w: %s) { nn.conv2d_transpose(%%dy, %%w, %s, output_padding=[%d, %d]) }"
                         % (dy, w, attrs, pad, pad),
            "weight grad": "def @main(%%dy: %s, %%x: %s) { nn.conv2d_backward_weight(%%dy, %%x, %s, kernel_size=[%d, %d]) }"
                           % (dy, x, attrs, k, k),
        }
        setup = ("x = torch.rand(%d, %d, %d, %d); w = torch.rand(%d, %d, %d, %d) * 0.05; dy = torch.rand(%d, %d, %d, %d)"
                 % (n, c, side, side, o, c, k, k, n, o, out, out))
        call = "torch.ops.aten.convolution_backward(dy, x, w, None, [%d, %d], [%d, %d], [1, 1], False, [0, 0], 1, %s)"
        peers = {"forward": "torch.nn.functional.conv2d(x, w, stride=%d, padding=%d)" % (s, p),
                 "data grad": call % (s, s, p, p, "[True, False, False]"),
                 "weight grad": call % (s, s, p, p, "[False, True, False]")}
        for what, text in texts.items():
            if what == "data grad" and c == 3:
                continue
            model = Model("%s_%s" % (tag, what.split()[0]), text)
            ours = model.time(scales={"w": 0.05})
            theirs = python_peer("PyTorch %s %s" % (name, what), setup, peers[what], torch=True)
            gflops = flop / ours / 1e6
            row("%s %s" % (name, what), ours, theirs, "%6.1f GFLOP/s, %3.0f%% of peak%s" % (
                gflops, 100 * gflops / peak, " x%d" % count if count > 1 else ""),
                notes=(" (%.0f%% of peak)" % (100 * gflops / peak), ""))
            total[0] += count * ours
            total[1] += count * theirs
            total[2] += count * flop / 1e9
            weighed.append((count * (ours - flop / peak / 1e6), "%s %s" % (name, what)))
    if convs:
        gflops = total[2] / total[0] * 1e3
        row("all, as often as %s has each" % model_name, total[0], total[1],
            "%6.1f GFLOP/s, %3.0f%% of peak" % (gflops, 100 * gflops / peak))
        say("  most ms short of the peak: " + ", ".join("%s %.1f" % (w, t) for t, w in sorted(weighed)[::-1][:6]))


def step_row(name, model, scales, peer):
    """A training step's row: gradc's @main_adjoint and the PyTorch script bench/PEER (`PEER
    THREADS step POLICY`), each at 1 thread and at every core, the best of each compared; returns
    gradc's times by thread count."""
    ours = {t: model.time("main_adjoint", t, scales=scales) for t in sorted({1, CORES})}
    theirs = {t: measure("PyTorch %s %dT" % (peer, t), [
        "/usr/bin/python3", os.path.join(ROOT, "bench", peer), str(t), "step", POLICY], t)
        for t in sorted({1, CORES})}
    detail = "gradc " + ", ".join("%dT %.3f" % kv for kv in ours.items()) + "; PyTorch " + ", ".join(
        "%dT %.3f" % kv for kv in theirs.items())
    row(name, min(ours.values()), min(theirs.values()), detail, notes=(threads_note(ours), threads_note(theirs)))
    return ours


def gpt_rows():
    """The GPT-style training step of bench/gpt_step.relay (its header says the model) against
    bench/torch_gpt.py: token ids and targets are zeros (the harness fills integer inputs so), the
    causal mask zeros as well (the products and the softmax cost the same either way)."""
    say("\nGPT-style training step, float32: ms; ratio = PyTorch / gradc (above 1: gradc faster)")
    say("  %-34s %10s %10s %9s" % ("", "gradc", "PyTorch", "ratio"))
    with open(os.path.join(ROOT, "bench", "gpt_step.relay")) as f:
        text = f.read().split("\n", 1)[1]
    wrt = "--wrt=%E,%P,%ln1_g,%ln1_b,%Wqkv,%bqkv,%Wo,%bo,%ln2_g,%ln2_b,%W1,%b1,%W2,%b2"
    model = Model("gpt_step", text, ["--grad", wrt])
    scales = {"mask": 0, "E": 0.02, "P": 0.02, "Wqkv": 0.02, "Wo": 0.02, "W1": 0.02, "W2": 0.02, "bqkv": 0, "bo": 0,
              "b1": 0, "b2": 0, "ln1_b": 0, "ln2_b": 0}
    step_row("GPT step b8 T64 C128 4 heads", model, scales, "torch_gpt.py")


def lstm_rows():
    """The LSTM layer's training step of bench/lstm_step.relay against nn.LSTM (bench/torch_lstm.py);
    then the same step with time checkpointing, against gradc without it: keeping every 8th state
    (checkpoint_every=8, about sqrt(64)) and binomial checkpointing holding 8 and 4 states
    (checkpoint_slots): the time it costs, the forward steps it recomputes (the plan's trip counts,
    from the manifest) and the workspace it saves."""
    say("\nLSTM layer training step (input and hidden 256, 64 steps, batch 32), float32: ms; ratio = "
          "PyTorch / gradc (above 1: gradc faster)")
    say("  %-34s %10s %10s %9s" % ("", "gradc", "PyTorch", "ratio"))
    with open(os.path.join(ROOT, "bench", "lstm_step.relay")) as f:
        text = f.read().split("\n", 1)[1]
    wrt = ["--grad", "--wrt=%W_ih,%W_hh,%b"]
    model = Model("lstm_step", text, wrt)
    scales = {"W_ih": 0.0625, "W_hh": 0.0625, "b": 0}
    plain = step_row("LSTM step T64 b32 256", model, scales, "torch_lstm.py")  # what the variants compare with
    variants = [("states kept every 8", "lstm_step_ck8", "checkpoint_every=8"),
                ("binomial, 8 states held", "lstm_step_rv8", "checkpoint_slots=8"),
                ("binomial, 4 states held", "lstm_step_rv4", "checkpoint_slots=4")]
    mib = ["%.1f MiB keeping every state" % (model.functions["main_adjoint"]["workspace_bytes"] / 2 ** 20)]
    for name, base, attr in variants:
        checkpointed = Model(base, text.replace("(%h0, %c0), %xw);", "(%%h0, %%c0), %%xw, %s);" % attr), wrt)
        ck = {t: checkpointed.time("main_adjoint", t, scales=scales) for t in sorted({1, CORES})}
        loops = checkpointed.functions["main_adjoint"]["time_loops"]
        # The body's runs in the backward pass: segments recompute their 64 steps once; a binomial plan
        # advances as its trip counts say, then runs the body once more per reverse step for the
        # product it saves.
        streamed = [l for l in loops if "trips" in l]
        advance = min(streamed, key=lambda l: l["end_kernel"] - l["first_kernel"]) if streamed else None
        recomputed = sum(advance["trips"]) + 63 if advance else 64
        say("  %-34s %10.3f %10s %8.2fx  time with / without: %s; the body runs %d more times" % (
            "  " + name, min(ck.values()), "", min(ck.values()) / min(plain.values()),
            ", ".join("%dT %.3f / %.3f" % (t, ck[t], plain[t]) for t in ck), recomputed))
        TABLE.append(("LSTM step, " + name, "%.3f ms%s" % (min(ck.values()), threads_note(ck)),
                      "gradc without it %.3f ms" % min(plain.values()),
                      "%.2f× the time" % (min(ck.values()) / min(plain.values()))))
        mib.append("%.1f MiB %s" % (checkpointed.functions["main_adjoint"]["workspace_bytes"] / 2 ** 20, name))
    say("  workspace of @main_adjoint: %s (the states: 2 x 65 x 32 x 256 floats = 4.1 MiB)" % ", ".join(mib))


def print_markdown(model, isa, peak):
    """The table of every row measured, headed by the host, the date and the
    command that made it (the README's CPU table)."""
    try:
        commit = sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], cwd=ROOT)
    except (subprocess.CalledProcessError, OSError):
        commit = "unknown"
    setup = []
    if CPU or PEER_ISA:
        setup.append("gradc compiled with `--cpu=%s`, peers pinned to %s" % (CPU or "(host)", PEER_ISA or "their default"))
    if REPEAT > 1:
        setup.append("every figure the best of %d processes" % REPEAT)
    print("Host: %s, %d cores, %s, measured float32 FMA peak %.1f GFLOP/s per core. Date: %s (gradc %s). "
          "Command: `bash bench/run.sh %s`%s." % (model, CORES, isa, peak, datetime.date.today().isoformat(), commit,
                                                   " ".join(sys.argv[1:]), "".join("; " + x for x in setup)))
    print()
    print("| benchmark (float32) | gradc | peer | peer / gradc |")
    print("|---|---|---|---|")
    for cells in TABLE:
        print("| " + " | ".join(cells) + " |")
    print()
    print("Above 1×, gradc is faster. 1T, 2T: threads. Each figure is timed in a process of its own, warmed up, "
          "the best of %d passes of about %d ms (bench/timing.h); training steps compare each side at its best "
          "thread count." % (PASSES, PASS_MS))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller shapes, fewer rows")
    parser.add_argument("--only", default="gemm,elementwise,softmax,mlp,cnn,gpt,lstm", help="comma list of row groups (convs and convs50, resnet18's and resnet50's convolutions one by one, "
                        "only when named)")
    parser.add_argument("--conv-batch", type=int, default=2, help="the batch of the convs rows (the zoo's resnet18: 2)")
    parser.add_argument("--cpu", help="compile gradc's code for this CPU (gradc --cpu) instead of the host")
    parser.add_argument("--peer-isa", choices=["avx2", "avx512"], help="pin OpenBLAS and PyTorch to this ISA")
    parser.add_argument("--repeat", type=int, default=1, help="time every figure in this many processes, keep the best")
    parser.add_argument("--markdown", action="store_true",
                        help="at the end, print one markdown table headed by the host and the date (the commentary "
                             "goes to stderr)")
    args = parser.parse_args()
    global CPU, PEER_ISA, REPEAT, MARKDOWN
    CPU, PEER_ISA, REPEAT, MARKDOWN = args.cpu, args.peer_isa, max(1, args.repeat), args.markdown
    os.makedirs(WORK, exist_ok=True)
    model, isa = host()
    peak = fma_peak()
    say("host: %s, %d cores, %s; measured float32 FMA peak %.1f GFLOP/s per core; load average %s at the start" % (
        model, CORES, isa, peak, open("/proc/loadavg").read().split()[0]))
    say(textwrap.fill(
        "how: every figure below is timed in a process of its own, one process at a time (nothing else of this "
        "benchmark runs beside it): gradc through its C ABI (bench/harness.c), OpenBLAS through numpy and PyTorch "
        "eager each in a fresh Python, memcpy in C. Thread counts are fixed before the first operation: "
        "OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS in the process's environment, "
        "torch.set_num_threads and set_num_interop_threads before any PyTorch operation, gradc's set_num_threads "
        "before its first call. Warm-up: passes until at least %d ms and 3 passes have run and a pass is no longer "
        "2%% faster than the best before it (at most %d ms); then the best of %d passes of about %d ms, in ms per "
        "call." % (MIN_WARM_MS, MAX_WARM_MS, PASSES, PASS_MS), 118, subsequent_indent="  "))
    if CPU or PEER_ISA:
        say("gradc compiled with --cpu=%s; peers pinned to %s" % (CPU or "(host)", PEER_ISA or "(their default)"))
    if REPEAT > 1:
        say("every figure: the best of %d such processes, run one after the other" % REPEAT)
    only = args.only.split(",")
    if "gemm" in only:
        gemm_rows(peak, args.quick)
    if "elementwise" in only:
        elementwise_rows(args.quick)
    if "softmax" in only:
        softmax_rows(args.quick)
    if "mlp" in only:
        mlp_rows(args.quick)
    if "cnn" in only:
        cnn_rows(peak)
    if "convs" in only:
        conv_rows(peak, args.conv_batch)
    if "convs50" in only:
        conv_rows(peak, args.conv_batch, RESNET50_CONVS, "resnet50")
    if "gpt" in only:
        gpt_rows()
    if "lstm" in only:
        lstm_rows()
    if MARKDOWN:
        print_markdown(model, isa, peak)


if __name__ == "__main__":
    sys.exit(main())
