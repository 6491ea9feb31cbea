"""bench/zoo/train_step.py - the fused training step (--train) on zoo models, on this host's CPU.

For each model (default resnet18 and gpt2, training mode, float32, the zoo's
sizes), exported and imported as bench/zoo/timing.py does, three steps of
Adam (lr 1e-3) over the same parameters, each timed in a process of its own
at each thread count (bench/timing.h's policy; the best count is kept):

  fused     `gradc compile --train=adam`: m_main_train_step, one call doing
            the loss, the gradients and the update of every weight and its
            moments in place;
  separate  `gradc compile --grad`: m_main_adjoint, then Adam's update in C
            over every gradient the adjoint wrote (one loop per parameter,
            -O3 -march=native, bias corrections in double as torch.optim);
  PyTorch   zero_grad(); model(x, y).backward(); torch.optim.Adam.step()
            (its default, single-tensor, CPU implementation), in a fresh
            Python with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset.

Prints per model: each side's ms, fused/separate and PyTorch/fused ratios (> 1:
the fused step is faster), the step's workspace, and compile seconds.

usage: train_step.py --gradc build/gradc --out DIR [--models resnet18,gpt2] [--threads 1,2] [--quick]
"""
import argparse
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import timing  # noqa: E402  (the zoo's export, measurement and timing helpers)

LR = 1e-3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    p.add_argument("--out", required=True)
    p.add_argument("--models", default="resnet18,gpt2")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--quick", action="store_true", help="the zoo's quick sizes")
    p.add_argument("--batch", type=int)
    p.add_argument("--res", type=int)
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--prepare", help=argparse.SUPPRESS)
    p.add_argument("--torch-step", help=argparse.SUPPRESS)
    p.add_argument("--torch-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.prepare:
        return prepare(args)
    if args.torch_step:
        return torch_step(args)
    threads = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in args.models.split(","):
        timing.say("== %s" % name)
        rows.append(run_model(name, args, threads))
    print("Host: %s. Adam (lr %g) training step; best of each side's thread counts (%s)." % (
        timing.host(), LR, args.threads))
    print("| model | fused step ms | adjoint + separate update ms | PyTorch ms | separate / fused | "
          "PyTorch / fused | step workspace | compile s (fused, adjoint) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("error"):
            print("| %s | %s | | | | | | |" % (r["model"], r["error"]))
            continue
        best = {k: min(r[k].values()) for k in ("fused", "separate", "torch")}
        arg = {k: min(r[k], key=r[k].get) for k in ("fused", "separate", "torch")}
        print("| %s | %.1f (%dT) | %.1f (%dT) | %.1f (%dT) | %.2f× | %.2f× | %s | %.1f, %.1f |" % (
            r["model"], best["fused"], arg["fused"], best["separate"], arg["separate"], best["torch"], arg["torch"],
            best["separate"] / best["fused"], best["torch"] / best["fused"], timing.mib(r["workspace"]),
            r["fused_compile_s"], r["adjoint_compile_s"]))
    return 0


def run_model(name, args, threads):
    d = os.path.join(args.out, name)
    r = timing.run_prepare(os.path.abspath(__file__), name, args)
    if r.get("error"):
        return r
    for side in ("fused", "separate", "torch"):
        r[side] = {}
        for t in threads:
            if side == "torch":
                argv = [sys.executable, os.path.abspath(__file__), "--torch-step", name, "--torch-threads", str(t),
                        "--out", args.out] + timing.sizes(args)
            else:
                argv = [os.path.join(d, side, "run_timed"), os.path.join(d, side, "in"), timing.POLICY, str(t)]
            ms, why = timing.timed(argv, timing.peer_env(t), args.timeout)
            if ms is None:
                r["error"] = "%s, %d threads: %s" % (side, t, why)
                return r
            r[side][t] = ms
            timing.say("   %-8s %dT %.2f ms" % (side, t, ms))
    return r


def torch_step(args):
    import torch
    torch.set_num_threads(args.torch_threads)
    torch.set_num_interop_threads(args.torch_threads)
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import peer_timing
    case, _ = timing.build_case(args, args.torch_step)
    model, x, y = case.model.float(), case.x.float() if case.x.is_floating_point() else case.x, case.y
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=LR)

    def step():
        opt.zero_grad(set_to_none=True)
        model(x, y).backward()
        opt.step()

    peer_timing.report(step, timing.POLICY)
    return 0


# Adam's update after the adjoint, in C: what a user of --grad writes.
SEPARATE_UPDATE = r"""
static void adam_update(float *restrict p, const float *restrict g, float *restrict m, float *restrict v, size_t n,
                        double lr, long step) {
  double bias1 = 1 - pow(0.9, (double)step), bias2 = 1 - pow(0.999, (double)step);
  float step_size = (float)(lr / bias1), bias2_sqrt = (float)sqrt(bias2);
  for (size_t i = 0; i < n; ++i) {
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    p[i] -= step_size * m[i] / (sqrtf(v[i]) / bias2_sqrt + 1e-8f);
  }
}
"""


def write_separate_main(fn, trained, path):
    """A timed main: the adjoint, then adam_update on each trained parameter
    (fields `trained`, in gradient order, the adjoint's outputs 1...)."""
    sym = fn["symbol"]
    macro = sym.upper() + "_"
    size = lambda field: "%s%s_BYTES" % (macro, field.upper())
    grads = [r for r in fn["results"][1:] if r["role"] == "output"]  # not the running statistics (in place)
    assert len(grads) == len(trained)
    out = ["#define _POSIX_C_SOURCE 199309L", "#include <math.h>", "#include <stdint.h>", '#include "m.h"',
           '#include "runner.h"', '#include "timing.h"', SEPARATE_UPDATE,
           "struct call { struct %s_inputs *in; struct %s_outputs *out; void *workspace; float **m, **v; long step; };"
           % (sym, sym), "", "static void step(void *ctx) {", "  struct call *c = ctx;",
           "  int32_t rc = %s(c->in, c->out, c->workspace);" % sym,
           '  if (rc != 0) { fprintf(stderr, "adjoint: %%s\\n", m_strerror(rc)); exit(1); }', "  ++c->step;"]
    for i, (field, g) in enumerate(zip(trained, grads)):
        out.append("  adam_update((float *)c->in->%s, c->out->%s, c->m[%d], c->v[%d], %s / 4, %g, c->step);" % (
            field, g["c_field"], i, i, size(g["c_field"]), LR))
    out += ["}", "", "int main(int argc, char **argv) {", "  if (argc != 4) return 2;", "  runner_in_dir = argv[1];",
            "  struct bench_policy policy = bench_parse_policy(argv[2]);", "  m_set_num_threads(atoi(argv[3]));",
            "  struct %s_inputs in;" % sym]
    for t in fn["parameters"]:
        out.append('  in.%s = runner_input("%s", %s);' % (t["c_field"], t["c_field"], size(t["c_field"])))
    out.append("  struct %s_outputs out;" % sym)
    for t in fn["results"]:
        if t["role"] != "in_place":
            out.append("  out.%s = runner_garbage(%s);" % (t["c_field"], size(t["c_field"])))
    n = len(trained)
    out += ["  static float *m[%d], *v[%d];" % (n, n)]
    for i, g in enumerate(grads):
        out += ["  m[%d] = runner_garbage(%s); memset(m[%d], 0, %s);" % (i, size(g["c_field"]), i, size(g["c_field"])),
                "  v[%d] = runner_garbage(%s); memset(v[%d], 0, %s);" % (i, size(g["c_field"]), i, size(g["c_field"]))]
    ws = macro + "WORKSPACE_SIZE"
    out += ["  struct call c = {&in, &out, %s ? runner_garbage(%s) : NULL, m, v, 0};" % (ws, ws),
            "  int settled;", "  double ms = bench_best_ms(step, &c, policy, &settled);",
            '  printf("%.5f %d\\n", ms, settled);', "  return 0;", "}", ""]
    with open(path, "w") as f:
        f.write("\n".join(out))


def prepare(args):
    """Worker: export, import, compile the fused step and the adjoint, write
    their inputs and link their timed mains; prints one JSON line."""
    import numpy as np
    import object_run
    import zoo
    name = args.prepare
    d = os.path.join(args.out, name)
    os.makedirs(d, exist_ok=True)
    case, _ = timing.build_case(args, name)
    # --state-in-place: batch norm's running statistics are updated by the step, as PyTorch's are.
    imported = timing.export_and_import(args, case, d, ["--state-in-place"])
    if imported.get("error"):
        return timing.emit({"error": imported["error"]})
    x, base, onnx_of, wrt, dropouts = (imported[k] for k in ("x", "base", "onnx_of", "wrt", "dropouts"))
    r = {}
    given = {"x": x.numpy(), "y": case.y.numpy()}
    for side, flags, fn_name in (("fused", ["--train=adam(lr=%g)" % LR], "main_train_step"),
                                 ("separate", ["--grad"], "main_adjoint")):
        sd = os.path.join(d, side)
        os.makedirs(sd, exist_ok=True)
        status, err, seconds, _ = timing.run_measured(args, ["compile", base + ".relay", *flags, "--wrt=" + ",".join(
            "%" + n for n in wrt), "-o", os.path.join(sd, "m")])
        if status != 0:
            return timing.emit({"error": "gradc compile (%s): %s" % (side, zoo.error_line(err))})
        r[("fused" if side == "fused" else "adjoint") + "_compile_s"] = seconds
        fn = next(f for f in json.load(open(os.path.join(sd, "m.json")))["functions"] if f["name"] == fn_name)
        inputs = {}
        for t in fn["parameters"]:
            value = given.get(onnx_of.get(t["name"], t["name"]))
            if value is None and t.get("training") in ("optimizer_state", "step"):
                value = np.zeros(t["shape"], t["dtype"])
            if value is None and t.get("training") == "learning_rate":
                value = np.array(LR, t["dtype"])
            if value is None:
                value = zoo.load_weight(base, t["name"])
            if value is None and dropouts and t["dtype"] == "int64" and t["shape"] == []:
                value = np.array(zoo.DROPOUT_SEED, np.int64)
            if value is None or value.dtype != t["dtype"] or list(value.shape) != t["shape"]:
                return timing.emit({"error": "parameter %s: no value" % t["name"]})
            inputs[t["c_field"]] = value
        object_run.write_inputs(os.path.join(sd, "in"), fn, inputs)
        if side == "fused":
            object_run.write_main(fn, "m", os.path.join(sd, "main_timed.c"), timed=True)
            r["workspace"] = fn["workspace_bytes"]
            cflags = []
        else:
            fields = [t["c_field"] for t in fn["parameters"] if t["name"] in wrt]
            write_separate_main(fn, fields, os.path.join(sd, "main_timed.c"))
            cflags = ["-O3", "-march=native"]
        done = subprocess.run(["cc", "-O1", *cflags, "-std=c11", "-I", HERE, "-I", os.path.dirname(HERE), "-I", sd,
                               os.path.join(sd, "main_timed.c"), os.path.join(sd, "m.o"), "-lm", "-lpthread", "-o",
                               os.path.join(sd, "run_timed")], capture_output=True, text=True)
        if done.returncode != 0:
            return timing.emit({"error": "cc (%s): %s" % (side, done.stderr.strip().splitlines()[-1])})
    return timing.emit(r)


if __name__ == "__main__":
    sys.exit(main())
