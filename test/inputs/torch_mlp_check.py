"""Compares gradc with PyTorch (float64) on an MLP forward and gradient, both
through `gradc run` and through the compiled object loaded with ctypes.
Usage: torch_mlp_check.py GRADC WORKDIR"""
import ctypes
import os
import subprocess
import sys

import numpy as np
import torch

gradc, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
model = os.path.join(work, "mlp64.relay")
with open(model, "w") as f:
    f.write("""#[version = "0.0.5"]
def @main(%x: Tensor[(6, 20), float64], %w1: Tensor[(16, 20), float64], %b1: Tensor[(16,), float64],
          %w2: Tensor[(5, 16), float64], %b2: Tensor[(5,), float64], %y: Tensor[(6,), int64]) {
  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1), %b1));
  %1 = nn.log_softmax(nn.bias_add(nn.dense(%0, %w2), %b2));
  nn.nll_loss(%1, %y)
}
""")
rng = np.random.default_rng(7)
inputs = {
    "x": rng.standard_normal((6, 20)), "w1": rng.standard_normal((16, 20)) * 0.3,
    "b1": rng.standard_normal(16) * 0.1, "w2": rng.standard_normal((5, 16)) * 0.3,
    "b2": rng.standard_normal(5) * 0.1, "y": rng.integers(0, 5, 6).astype(np.int64),
}
for k, v in inputs.items():
    np.save(os.path.join(work, k + ".npy"), v)

# PyTorch reference, wrt %w1,%b2,%x (declared order: x, w1, b2).
t = {k: torch.tensor(v, requires_grad=k != "y") for k, v in inputs.items()}
h = torch.relu(t["x"] @ t["w1"].T + t["b1"])
loss = torch.nn.functional.nll_loss(torch.log_softmax(h @ t["w2"].T + t["b2"], -1), t["y"])
loss.backward()
expected = [loss.detach().numpy(), t["x"].grad.numpy(), t["w1"].grad.numpy(), t["b2"].grad.numpy()]


def check(name, got):
    for i, (g, e) in enumerate(zip(got, expected)):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-10, err_msg=f"{name} output {i}")
    print(f"{name}: {len(got)} outputs match PyTorch")


# 1. gradc run
out = os.path.join(work, "out")
args = [gradc, "run", model, "--grad", "--wrt=%w1,%b2,%x", "--output-dir", out]
args += [f"--input={k}={os.path.join(work, k + '.npy')}" for k in inputs]
subprocess.run(args, check=True, capture_output=True)
check("gradc run", [np.load(os.path.join(out, f"output_{i}.npy")) for i in range(4)])

# 2. the object file, linked into a shared library and called through the C ABI
base = os.path.join(work, "mlp64")
subprocess.run([gradc, "compile", model, "--grad", "--wrt=%w1,%b2,%x", "-o", base], check=True)
subprocess.run(["cc", "-shared", base + ".o", "-lm", "-o", base + ".so"], check=True)
lib = ctypes.CDLL(base + ".so")
order = ["x", "w1", "b1", "w2", "b2", "y"]
arrays = [np.ascontiguousarray(inputs[k]) for k in order]
outs = [np.zeros((), np.float64), np.zeros((6, 20)), np.zeros((16, 20)), np.zeros(5)]
ws_size = {line.split()[1]: int(line.split()[2]) for line in open(base + ".h")
           if line.startswith("#define") and line.split()[1].endswith("_WORKSPACE_SIZE")}["MLP64_MAIN_ADJOINT_WORKSPACE_SIZE"]
ws = np.zeros(ws_size + 64, np.uint8)
ws_ptr = ws.ctypes.data + (-ws.ctypes.data) % 64


def aligned(a):
    buf = np.zeros(a.nbytes + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    view = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return buf, view


keep = [aligned(a) for a in arrays + outs]
in_ptrs = (ctypes.c_void_p * 6)(*[k[1].ctypes.data for k in keep[:6]])
out_ptrs = (ctypes.c_void_p * 4)(*[k[1].ctypes.data for k in keep[6:]])
rc = lib.mlp64_main_adjoint(in_ptrs, out_ptrs, ctypes.c_void_p(ws_ptr))
assert rc == 0, rc
check("linked object", [k[1] for k in keep[6:]])
