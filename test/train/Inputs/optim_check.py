"""Ten training steps of gradc's `--train` step against torch.optim on the same
model, data and learning-rate schedule: every step's loss, and after the
last the parameters, the optimizer state (momentum buffers, Adam's moments,
amsgrad's maxima) and the step count. float64 must agree to 1e-10 and
float32 to 1e-5, relative to each tensor's largest magnitude.

Usage: optim_check.py GRADC WORKDIR [DTYPE...]; prints one line per case
and `N of N cases equal`."""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_abi import Function, aligned, compile_model  # noqa: E402

gradc, work = sys.argv[1:3]
dtypes = sys.argv[3:] or ["float64", "float32"]
os.makedirs(work, exist_ok=True)
torch.set_num_threads(1)

B, D, H, C, V = 6, 5, 7, 4, 9
STEPS = 10
TOL = {"float64": 1e-10, "float32": 1e-5}

# An MLP on float data with one frozen bias (--wrt names the rest), and an
# embedding model on integer tokens trained with the default --wrt.
MLP = """#[version = "0.0.5"]
def @main(%x: Tensor[({B}, {D}), {T}], %y: Tensor[({B},), int64], %w1: Tensor[({H}, {D}), {T}], %b1: Tensor[({H},), {T}],
          %w2: Tensor[({C}, {H}), {T}], %b2: Tensor[({C},), {T}]) {
  %0 = nn.dense(%x, %w1);
  %1 = nn.bias_add(%0, %b1);
  %2 = tanh(%1);
  %3 = nn.dense(%2, %w2);
  %4 = nn.bias_add(%3, %b2);
  %5 = nn.log_softmax(%4);
  nn.nll_loss(%5, %y)
}
"""
EMBED = """#[version = "0.0.5"]
def @main(%tok: Tensor[({B},), int64], %y: Tensor[({B},), int64], %E: Tensor[({V}, {D}), {T}], %W: Tensor[({C}, {D}), {T}],
          %b: Tensor[({C},), {T}]) {
  %0 = take(%E, %tok, axis=0);
  %1 = nn.dense(%0, %W);
  %2 = nn.bias_add(%1, %b);
  %3 = nn.log_softmax(%2);
  nn.nll_loss(%3, %y)
}
"""


# A CNN: the convolution and dense weights' updates are the epilogues of
# their gradients' products (one strided, one not).
CNN = """#[version = "0.0.5"]
def @main(%x: Tensor[({B}, 3, 12, 12), {T}], %y: Tensor[({B},), int64], %k1: Tensor[(8, 3, 3, 3), {T}],
          %k2: Tensor[(6, 8, 3, 3), {T}], %w: Tensor[({C}, 6), {T}]) {
  %0 = nn.conv2d(%x, %k1, padding=[1, 1, 1, 1]);
  %1 = tanh(%0);
  %2 = nn.conv2d(%1, %k2, strides=[2, 2], padding=[1, 1, 1, 1]);
  %3 = tanh(%2);
  %4 = mean(%3, axis=[2, 3]);
  %5 = nn.dense(%4, %w);
  %6 = nn.log_softmax(%5);
  nn.nll_loss(%6, %y)
}
"""


def text(template, dtype):
    for k, v in {"B": B, "D": D, "H": H, "C": C, "V": V, "T": dtype}.items():
        template = template.replace("{%s}" % k, str(v))
    return template


def mlp_loss(p, data):
    h = torch.tanh(F.linear(data["x"], p["w1"], p["b1"]))
    return F.nll_loss(F.log_softmax(F.linear(h, p["w2"], p["b2"]), -1), data["y"])


def embed_loss(p, data):
    e = p["E"][data["tok"]]
    return F.nll_loss(F.log_softmax(F.linear(e, p["W"], p["b"]), -1), data["y"])


def cnn_loss(p, data):
    h = torch.tanh(F.conv2d(data["x"], p["k1"], padding=1))
    h = torch.tanh(F.conv2d(h, p["k2"], stride=2, padding=1)).mean(dim=(2, 3))
    return F.nll_loss(F.log_softmax(F.linear(h, p["w"]), -1), data["y"])


MODELS = {
    "mlp": (MLP, mlp_loss, ["w1", "b1", "w2"], {"w1": (H, D), "b1": (H,), "w2": (C, H), "b2": (C,)}),
    "embed": (EMBED, embed_loss, None, {"E": (V, D), "W": (C, D), "b": (C,)}),
    "cnn": (CNN, cnn_loss, ["k1", "k2", "w"], {"k1": (8, 3, 3, 3), "k2": (6, 8, 3, 3), "w": (C, 6)}),
}

# (model, --train text, the torch.optim constructor and its keyword arguments)
CASES = [
    ("mlp", "sgd(lr=0.1)", torch.optim.SGD, dict()),
    ("mlp", "sgd(momentum=0.9)", torch.optim.SGD, dict(momentum=0.9)),
    ("mlp", "sgd(momentum=0.8, dampening=0.3, weight_decay=0.01)", torch.optim.SGD,
     dict(momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("mlp", "sgd(momentum=0.9, nesterov=true, weight_decay=0.05)", torch.optim.SGD,
     dict(momentum=0.9, nesterov=True, weight_decay=0.05)),
    ("embed", "sgd(weight_decay=0.1, maximize=true)", torch.optim.SGD, dict(weight_decay=0.1, maximize=True)),
    ("mlp", "adam", torch.optim.Adam, dict()),
    ("mlp", "adam(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)", torch.optim.Adam,
     dict(betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("embed", "adam(amsgrad=true, weight_decay=0.01)", torch.optim.Adam, dict(amsgrad=True, weight_decay=0.01)),
    ("mlp", "adamw(lr=0.01)", torch.optim.AdamW, dict()),
    ("embed", "adamw(weight_decay=0.2, amsgrad=True, betas=(0.5,0.9))", torch.optim.AdamW,
     dict(weight_decay=0.2, amsgrad=True, betas=(0.5, 0.9))),
    ("cnn", "sgd(lr=0.1, momentum=0.9, nesterov=true, weight_decay=0.01)", torch.optim.SGD,
     dict(momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("cnn", "adam(lr=0.01, amsgrad=true)", torch.optim.Adam, dict(amsgrad=True)),
    ("cnn", "adamw(lr=0.01, weight_decay=0.1)", torch.optim.AdamW, dict(weight_decay=0.1)),
]

STATE_KEYS = {"momentum_buffer", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}


def rel(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def batch(rng, model, npd):
    if model == "mlp":
        return {"x": rng.standard_normal((B, D)).astype(npd), "y": rng.integers(0, C, B)}
    if model == "cnn":
        return {"x": rng.standard_normal((B, 3, 12, 12)).astype(npd), "y": rng.integers(0, C, B)}
    return {"tok": rng.integers(0, V, B), "y": rng.integers(0, C, B)}


def run_case(index, model, train, ctor, kwargs, dtype):
    template, loss_fn, wrt, shapes = MODELS[model]
    npd = np.dtype(dtype).type
    tdt = torch.float64 if dtype == "float64" else torch.float32
    src = os.path.join(work, "%s_%s.relay" % (model, dtype))
    with open(src, "w") as f:
        f.write(text(template, dtype))
    base = os.path.join(work, "case%d_%s" % (index, dtype))
    flags = ["--train=" + train] + (["--wrt=" + ",".join("%" + w for w in wrt)] if wrt else [])
    manifest = compile_model(gradc, src, base, *flags)
    step = Function(base, manifest, "main_train_step")

    rng = np.random.default_rng(100 + index)
    init = {k: (rng.standard_normal(s) * 0.5).astype(npd) for k, s in shapes.items()}
    trained = wrt or list(shapes)
    # gradc's buffers: the model's parameters, the optimizer state at zeros, the step, the rate.
    bufs = {k: aligned(v) for k, v in init.items()}
    for p in step.params:
        if p.get("training") in ("optimizer_state", "step"):
            bufs[p["name"]] = aligned(np.zeros(p["shape"], np.int64 if p["dtype"] == "int64" else npd))
    tp = {k: torch.tensor(v, dtype=tdt, requires_grad=k in trained) for k, v in init.items()}
    base_lr = float(dict(step.meta["optimizer"]["hyper_parameters"]).get("lr", 0.05))
    opt = ctor([tp[k] for k in shapes if k in trained], lr=base_lr, **kwargs)

    problems = []
    for t in range(STEPS):
        lr = base_lr * (1 - 0.07 * t)  # a schedule: the rate is a runtime input
        data = batch(rng, model, npd)
        for k, v in data.items():
            bufs[k] = aligned(v)
        bufs["lr"] = aligned(np.array(lr, npd))
        (loss,) = step(bufs)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        ref = loss_fn(tp, {k: torch.tensor(v) if v.dtype == np.int64 else torch.tensor(v, dtype=tdt)
                           for k, v in data.items()})
        ref.backward()
        opt.step()
        if rel(loss, ref.item()) > TOL[dtype]:
            problems.append("step %d: loss %r, torch %r" % (t, float(loss), ref.item()))
    for k in shapes:
        if rel(bufs[k], tp[k].detach().numpy()) > TOL[dtype]:
            problems.append("%s differs by %.3g" % (k, rel(bufs[k], tp[k].detach().numpy())))
    for p in step.params:
        if p.get("training") == "optimizer_state":
            of, key = p["of"], p["name"][len(p["of"]) + 1:]
            ref = opt.state[tp[of]][key].detach().numpy()
            if rel(bufs[p["name"]], ref) > TOL[dtype]:
                problems.append("%s differs by %.3g" % (p["name"], rel(bufs[p["name"]], ref)))
        if p.get("training") == "step" and int(bufs[p["name"]]) != STEPS:
            problems.append("step count %d, expected %d" % (int(bufs[p["name"]]), STEPS))
    print("%s %s %s: %s" % (model, dtype, train, "equal" if not problems else "FAIL " + "; ".join(problems)))
    return not problems


n = ok = 0
for dtype in dtypes:
    for i, case in enumerate(CASES):
        n += 1
        ok += run_case(i, *case, dtype)
print("%d of %d cases equal" % (ok, n))
