"""bench/zoo/zoo.py - real models through gradc, checked against PyTorch autograd.

Each model of bench/zoo/models.py (torchvision CNNs, ViT, Swin,
nn.TransformerEncoder, a GPT-2-style decoder) is exported from PyTorch to ONNX
in float64 (opset 15, no constant folding), imported with `gradc import`,
compiled with `gradc compile --grad`, and its gradient function called once
through the object's C ABI (bench/zoo/object_run.py). The loss and the
gradient of every PyTorch parameter (and of a floating-point input x) are
compared with PyTorch autograd in float64, per tensor ||gradc - torch|| /
||torch||. One line per model and mode:

  model  mode  status  tensors compared/expected  worst error  loss error  import s  compile s  notes

status: PASS, FAIL (a wrong value, or gradc or the object failed),
IMPORT-REFUSED (gradc import stopped at a located error, quoted), EXPORT-FAILED
(PyTorch could not export the model). The exit status is 1 when any line is FAIL.

Training-mode dropout: gradc draws each mask from its own generator, keyed by
a seed parameter, so PyTorch's masks differ. The masks gradc draws for the
seed given to the object are read back through `gradc run` (dropout_masks)
and PyTorch applies the same ones (same_dropout).

usage: zoo.py --gradc build/gradc --out DIR [--models a,b] [--mode auto|train|trainbn|eval]
              [--quick] [--res N] [-j N]
"""
import argparse
import concurrent.futures
import contextlib
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402
import object_run  # noqa: E402

# A train-mode line with one of these statuses makes --mode auto try trainbn.
FALLBACK = ("EXPORT-FAILED", "IMPORT-REFUSED")
# The seed of gradc's dropout masks (the parameter gradc import adds for training-mode Dropout).
DROPOUT_SEED = 20261127


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--gradc", required=True, help="the gradc binary")
    p.add_argument("--out", required=True, help="work directory: OUT/MODEL.MODE/ per model and mode")
    p.add_argument("--models", help="comma-separated (default: every model, or the quick subset with --quick)")
    p.add_argument("--mode", default="auto", choices=["auto", "train", "trainbn", "eval"],
                   help="auto (default): train, and trainbn where train cannot be exported or imported\n"
                        "train: training mode (batch norm on batch statistics, dropout on)\n"
                        "trainbn: training mode with dropout and stochastic depth off\n"
                        "eval: model.eval()")
    p.add_argument("--quick", action="store_true", help="small sizes: images 64x64, 2-layer transformers")
    p.add_argument("--res", type=int, help="image side for the torchvision classifiers (default 224, quick 32)")
    p.add_argument("-j", "--jobs", type=int, default=1, help="models run at once (default 1)")
    p.add_argument("--threads", type=int, help="threads of PyTorch and of the object (default: CPUs / jobs)")
    p.add_argument("--tol", type=float, default=1e-8, help="largest relative error per tensor (default 1e-8)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds for each gradc step and the call")
    p.add_argument("--list", action="store_true", help="print the models and exit")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # runs one model; prints one JSON line per mode
    args = p.parse_args()
    args.gradc = os.path.abspath(args.gradc)
    args.out = os.path.abspath(args.out)
    args.threads = args.threads or max(1, (os.cpu_count() or 1) // args.jobs)
    if args.worker:
        return worker(args)

    if args.list:
        print("\n".join(models.MODELS))
        print("# extra (only with --models):\n" + "\n".join(models.EXTRA_MODELS))
        print("# and any torchvision classifier (--models), at the extras' image side:\n" +
              "\n".join(n for n in models.torchvision_classifiers() if n not in models.MODELS + models.EXTRA_MODELS))
        return 0
    names = args.models.split(",") if args.models else (models.QUICK_MODELS if args.quick else models.MODELS)
    unknown = [n for n in names if not models.known(n)]
    if unknown:
        p.error("unknown model %s (known: --list)" % ", ".join(unknown))
    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {n: pool.submit(spawn, n, args) for n in names}
        for f in concurrent.futures.as_completed(futures.values()):
            for r in f.result():
                print("[%5.0f s] %s" % (time.monotonic() - start, format_row(r)), file=sys.stderr, flush=True)
    rows = [r for n in names for r in futures[n].result()]
    print(HEADER)
    for r in rows:
        print(format_row(r))
    final = [[r for r in rows if r["model"] == n][-1]["status"] for n in names]
    print("%d models in %.0f s: %s" % (len(names), time.monotonic() - start, ", ".join(
        "%d %s" % (final.count(s), s) for s in sorted(set(final)))))
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


HEADER = "%-20s %-8s %-15s %9s %9s %9s %8s %8s  %s" % (
    "model", "mode", "status", "tensors", "worst", "loss", "import", "compile", "notes")


def format_row(r):
    def seconds(key):
        return "%.1f s" % r[key] if r.get(key) is not None else "-"

    def error(key):
        return "%.1e" % r[key] if r.get(key) is not None else "-"

    tensors = "%d/%d" % (r["compared"], r["expected"]) if r.get("expected") is not None else "-"
    notes = "; ".join(x for x in [r["config"]] + r["notes"] + [r["reason"]] if x)
    return "%-20s %-8s %-15s %9s %9s %9s %8s %8s  %s" % (
        r["model"], r["mode"], r["status"], tensors, error("worst"), error("loss_error"),
        seconds("import_s"), seconds("compile_s"), notes)


def spawn(name, args):
    """Runs one model in a process of its own (memory, crashes and PyTorch's
    threads stay there); its result lines."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", name, "--gradc", args.gradc, "--out", args.out,
           "--mode", args.mode, "--threads", str(args.threads), "--tol", repr(args.tol),
           "--timeout", str(args.timeout)] + (["--quick"] if args.quick else []) + \
        (["--res", str(args.res)] if args.res else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not rows:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        rows.append(row(name, "", args.mode, "FAIL", reason="the worker exited %d: %s" % (done.returncode, tail)))
    return rows


def row(model, config, mode, status, reason="", **fields):
    r = {"model": model, "config": config, "mode": mode, "status": status, "reason": reason, "notes": []}
    r.update(fields)
    return r


def worker(args):
    torch.set_num_threads(args.threads)
    modes = ["train", "trainbn"] if args.mode == "auto" else [args.mode]
    for i, mode in enumerate(modes):
        case = models.build(args.worker, args.quick, args.res)  # afresh: an export or a step changes state
        r = run_mode(case, mode, args)
        if i > 0:
            r["notes"].append("fallback from train")
        print(json.dumps(r), flush=True)
        if r["status"] not in FALLBACK:
            break
    return 0


def run_mode(case, mode, args):
    """Export, import, compile, call and compare one model in one mode: its result row."""
    d = os.path.join(args.out, "%s.%s" % (case.name, mode))
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    r = row(case.name, case.config, mode, "PASS")
    note = models.set_mode(case, mode)
    if note:
        r["notes"].append(note)

    # PyTorch -> ONNX, in float64.
    model = case.model.double()
    x = case.x.double() if case.x.is_floating_point() else case.x
    everything_training = all(m.training for m in model.modules())
    onnx_path = os.path.join(d, "model.onnx")
    try:
        torch.onnx.export(model, (x, case.y), onnx_path, opset_version=15, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.TRAINING if everything_training
                          else torch.onnx.TrainingMode.PRESERVE,
                          input_names=["x", "y"], output_names=["loss"])
    except Exception as e:  # PyTorch 1.13 cannot export every module in every mode
        return dict(r, status="EXPORT-FAILED", reason=first_line(str(e)) or type(e).__name__)
    dropouts = training_dropouts(onnx_path)

    # gradc import, then compile the imported text (which reads no weights).
    base = os.path.join(d, "model")
    done, r["import_s"] = gradc(args, ["import", onnx_path, "-o", base])
    if done.returncode == 1:
        return dict(r, status="IMPORT-REFUSED", reason=error_line(done.stderr))
    if done.returncode != 0:
        return dict(r, status="FAIL", reason="gradc import exited %d: %s" % (done.returncode, error_line(done.stderr)))
    done, r["compile_s"] = gradc(args, ["compile", base + ".relay", "--grad", "-o", os.path.join(d, "m")])
    if done.returncode != 0:
        return dict(r, status="FAIL", reason="gradc compile exited %d: %s" % (done.returncode, error_line(done.stderr)))

    # The gradient function through the C ABI.
    fn = next(f for f in json.load(open(os.path.join(d, "m.json")))["functions"] if f["name"] == "main_adjoint")
    object_run.write_main(fn, "m", os.path.join(d, "main.c"))
    done = object_run.link(d)
    if done.returncode != 0:
        return dict(r, status="FAIL", reason="cc: " + error_line(done.stderr))
    text = open(base + ".relay").read()
    onnx_of = dict(re.findall(r'^//   %(\S+) <- "(.*)"$', text, re.M))  # gradc name <- ONNX name
    given = {"x": x.numpy(), "y": case.y.numpy()}  # the graph inputs, then the seed, by gradc name
    inputs, value_of = {}, {}  # by c_field; by ONNX name
    for t in fn["parameters"]:
        onnx_name = onnx_of.get(t["name"], t["name"])
        value = given.get(onnx_name)
        if value is None:
            value = load_weight(base, t["name"])
        if value is None and dropouts and t["dtype"] == "int64" and t["shape"] == []:
            value = given[t["name"]] = np.array(DROPOUT_SEED, np.int64)  # neither a graph input nor a weight: the seed
        if value is None or value.dtype != t["dtype"] or list(value.shape) != t["shape"]:
            return dict(r, status="FAIL", reason="parameter %s (ONNX %s): no value of dtype %s and shape %s" % (
                t["name"], onnx_name, t["dtype"], t["shape"]))
        inputs[t["c_field"]] = value_of[onnx_name] = value
    try:
        done, outputs = object_run.call(d, fn, inputs, args.threads, args.timeout)
    except subprocess.TimeoutExpired:
        return dict(r, status="FAIL", reason="the call took over %d s" % args.timeout)
    if outputs is None:
        why = error_line(done.stderr) or "exit %d" % done.returncode
        return dict(r, status="FAIL", reason="the object's call: " + why)
    masks = []
    if dropouts:
        masks, why = dropout_masks(args, d, onnx_path, dropouts, model, x, case.y, given)
        if masks is None:
            return dict(r, status="FAIL", reason="gradc's dropout masks: " + why)
        kept = sum(m.sum() for m in masks) / sum(m.size for m in masks)
        r["notes"].append("%d dropout mask%s from gradc, %.1f%% dropped" % (
            len(masks), "s" * (len(masks) > 1), 100 - 100 * kept))
    grads = [t for t in fn["parameters"] if t["dtype"].startswith("float")]
    if len(outputs) != 1 + len(grads):
        return dict(r, status="FAIL", reason="%d results, expected the loss and %d gradients" % (
            len(outputs), len(grads)))
    gradc_grad = {onnx_of.get(t["name"], t["name"]): g for t, g in zip(grads, outputs[1:])}
    return compare(r, case, model, x, value_of, outputs[0], gradc_grad, masks, args.tol)


def compare(r, case, model, x, value_of, gradc_loss, gradc_grad, masks, tol):
    """Fills R with the comparison of gradc's loss and gradients (by ONNX
    name) against PyTorch autograd in float64, and checks that the weights
    gradc was given (VALUE_OF, by ONNX name) are PyTorch's. PyTorch float32
    tells which gradients are zero in exact arithmetic. PyTorch's dropout
    applies gradc's MASKS."""
    try:
        loss64, ref64 = autograd(model, x, case.y, masks)
        _, ref32 = autograd(copy.deepcopy(model).float(), x.float() if x.is_floating_point() else x, case.y, masks)
    except RuntimeError as e:  # gradc's masks do not fit PyTorch's dropout calls
        return dict(r, status="FAIL", reason=first_line(str(e)))
    r["loss_error"] = abs(float(gradc_loss) - loss64) / max(abs(loss64), 1e-300)
    bad = ["loss %.17g, PyTorch %.17g" % (float(gradc_loss), loss64)] if r["loss_error"] > tol else []
    params = {names: p for names, p in parameters(model)}
    worst, zero, compared = 0.0, 0, 0
    for names, b in ref64.items():
        name = next((n for n in names if n in gradc_grad), None)
        if name is None:
            bad.append("no gradient of %s" % names[0])
            continue
        a, b, b32 = gradc_grad[name], b.numpy(), ref32[names].double().numpy()
        if name != "x" and not np.array_equal(value_of.get(name), params[names].detach().numpy()):
            bad.append("%s: the imported weight is not PyTorch's" % name)
        if a.shape != b.shape:
            bad.append("%s: shape %s, PyTorch %s" % (name, a.shape, b.shape))
            continue
        compared += 1
        norm, diff, diff32 = np.linalg.norm(b), np.linalg.norm(a - b), np.linalg.norm(b32 - b)
        if norm == 0 or diff32 > norm:
            # Zero in exact arithmetic (a bias right before a training-mode
            # batch norm): both are rounding noise; gradc's may not be larger
            # than PyTorch float32's.
            zero += 1
            if diff > diff32:
                bad.append("%s (zero): error %.2g, PyTorch float32's %.2g" % (name, diff, diff32))
        else:
            worst = max(worst, diff / norm)
            if diff / norm > tol:
                bad.append("%s: relative error %.2g" % (name, diff / norm))
    r.update(compared=compared, expected=len(ref64), worst=worst)
    if zero:
        r["notes"].append("%d zero" % zero)
    if bad:
        r.update(status="FAIL", reason="%d wrong: %s%s" % (len(bad), "; ".join(bad[:3]), "; ..." * (len(bad) > 3)))
    return r


def autograd(model, x, y, masks):
    """PyTorch's loss and gradients: {names of a parameter (a tied weight has
    several) or ("x",): gradient}, for every parameter the loss depends on."""
    x = x.detach().clone().requires_grad_() if x.is_floating_point() else x
    model.zero_grad(set_to_none=True)
    with same_dropout(masks):
        loss = model(x, y)
    loss.backward()
    grads = {names: p.grad.detach().clone() for names, p in parameters(model) if p.grad is not None}
    if x.is_floating_point():
        grads[("x",)] = x.grad.detach().clone()
    return float(loss), grads


def parameters(model):
    """[(every name of a parameter, the parameter)]: a tied weight has several names, and the
    exporter may give its initializer any of them."""
    names = {}
    for module_name, m in model.named_modules(remove_duplicate=False):
        for n, p in m._parameters.items():
            if p is not None:
                names.setdefault(id(p), (p, []))[1].append((module_name + "." if module_name else "") + n)
    return [(tuple(ns), p) for p, ns in names.values()]


def training_dropouts(onnx_path):
    """The mask outputs of the model's training-mode Dropout nodes, in graph
    order (the order PyTorch ran them in when it traced the model)."""
    graph = onnx.load(onnx_path, load_external_data=False).graph
    consts = {n.output[0]: numpy_helper.to_array(n.attribute[0].t) for n in graph.node
              if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value"}
    return [n.output[1] for n in graph.node
            if n.op_type == "Dropout" and len(n.input) > 2 and n.input[2] and bool(consts.get(n.input[2], True))
            and len(n.output) > 1 and n.output[1]]


def dropout_masks(args, d, onnx_path, mask_names, model, x, y, given):
    """The masks gradc draws in the object's call: the ONNX model with every
    Dropout's mask output made a graph output (its shape that of PyTorch's
    dropout call), run forward by `gradc run` on the inputs GIVEN to the
    object (x, y and the seed, by gradc name). (masks in graph order, "") or
    (None, why not)."""
    shapes = []
    with torch.no_grad(), dropout_calls(lambda input, p: shapes.append(list(input.shape)) or input):
        model(x, y)
    if len(shapes) != len(mask_names):
        return None, "PyTorch calls dropout %d times, the export has %d Dropout nodes" % (len(shapes), len(mask_names))
    exported = onnx.load(onnx_path)
    exported.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.BOOL, shape)
                                 for name, shape in zip(mask_names, shapes))
    path, in_dir, out_dir = (os.path.join(d, f) for f in ("masks.onnx", "masks.in", "masks.out"))
    onnx.save(exported, path)
    os.makedirs(in_dir)
    for name, value in given.items():
        np.save(os.path.join(in_dir, name + ".npy"), value)
    done, _ = gradc(args, ["run", path, "--inputs-dir", in_dir, "--output-dir", out_dir])
    os.remove(path)  # a second copy of the weights
    if done.returncode != 0:
        return None, "gradc run exited %d: %s" % (done.returncode, error_line(done.stderr))
    masks = [np.load(os.path.join(out_dir, "output_%d.npy" % (i + 1))) for i in range(len(mask_names))]
    shutil.rmtree(out_dir)
    return masks, ""


@contextlib.contextmanager
def dropout_calls(replace):
    """F.dropout in training mode replaced by REPLACE(input, p) (nn.Dropout
    and F.multi_head_attention_forward call it through the module)."""
    original = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        return replace(input, p) if training else original(input, p, training, inplace)

    F.dropout = dropout
    try:
        yield
    finally:
        F.dropout = original


@contextlib.contextmanager
def same_dropout(masks):
    """PyTorch's dropout with gradc's MASKS, one per call in order:
    where(mask, x / (1 - p), 0), with p rounded to float32 as the ONNX ratio
    holds it. Every mask must be used, each by a call of its shape."""
    todo = list(masks)

    def apply(input, p):
        if not todo or list(todo[0].shape) != list(input.shape):
            raise RuntimeError("same_dropout: a dropout of shape %s, gradc's next mask %s" % (
                list(input.shape), list(todo[0].shape) if todo else "none"))
        mask = torch.from_numpy(todo.pop(0))
        return torch.where(mask, input * (1 / (1 - float(np.float32(p)))), torch.zeros((), dtype=input.dtype))

    with dropout_calls(apply):
        yield
    if todo:
        raise RuntimeError("same_dropout: %d of gradc's masks unused" % len(todo))


def load_weight(base, name):
    path = os.path.join(base + ".weights", name + ".npy")
    return np.load(path) if os.path.exists(path) else None


def gradc(args, argv):
    """Runs gradc; (CompletedProcess, wall seconds)."""
    start = time.monotonic()
    try:
        done = subprocess.run([args.gradc] + argv, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        done = subprocess.CompletedProcess(argv, 124, "", "error: timed out after %d s" % args.timeout)
    return done, time.monotonic() - start


def error_line(text):
    """gradc's first error line, from 'error:' on."""
    for line in text.splitlines():
        if "error:" in line:
            return line[line.index("error:"):].strip()
    return first_line(text)


def first_line(text):
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


if __name__ == "__main__":
    sys.exit(main())
