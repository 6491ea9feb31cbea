"""scan (SPEC §7) against PyTorch: the loss and every gradient of models built on scan, through
`gradc run --grad` and through the compiled object linked with object_harness.c (outputs and
workspace filled with 0xFF bytes first). The models: the samples rnn.relay and lstm.relay (the
LSTM against torch.nn.LSTM itself), a tanh RNN with its weight captured by the body, and the
three examples of the TE scan tutorial (a cumulative sum, a two-stage update, two states).
Float64 models must match to 1e-9 relative, float32 ones to 1e-4 relative of PyTorch in float64.
Extra flags for gradc (--remat=..., say) follow `--`; with --compare-bits DIR, every output is
also compared bit for bit with the same case's outputs saved in DIR by an earlier run (written
there when DIR is empty).

Usage: torch_scan_check.py GRADC SAMPLES WORKDIR [--compare-bits DIR] [-- GRADC FLAGS]"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
args = sys.argv[1:]
flags = args[args.index("--") + 1:] if "--" in args else []
args = args[:args.index("--")] if "--" in args else args
bits_dir = None
if "--compare-bits" in args:
    i = args.index("--compare-bits")
    bits_dir = args[i + 1]
    del args[i:i + 2]
gradc, samples, work = args[:3]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(17)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def through_run(name, model, inputs, wrt):
    out = os.path.join(work, name, "run")
    cmd = [gradc, "run", model, "--grad", "--wrt=" + ",".join("%" + k for k in wrt), "--output-dir", out, *flags]
    for k, v in inputs.items():
        path = os.path.join(work, name, k + ".npy")
        np.save(path, v)
        cmd.append("--input=%s=%s" % (k, path))
    run(cmd)
    return [np.load(os.path.join(out, "output_%d.npy" % i)) for i in range(len(wrt) + 1)]


def through_object(name, model, inputs, wrt):
    d = os.path.join(work, name)
    base = os.path.join(d, "m")
    run([gradc, "compile", model, "--grad", "--wrt=" + ",".join("%" + k for k in wrt), "-o", base, *flags])
    manifest = json.load(open(base + ".json"))
    fn = next(f for f in manifest["functions"] if f["name"] == "main_adjoint")
    exe = os.path.join(d, "run_object")
    run(["cc", "-O1", "-std=c11", "-DENTRY=" + fn["symbol"], os.path.join(HERE, "object_harness.c"), base + ".o",
         "-lm", "-o", exe])
    cmd = [exe, str(fn["workspace_bytes"])]
    for p in fn["parameters"]:
        path = os.path.join(d, p["name"] + ".raw")
        value = np.ascontiguousarray(inputs[p["name"]], dtype=p["dtype"])
        value.tofile(path)
        cmd.append("in:%d:%s" % (p["bytes"], path))
    outs = []
    for r in fn["results"]:
        path = os.path.join(d, r["name"] + ".raw")
        outs.append((path, r))
        cmd.append("out:%d:%s" % (r["bytes"], path))
    run(cmd)
    return [np.fromfile(path, dtype=r["dtype"]).reshape(r["shape"]) for path, r in outs]


def check(name, text, inputs, wrt, reference):
    """Writes the model, runs it both ways and compares with reference(tensors) -> loss."""
    os.makedirs(os.path.join(work, name), exist_ok=True)
    model = os.path.join(work, name, name + ".relay")
    with open(model, "w") as f:
        f.write(text)
    t = {k: torch.tensor(v, dtype=torch.float64 if v.dtype.kind == "f" else None, requires_grad=k in wrt)
         for k, v in inputs.items()}
    loss = reference(t)
    loss.backward()
    want = [loss.detach().numpy()] + [t[k].grad.numpy() for k in wrt]
    float64 = all(inputs[k].dtype == np.float64 for k in wrt)
    tol = 1e-9 if float64 else 1e-4
    for how, got in (("run", through_run(name, model, inputs, wrt)), ("object", through_object(name, model, inputs, wrt))):
        for i, (g, w) in enumerate(zip(got, want)):
            what = "loss" if i == 0 else "d" + wrt[i - 1]
            assert g.shape == w.shape, (name, how, what, g.shape, w.shape)
            err = np.abs(g - w).max() / max(np.abs(w).max(), 1e-30)
            assert err < tol, (name, how, what, err)
        if bits_dir is not None:
            for i, g in enumerate(got):
                path = os.path.join(bits_dir, "%s_%s_%d.npy" % (name, how, i))
                if os.path.exists(path):
                    assert np.load(path).tobytes() == g.tobytes(), (name, how, i, "differs bitwise")
                else:
                    np.save(path, g)
    print("%s: the loss and %d gradients match PyTorch through run and the linked object" % (name, len(wrt)))


def sample(name, dtype, checkpoint):
    """The sample in `dtype`, its scan time-checkpointed by `checkpoint` (checkpoint_every=k or
    checkpoint_slots=c: --remat=manual recomputes the states it does not keep, --remat=none
    ignores it)."""
    text = open(os.path.join(samples, name + ".relay")).read()
    text = text.replace("%x);", "%%x, %s);" % checkpoint)
    assert checkpoint in text
    return text.replace("float32", dtype).replace("float64 -> float64", "float64")


def normal(shape, scale=1.0, dtype=np.float64):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# samples/rnn.relay: h[t] = tanh(Wx x[t] + Wh h[t-1] + b); every state predicts the next token.
def rnn_reference(t):
    x = t["E"][t["tokens"]]
    hs = [t["h0"]]
    for s in range(1, 12):
        hs.append(torch.tanh(x[s] @ t["Wx"].T + hs[-1] @ t["Wh"].T + t["b"]))
    logits = torch.stack(hs).reshape(48, 32) @ t["Wo"].T + t["bo"]
    return torch.nn.functional.nll_loss(torch.log_softmax(logits, -1), t["targets"])


# Segments of 5 states in float64 and float32; binomial checkpointing with 3 states held (float64).
for name, dtype, checkpoint in (("float64", "float64", "checkpoint_every=5"), ("float32", "float32", "checkpoint_every=5"),
                                ("binomial", "float64", "checkpoint_slots=3")):
    npt = np.dtype(dtype)
    inputs = {"tokens": rng.integers(0, 16, (12, 4)).astype(np.int64),
              "targets": rng.integers(0, 16, 48).astype(np.int64), "h0": normal((4, 32), 0.5, npt),
              "E": normal((16, 16), 0.5, npt), "Wx": normal((32, 16), 0.3, npt), "Wh": normal((32, 32), 0.2, npt),
              "b": normal((32,), 0.1, npt), "Wo": normal((16, 32), 0.3, npt), "bo": normal((16,), 0.1, npt)}
    check("rnn_" + name, sample("rnn", dtype, checkpoint), inputs, ["h0", "E", "Wx", "Wh", "b", "Wo", "bo"],
          rnn_reference)


# samples/lstm.relay against torch.nn.LSTM run over steps 1..15 from (h0, c0).
def lstm_reference(t):
    # nn.LSTM's own kernel (torch.nn.LSTM.forward calls it), with these tensors as its weights
    zero = torch.zeros(128, dtype=t["b"].dtype)
    out, _, _ = torch._VF.lstm(t["x"][1:], (t["h0"][None], t["c0"][None]), [t["W_ih"], t["W_hh"], t["b"], zero],
                               True, 1, 0.0, False, False, False)
    scores = out[-1] @ t["Wc"].T + t["bc"]
    return torch.nn.functional.nll_loss(torch.log_softmax(scores, -1), t["labels"])


for name, dtype, checkpoint in (("float64", "float64", "checkpoint_every=4"), ("float32", "float32", "checkpoint_every=4"),
                                ("binomial", "float32", "checkpoint_slots=4")):
    npt = np.dtype(dtype)
    inputs = {"x": normal((16, 8, 4), 1.0, npt), "labels": rng.integers(0, 4, 8).astype(np.int64),
              "h0": normal((8, 32), 0.3, npt), "c0": normal((8, 32), 0.3, npt), "W_ih": normal((128, 4), 0.3, npt),
              "W_hh": normal((128, 32), 0.2, npt), "b": normal((128,), 0.1, npt), "Wc": normal((4, 32), 0.3, npt),
              "bc": normal((4,), 0.1, npt)}
    check("lstm_" + name, sample("lstm", dtype, checkpoint), inputs, ["x", "h0", "c0", "W_ih", "W_hh", "b", "Wc", "bc"],
          lstm_reference)

HEADER = '#[version = "0.0.5"]\n'

# h[t] = tanh(W h[t-1] + x[t]) with W captured by the body; the loss reads every state.
def rnn_captured(t):
    hs = [t["h0"]]
    for s in range(1, 20):
        hs.append(torch.tanh(hs[-1] @ t["W"].T + t["x"][s]))
    return torch.sin(torch.stack(hs)).sum()


check("rnn_captured", HEADER + """def @main(%h0: Tensor[(3, 8), float64], %x: Tensor[(20, 3, 8), float64], %W: Tensor[(8, 8), float64]) {
  %hs = scan(fn (%h: Tensor[(3, 8), float64], %xt: Tensor[(3, 8), float64]) { tanh(nn.dense(%h, %W) + %xt) }, %h0, %x, checkpoint_every=6);
  sum(sin(%hs))
}
""", {"h0": normal((3, 8)), "x": normal((20, 3, 8)), "W": normal((8, 8), 0.4)}, ["h0", "x", "W"], rnn_captured)

# The TE tutorial's scans, as text. 1: the cumulative sum s[t] = s[t-1] + X[t], s[0] = X[0].
check("te_cumsum", HEADER + """def @main(%X: Tensor[(10, 6), float64]) {
  %init = squeeze(strided_slice(%X, begin=[0], end=[1], axes=[0]), axis=[0]);
  %s = scan(fn (%s: Tensor[(6,), float64], %xt: Tensor[(6,), float64]) { %s + %xt }, %init, %X);
  sum(%s * %s)
}
""", {"X": normal((10, 6))}, ["X"], lambda t: (torch.cumsum(t["X"], 0) ** 2).sum())


# 2: a two-stage update: s1 = s[t-1] * 2, s[t] = s1 + X[t].
def te_two_stage(t):
    s = [torch.zeros(6, dtype=torch.float64)]
    for i in range(1, 10):
        s.append(s[-1] * 2 + t["X"][i])
    return torch.cos(torch.stack(s)).sum()


check("te_two_stage", HEADER + """def @main(%X: Tensor[(10, 6), float64], %zero: Tensor[(6,), float64]) {
  %s = scan(fn (%s, %xt) {
    %s1 = %s * 2f64;
    %s1 + %xt
  }, %zero, %X);
  sum(cos(%s))
}
""", {"X": normal((10, 6)), "zero": np.zeros(6)}, ["X"], te_two_stage)


# 3: two states: s1[t] = s1[t-1] + X[t], s2[t] = s2[t-1] + s1[t-1][0].
def te_two_states(t):
    s1, s2 = [t["a"]], [t["b"]]
    for i in range(1, 8):
        s1, s2 = s1 + [s1[-1] + t["X"][i]], s2 + [s2[-1] + s1[-1][0]]
    return (torch.sin(torch.stack(s1)).sum() + (torch.stack(s2) ** 2).sum())


check("te_two_states", HEADER + """def @main(%X: Tensor[(8, 5), float64], %a: Tensor[(5,), float64], %b: Tensor[(4,), float64]) {
  %s = scan(fn (%s: (Tensor[(5,), float64], Tensor[(4,), float64]), %xt: Tensor[(5,), float64]) {
    (%s.0 + %xt, %s.1 + strided_slice(%s.0, begin=[0], end=[1]))
  }, (%a, %b), %X, checkpoint_every=3);
  sum(sin(%s.0)) + sum(%s.1 * %s.1)
}
""", {"X": normal((8, 5)), "a": normal((5,)), "b": normal((4,))}, ["X", "a", "b"], te_two_states)


# The second order: the gradient of a function of scan's gradients (through the dumped
# @main_adjoint, whose grad.scan_backward differentiates as a forward scan over reversed time),
# against PyTorch's double backward.
def second_order():
    name = "rnn_second_order"
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    model = os.path.join(d, "first.relay")
    with open(model, "w") as f:
        f.write(HEADER + """def @main(%h0: Tensor[(2, 4), float64], %x: Tensor[(6, 2, 4), float64], %W: Tensor[(4, 4), float64]) {
  %hs = scan(fn (%h, %xt) { tanh(nn.dense(%h, %W) + %xt) }, %h0, %x);
  sum(sin(%hs))
}
""")
    run([gradc, "compile", model, "--grad", "--emit=obj", "-o", os.path.join(d, "first"), "--dump-ir=grad",
         "--dump-dir=" + os.path.join(d, "dumps"), *flags])
    second = os.path.join(d, "second.relay")
    with open(os.path.join(d, "dumps", "03-grad.relay")) as f, open(second, "w") as g:
        g.write(f.read() + """def @second(%h0: Tensor[(2, 4), float64], %x: Tensor[(6, 2, 4), float64], %W: Tensor[(4, 4), float64]) {
  %r = @main_adjoint(%h0, %x, %W);
  %g = %r.1;
  sum(%g.2 * %g.2) + sum(%g.0) + sum(cos(%g.1))
}
""")
    inputs = {"h0": normal((2, 4)), "x": normal((6, 2, 4)), "W": normal((4, 4), 0.5)}
    out = os.path.join(d, "out")
    cmd = [gradc, "run", second, "--grad", "second", "--output-dir", out, *flags]
    for k, v in inputs.items():
        np.save(os.path.join(d, k + ".npy"), v)
        cmd.append("--input=%s=%s" % (k, os.path.join(d, k + ".npy")))
    run(cmd)
    t = {k: torch.tensor(v, requires_grad=True) for k, v in inputs.items()}
    hs = [t["h0"]]
    for s in range(1, 6):
        hs.append(torch.tanh(hs[-1] @ t["W"].T + t["x"][s]))
    first = torch.sin(torch.stack(hs)).sum()
    gh0, gx, gW = torch.autograd.grad(first, [t["h0"], t["x"], t["W"]], create_graph=True)
    value = (gW * gW).sum() + gh0.sum() + torch.cos(gx).sum()
    value.backward()
    want = [value.detach().numpy(), t["h0"].grad.numpy(), t["x"].grad.numpy(), t["W"].grad.numpy()]
    for i, w in enumerate(want):
        got = np.load(os.path.join(out, "output_%d.npy" % i))
        err = np.abs(got - w).max() / max(np.abs(w).max(), 1e-30)
        assert err < 1e-9, (name, i, err)
    print("%s: the gradient of a function of scan's gradients matches PyTorch's double backward" % name)


second_order()
