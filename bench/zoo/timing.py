"""bench/zoo/timing.py - the zoo's training steps, gradc against PyTorch, on this host's CPU.

For each model of bench/zoo/models.py (default: the 16 of the zoo report, in
training mode, float32, at their usual sizes): export it from PyTorch to ONNX
(opset 15, no constant folding), `gradc import`, `gradc compile --grad` with
--wrt the model's parameters (what PyTorch's backward computes: not the input,
not batch norm's running statistics), timed and its peak RSS measured; then
the step - the loss and every parameter's gradient, `m_main_adjoint` through
the object's C ABI on the model's own weights - timed in a process of its own
per thread count, and PyTorch's step (`zero_grad(); loss = model(x, y);
loss.backward()`) the same way, in a fresh Python per thread count with
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (for the peer only). Every timed
process follows bench/timing.h's policy (warm-up until settled, then the best
of several passes). With --remat, the step is compiled again with
`--remat=auto --memory-budget=` half its peak and timed at gradc's best
thread count.

One row per model: step ms of each side at its best thread count (and the
count), ratio = PyTorch / gradc (> 1: gradc faster), GFLOP per step (the
manifest's count), gradc's GFLOP/s as a share of the FMA peak of the cores it
used (bench/fma_peak.c, measured in the same run), compile seconds and peak
RSS, workspace, and the remat figures. The geometric mean of the ratios ends
the table; --markdown prints it as the README's table, headed by the host.

With --repeat N each side's step is timed in N processes per thread count,
gradc's and PyTorch's by turns, and the best of each kept: on a VM whose
neighbours take its cores for seconds at a time, one process can be slowed
from start to end (resnet50's two-thread step 424 ms in one run, 288-307 ms
in the minutes around it).

usage: timing.py --gradc build/gradc --out DIR [--models a,b] [--batch N] [--res N]
                 [--threads 1,2] [--remat] [--markdown] [--quick] [--repeat N]
"""
import argparse
import datetime
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

# The timing policy of every timed process (bench/timing.h): MIN_WARM_MS,
# MAX_WARM_MS, PASS_MS, PASSES. A step takes 10 ms to seconds: at least 3
# warm-up calls and a second, then the best of 5 passes.
POLICY = "1000,30000,10,5"
# The models of the zoo report (vit_small and vit_b_16 counted as one there).
REPORT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "densenet121",
                 "squeezenet1_1", "shufflenet_v2_x1_0", "regnet_y_400mf", "vgg11_bn", "convnext_tiny", "googlenet",
                 "vit_b_16", "swin_t", "vit_small", "transformer_encoder", "gpt2"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"), help="the gradc binary")
    p.add_argument("--out", required=True, help="work directory: OUT/MODEL/ per model")
    p.add_argument("--models", help="comma-separated (default: the zoo report's models)")
    p.add_argument("--batch", type=int, help="samples per step (default: the model's, 2; gpt2 1)")
    p.add_argument("--res", type=int, help="image side of the torchvision classifiers (default 224)")
    p.add_argument("--quick", action="store_true", help="the zoo's quick sizes (64 px, small transformers)")
    p.add_argument("--threads", default=None, help="thread counts to try, e.g. 1,2 (default: 1 and every core)")
    p.add_argument("--remat", action="store_true", help="also compile and time --remat=auto at half the peak")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown, headed by the host")
    p.add_argument("--timeout", type=int, default=1800, help="seconds for each gradc step and timed process")
    p.add_argument("--repeat", type=int, default=1,
                   help="timed processes per side and thread count, by turns; the best of each (a VM whose\n"
                        "neighbours take its cores for seconds at a time slows a whole process)")
    p.add_argument("--prepare", help=argparse.SUPPRESS)  # worker: export, import, compile one model
    p.add_argument("--torch-step", help=argparse.SUPPRESS)  # worker: time PyTorch's step of one model
    p.add_argument("--torch-threads", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.gradc = os.path.abspath(args.gradc)
    args.out = os.path.abspath(args.out)
    args.repeat = max(1, args.repeat)
    if args.prepare:
        return prepare(args)
    if args.torch_step:
        return torch_step(args)
    import models
    names = args.models.split(",") if args.models else REPORT_MODELS
    unknown = [n for n in names if not models.known(n)]
    if unknown:
        p.error("unknown model %s" % ", ".join(unknown))
    cores = os.cpu_count() or 1
    threads = sorted({int(t) for t in args.threads.split(",")}) if args.threads else sorted({1, cores})
    os.makedirs(args.out, exist_ok=True)
    peak = fma_peak(args.out)
    say("host: %s; FMA peak %.1f GFLOP/s per core (float32, measured)" % (host(), peak))
    rows = []
    for name in names:
        r = run_model(name, args, threads, peak)
        rows.append(r)
        say(format_row(r))
    print_table(rows, args, peak, threads)
    return 1 if any(r.get("error") for r in rows) else 0


def say(text):
    print(text, file=sys.stderr, flush=True)


def host():
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 "unknown CPU")
    flags = open("/proc/cpuinfo").read()
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return "%s, %d cores, %s" % (model, os.cpu_count() or 1, isa)


def peer_env(threads):
    """A timed process's environment: its thread counts fixed before it
    starts; OpenBLAS left to tune itself for this host (the variables some
    hosts set to pin it are unset, for the peer only)."""
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


def timed(cmd, env=None, timeout=None):
    """Runs one timed process (it prints "MS SETTLED"); its milliseconds, or
    None and the reason."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    fields = done.stdout.split()
    if done.returncode != 0 or len(fields) < 2:
        return None, (done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1]
    return float(fields[-2]), ""


def fma_peak(work):
    exe = os.path.join(work, "fma_peak")
    subprocess.run(["cc", "-O2", "-march=native", "-ffp-contract=fast", os.path.join(ROOT, "bench", "fma_peak.c"),
                    "-o", exe], check=True)
    return max(float(subprocess.run([exe, POLICY], capture_output=True, text=True, check=True).stdout.split()[0])
               for _ in range(2))


def run_model(name, args, threads, peak):
    """Prepares one model in a worker process, then times both sides."""
    d = os.path.join(args.out, name)
    r = run_prepare(os.path.abspath(__file__), name, args, ["--remat"] if args.remat else [])
    if r.get("error"):
        return r
    r["gradc_ms"], r["torch_ms"] = {}, {}
    for t in threads:
        for _ in range(args.repeat):  # the two sides by turns, the best process of each
            ms, why = timed([os.path.join(d, "run_timed"), os.path.join(d, "in"), POLICY, str(t)], peer_env(t),
                            args.timeout)
            if ms is None:
                r["error"] = "gradc step, %d threads: %s" % (t, why)
                return r
            r["gradc_ms"][t] = min(ms, r["gradc_ms"].get(t, ms))
            ms, why = timed([sys.executable, os.path.abspath(__file__), "--torch-step", name, "--torch-threads",
                             str(t), "--out", args.out] + sizes(args), peer_env(t), args.timeout)
            if ms is None:
                r["error"] = "PyTorch step, %d threads: %s" % (t, why)
                return r
            r["torch_ms"][t] = min(ms, r["torch_ms"].get(t, ms))
    best = min(r["gradc_ms"], key=r["gradc_ms"].get)
    r["gradc_threads"], r["torch_threads"] = best, min(r["torch_ms"], key=r["torch_ms"].get)
    r["ratio"] = r["torch_ms"][r["torch_threads"]] / r["gradc_ms"][best]
    r["peak_share"] = r["flops"] / (r["gradc_ms"][best] * 1e-3) / 1e9 / (peak * best)
    if r.get("remat_dir"):
        ms, why = timed([os.path.join(r["remat_dir"], "run_timed"), os.path.join(d, "in"), POLICY, str(best)],
                        peer_env(best), args.timeout)
        r["remat_ms"] = ms
        if ms is None:
            r["remat_note"] = why
    return r


def run_prepare(script, name, args, extra=()):
    """Runs SCRIPT --prepare NAME in a worker process: {"model": NAME} and the
    JSON line it prints last, or an "error"."""
    r = {"model": name}
    cmd = [sys.executable, script, "--prepare", name, "--gradc", args.gradc, "--out", args.out,
           "--timeout", str(args.timeout)] + sizes(args) + list(extra)
    done = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        r["error"] = "prepare: " + ((done.stderr.strip().splitlines() or ["exit %d" % done.returncode])[-1])
        return r
    r.update(json.loads(lines[-1]))
    return r


def sizes(args):
    return (["--batch", str(args.batch)] if args.batch else []) + (["--res", str(args.res)] if args.res else []) + \
        (["--quick"] if args.quick else [])


def build_case(args, name):
    import models
    case = models.build(name, args.quick, args.res, args.batch)
    note = models.set_mode(case, "train")
    return case, note


def torch_step(args):
    """Times PyTorch's training step of one model in this process: prints "MS SETTLED"."""
    import torch
    torch.set_num_threads(args.torch_threads)
    torch.set_num_interop_threads(args.torch_threads)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import peer_timing
    case, _ = build_case(args, args.torch_step)
    model, x, y = case.model.float(), case.x.float() if case.x.is_floating_point() else case.x, case.y

    def step():
        model.zero_grad(set_to_none=True)
        model(x, y).backward()

    peer_timing.report(step, POLICY)
    return 0


# gradc runs as the grandchild of a small Python that forks it and reports its
# peak RSS: Linux carries the high-water RSS across fork and exec, so a
# direct child of this process (torch and the model loaded, up to 2.6 GB)
# would report this process's pages as the compiler's.
MEASURE = r"""
import os, sys
out = os.open(os.devnull, os.O_WRONLY)
pid = os.fork()
if pid == 0:
    os.dup2(out, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss * 1024)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_measured(args, argv):
    """Runs gradc (through MEASURE): (exit status, stderr, wall seconds, its
    peak RSS in bytes)."""
    start = time.monotonic()
    err_path = os.path.join(args.out, ".gradc_stderr")
    with open(err_path, "w") as err:
        proc = subprocess.Popen([sys.executable, "-S", "-c", MEASURE, args.gradc] + argv, stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return 124, "timed out after %d s" % args.timeout, time.monotonic() - start, 0
    rss = int(out.strip().splitlines()[-1]) if out.strip() else 0
    return proc.returncode, open(err_path).read(), time.monotonic() - start, rss


def prepare(args):
    """Worker: export, import and compile one model, link its timed main and
    write its inputs; prints one JSON line (compile figures, flops, workspace)."""
    import numpy as np
    import object_run
    import zoo
    name = args.prepare
    d = os.path.join(args.out, name)
    os.makedirs(d, exist_ok=True)
    case, note = build_case(args, name)
    r = {"config": case.config, "note": note}
    imported = export_and_import(args, case, d)
    if imported.get("error"):
        return emit(dict(r, error=imported["error"]))
    r["import_s"] = imported["import_s"]
    x, base, onnx_of, wrt, dropouts = (imported[k] for k in ("x", "base", "onnx_of", "wrt", "dropouts"))
    compile_args = [base + ".relay", "--grad", "--wrt=" + ",".join("%" + n for n in wrt)]
    status, err, r["compile_s"], r["compile_rss"] = run_measured(args, ["compile", *compile_args, "-o",
                                                                         os.path.join(d, "m")])
    if status != 0:
        return emit(dict(r, error="gradc compile: " + zoo.error_line(err)))
    fn = next(f for f in json.load(open(os.path.join(d, "m.json")))["functions"] if f["name"] == "main_adjoint")
    r.update(flops=fn["flops"], workspace=fn["workspace_bytes"], peak_bytes=fn["peak_bytes"], wrt=len(wrt))
    given = {"x": x.numpy(), "y": case.y.numpy()}
    inputs = {}
    for t in fn["parameters"]:
        onnx_name = onnx_of.get(t["name"], t["name"])
        value = given.get(onnx_name)
        if value is None:
            value = zoo.load_weight(base, t["name"])
        if value is None and dropouts and t["dtype"] == "int64" and t["shape"] == []:
            value = np.array(zoo.DROPOUT_SEED, np.int64)
        if value is None or value.dtype != t["dtype"] or list(value.shape) != t["shape"]:
            return emit(dict(r, error="parameter %s: no value of dtype %s and shape %s" % (
                t["name"], t["dtype"], t["shape"])))
        inputs[t["c_field"]] = value
    object_run.write_inputs(os.path.join(d, "in"), fn, inputs)
    link_timed(d, fn)
    if args.remat:
        rd = os.path.join(d, "remat")
        os.makedirs(rd, exist_ok=True)
        budget = fn["peak_bytes"] // 2
        status, err, r["remat_compile_s"], _ = run_measured(args, ["compile", *compile_args, "--remat=auto",
                                                                   "--memory-budget=%d" % budget, "-o",
                                                                   os.path.join(rd, "m")])
        if status != 0:
            least = re.search(r"smallest workspace gradc can plan is (\d+) bytes", err)
            r["remat_note"] = "%s refused%s" % (mib(budget), "; least %s" % mib(int(least.group(1))) if least else
                                                 ": " + zoo.error_line(err))
        else:
            rfn = next(f for f in json.load(open(os.path.join(rd, "m.json")))["functions"]
                       if f["name"] == "main_adjoint")
            link_timed(rd, rfn)
            r.update(remat_dir=rd, remat_workspace=rfn["workspace_bytes"], remat_budget=budget)
    return emit(r)


def export_and_import(args, case, d, import_flags=()):
    """Exports CASE's model (float32, training mode) to D/model.onnx and imports it as D/model.relay:
    a dict of the input x, the base path, the gradc <- ONNX names, the gradc names of the
    parameters PyTorch trains (wrt), whether dropout draws in training, import seconds; or error."""
    import torch
    import zoo
    model = case.model.float()
    x = case.x.float() if case.x.is_floating_point() else case.x
    onnx_path = os.path.join(d, "model.onnx")
    # Stochastic depth cannot be exported in training mode (PyTorch 1.13): models.set_mode turns
    # it off, and the rest is exported as it is (batch norm training, dropout on).
    everything_training = all(m.training for m in model.modules())
    torch.onnx.export(model, (x, case.y), onnx_path, opset_version=15, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.TRAINING if everything_training
                      else torch.onnx.TrainingMode.PRESERVE, input_names=["x", "y"], output_names=["loss"])
    base = os.path.join(d, "model")
    status, err, seconds, _ = run_measured(args, ["import", onnx_path, "-o", base, *import_flags])
    if status != 0:
        return {"error": "gradc import: " + zoo.error_line(err)}
    text = open(base + ".relay").read()
    onnx_of = dict(re.findall(r'^//   %(\S+) <- "(.*)"$', text, re.M))  # gradc name <- ONNX name
    trained = {n for names, _ in zoo.parameters(model) for n in names}
    params = re.search(r"def @main\((.*?)\)\s*(->|\{)", text, re.S).group(1)
    wrt = [n for n in re.findall(r"%([A-Za-z0-9_.]+)\s*:", params) if onnx_of.get(n, n) in trained]
    return {"x": x, "base": base, "onnx_of": onnx_of, "wrt": wrt, "import_s": seconds,
            "dropouts": zoo.training_dropouts(onnx_path)}


def link_timed(d, fn):
    import object_run
    object_run.write_main(fn, "m", os.path.join(d, "main_timed.c"), timed=True)
    done = object_run.link(d, main="main_timed", exe="run_timed")
    if done.returncode != 0:
        raise RuntimeError("cc: " + done.stderr)


def emit(r):
    print(json.dumps(r), flush=True)
    return 0


def mib(n):
    return "%.0f MiB" % (n / 2**20) if n >= 2**20 else "%.0f KiB" % (n / 2**10)


HEADER = ("model", "gradc ms", "PyTorch ms", "ratio", "GFLOP", "% peak", "compile s", "compile RSS", "workspace",
          "remat")


def cells(r):
    if r.get("error"):
        return [r["model"], "-", "-", "-", "-", "-", "%.1f" % r["compile_s"] if r.get("compile_s") else "-", "-", "-",
                r["error"][:120]]
    remat = "-"
    if r.get("remat_ms"):
        remat = "%s, %.1f ms (%.2f×)" % (mib(r["remat_workspace"]), r["remat_ms"],
                                         r["gradc_ms"][r["gradc_threads"]] / r["remat_ms"])
    elif r.get("remat_note"):
        remat = r["remat_note"][:80]
    return [r["model"], "%.1f (%dT)" % (r["gradc_ms"][r["gradc_threads"]], r["gradc_threads"]),
            "%.1f (%dT)" % (r["torch_ms"][r["torch_threads"]], r["torch_threads"]), "%.2f×" % r["ratio"],
            "%.2f" % (r["flops"] / 1e9), "%.0f%%" % (100 * r["peak_share"]), "%.1f" % r["compile_s"],
            mib(r["compile_rss"]), mib(r["workspace"]), remat]


def format_row(r):
    return "  ".join(str(c) for c in cells(r))


def print_table(rows, args, peak, threads):
    ratios = [r["ratio"] for r in rows if r.get("ratio")]
    geomean = math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else float("nan")
    head = "Host: %s, measured float32 FMA peak %.1f GFLOP/s per core. Date: %s. Threads tried: %s. Command: " \
           "`%s`." % (host(), peak, datetime.date.today().isoformat(), ",".join(map(str, threads)),
                      " ".join(["bench/zoo/timing.py"] + sys.argv[1:]))
    if args.markdown:
        print(head + "\n")
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "---|" * len(HEADER))
        for r in rows:
            print("| " + " | ".join(cells(r)) + " |")
        print("\nGeometric mean of the ratios: %.2f× over %d models." % (geomean, len(ratios)))
        return
    print(head)
    table = [list(HEADER)] + [cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER) - 1)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
    print("geometric mean of the ratios: %.2fx over %d models" % (geomean, len(ratios)))


if __name__ == "__main__":
    sys.exit(main())
