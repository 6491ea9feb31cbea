"""A PyTorch transformer block with dropout, exported to ONNX in training mode
(float32, dropout at p = 0: seedless), imported by gradc, compiled with
`--train=adam` (--wrt: the weights that are PyTorch's parameters, not the
attention mask, a buffer), and trained 20 steps by a C program generated from
the manifest, which calls the step once per batch on its own buffers (the
weights, Adam's state at zeros; outputs and workspace garbage) and writes the
weights back at the end; PyTorch's own loop (Adam,
the same data and rate schedule) must follow the same loss trajectory to
1e-5 (relative), and end with the same weights.

Usage: onnx_adam.py GRADC WORKDIR"""
import math
import os
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_abi import compile_model  # noqa: E402

gradc, work = sys.argv[1:3]
os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
torch.set_num_threads(1)
B, T, C, HEADS, CLASSES, STEPS, LR = 4, 8, 32, 4, 5, 20, 2e-3


class Block(nn.Module):
    """Pre-norm attention and MLP with dropout, mean-pooled into a classifier."""

    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc1, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)
        self.head = nn.Linear(C, CLASSES)
        self.drop_attn, self.drop_mlp = nn.Dropout(0.0), nn.Dropout(0.0)
        self.register_buffer("mask", torch.triu(torch.full((T, T), -1e9), 1))

    def forward(self, x, y):
        d = C // HEADS
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (z.reshape(B, T, HEADS, d).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d) + self.mask, dim=-1)
        x = x + self.drop_attn(self.proj((att @ v).transpose(1, 2).reshape(B, T, C)))
        x = x + self.drop_mlp(self.fc2(F.gelu(self.fc1(self.ln2(x)))))
        return F.cross_entropy(self.head(x.mean(1)), y)


model = Block()
with torch.no_grad():  # distinct norm weights: the exporter would merge equal initializers
    for norm in (model.ln1, model.ln2):
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
model.train()
onnx_path = os.path.join(work, "block.onnx")
torch.onnx.export(model, (torch.randn(B, T, C), torch.randint(0, CLASSES, (B,))), onnx_path, opset_version=15,
                  input_names=["x", "y"], output_names=["loss"], do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING)
base = os.path.join(work, "block")
subprocess.run([gradc, "import", onnx_path, "-o", base], check=True)
# The weights `gradc import` wrote, each matched to the torch parameter it
# is; the attention mask (a buffer, also an initializer) is not trained.
weights = {f[:-4]: np.load(os.path.join(base + ".weights", f)) for f in os.listdir(base + ".weights")}
pairs = []
for n, t in model.named_parameters():
    match = [w for w, a in weights.items() if a.shape == tuple(t.shape) and np.array_equal(a, t.detach().numpy())]
    assert len(match) == 1, (n, match)
    pairs.append((match[0], t))
wrt = ",".join("%" + w for w, _ in pairs)
manifest = compile_model(gradc, base + ".relay", base, "--train=adam(lr=%g)" % LR, "--wrt=" + wrt)
fn = [f for f in manifest["functions"] if f["name"] == "main_train_step"][0]
trained = [p["name"] for p in fn["parameters"] if p.get("training") == "parameter"]
assert sorted(trained) == sorted(w for w, _ in pairs), trained
print("trained: %d parameters, %d optimizer state buffers" % (
    len(pairs), sum(p.get("training") == "optimizer_state" for p in fn["parameters"])))

# The data and the rate schedule of every step, and PyTorch's own loop on them.
rng = np.random.default_rng(5)
xs = rng.standard_normal((STEPS, B, T, C)).astype(np.float32)
ys = rng.integers(0, CLASSES, (STEPS, B))
lrs = np.array([LR * (0.5 + 0.5 * math.cos(math.pi * t / STEPS)) for t in range(STEPS)], np.float32)
opt = torch.optim.Adam(model.parameters(), lr=LR)
reference = []
for t in range(STEPS):
    for g in opt.param_groups:
        g["lr"] = float(lrs[t])
    opt.zero_grad()
    loss = model(torch.tensor(xs[t]), torch.tensor(ys[t]))
    loss.backward()
    opt.step()
    reference.append(loss.item())

# The training loop in C: the compiled step called once per batch on the
# caller's buffers (weights and Adam's state at zeros, updated in place),
# the outputs and workspace garbage; the weights written back at the end.
data = os.path.join(work, "data")
os.makedirs(data, exist_ok=True)
for p in fn["parameters"]:
    if p["name"] in weights:
        np.ascontiguousarray(weights[p["name"]]).tofile(os.path.join(data, p["c_field"] + ".bin"))
    elif p.get("training") in ("optimizer_state", "step"):
        np.zeros(p["bytes"], np.uint8).tofile(os.path.join(data, p["c_field"] + ".bin"))
xs.tofile(os.path.join(data, "xs.bin"))
ys.astype(np.int64).tofile(os.path.join(data, "ys.bin"))
lrs.tofile(os.path.join(data, "lrs.bin"))
sym = fn["symbol"]
size = lambda field: "%s_%s_BYTES" % (sym.upper(), field.upper())
c = ["#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", '#include "block.h"', "",
     "static void *buffer(size_t bytes, const char *dir, const char *name) {",
     "  void *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);",
     "  memset(p, 0xA5, bytes); /* garbage unless read from a file */",
     "  if (name) {", "    char path[4096];", '    snprintf(path, sizeof path, "%s/%s.bin", dir, name);',
     '    FILE *f = fopen(path, "rb");',
     "    if (!f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot read %s\\n\", path); exit(1); }",
     "    fclose(f);", "  }", "  return p;", "}", "",
     "int main(int argc, char **argv) {", "  const char *dir = argv[1];", "  int steps = atoi(argv[2]);",
     "  struct %s_inputs in;" % sym]
for p in fn["parameters"]:
    name = "NULL" if p["c_field"] in ("x", "y", "lr") else '"%s"' % p["c_field"]
    c.append("  void *%s_buf = buffer(%s, dir, %s);" % (p["c_field"], size(p["c_field"]), name))
    c.append("  in.%s = %s_buf;" % (p["c_field"], p["c_field"]))
c += ['  char *xs = buffer((size_t)steps * %s, dir, "xs");' % size("x"),
      '  char *ys = buffer((size_t)steps * %s, dir, "ys");' % size("y"),
      '  char *lrs = buffer((size_t)steps * %s, dir, "lrs");' % size("lr"),
      "  struct %s_outputs out = {buffer(%s, dir, NULL)};" % (sym, size("output_0")),
      "  void *workspace = buffer(%s_WORKSPACE_SIZE, dir, NULL);" % sym.upper(),
      "  for (int t = 0; t < steps; ++t) {",
      "    memcpy(x_buf, xs + (size_t)t * %s, %s);" % (size("x"), size("x")),
      "    memcpy(y_buf, ys + (size_t)t * %s, %s);" % (size("y"), size("y")),
      "    memcpy(lr_buf, lrs + (size_t)t * %s, %s);" % (size("lr"), size("lr")),
      "    int32_t rc = %s(&in, &out, workspace);" % sym,
      '    if (rc != 0) { fprintf(stderr, "%s\\n", block_strerror(rc)); return 1; }',
      '    printf("%.9g\\n", out.output_0[0]);', "  }"]
for w in trained:
    c += ['  { char path[4096]; snprintf(path, sizeof path, "%%s/out_%s.bin", dir);' % w,
          '    FILE *f = fopen(path, "wb"); fwrite(in.%s, 1, %s, f); fclose(f); }' % (w, size(w))]
c += ["  return 0;", "}", ""]
with open(os.path.join(work, "train.c"), "w") as f:
    f.write("\n".join(c))
subprocess.run(["cc", "-O2", "-std=c11", "-Wall", "-Werror", "-I", work, os.path.join(work, "train.c"), base + ".o",
                "-lm", "-lpthread", "-o", os.path.join(work, "train")], check=True)
done = subprocess.run([os.path.join(work, "train"), data, str(STEPS)], capture_output=True, text=True, check=True)
losses = [float(v) for v in done.stdout.split()]
assert len(losses) == STEPS, done.stdout
worst = 0.0
for t, (got, ref) in enumerate(zip(losses, reference)):
    err = abs(got - ref) / abs(ref)
    worst = max(worst, err)
    print("step %2d: loss %.6f, PyTorch %.6f, relative difference %.1e" % (t, got, ref, err))
bufs = {w: np.fromfile(os.path.join(data, "out_%s.bin" % w), np.float32).reshape(weights[w].shape) for w in trained}


def weight_difference(name, param):
    """Relative difference of a trained weight, leaving out the key bias
    (qkv's bias, middle third): softmax does not change when every score of a
    row moves alike, so its gradient is zero up to rounding and Adam's update
    of it is that rounding scaled to the rate, on either side."""
    got, ref = bufs[name], param.detach().numpy()
    if param is model.qkv.bias:
        got, ref = np.concatenate([got[:C], got[2 * C:]]), np.concatenate([ref[:C], ref[2 * C:]])
    return float(np.abs(got - ref).max() / np.abs(ref).max())


weights = max(weight_difference(n, p) for n, p in pairs)
print("weights after %d steps: largest relative difference %.1e" % (STEPS, weights))
print("trajectory %s" % ("equal to 1e-5" if worst <= 1e-5 and weights <= 1e-5 else "DIFFERS"))
