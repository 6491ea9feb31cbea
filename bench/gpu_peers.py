#!/usr/bin/env python3
"""bench/gpu_peers.py - PyTorch's side of the GPU benchmark cases (test/gpu/gpu_check.py's
`bench:` cases), on the machine with the GPU.

  gpu_peers.py time PEER_JSON      prints {"eager": ms, "tf32": ms, "compile": ms} (null: not run)

PEER_JSON describes a case as gpu_check.py wrote it into the bundle:
  {"kind": "matmul", "n": N[, "tf32": true]}  C = A B, N x N x N, float32 (gradc with --gpu-math=tf32)
  {"kind": "conv", "batch": B, "c": C, "h": H, "grad": G}
                                               3x3 convolution, C -> C channels, H x H, padding 1;
                                               with G, sum(conv(x, w)) and its gradients in x and w
  {"kind": "zoo", "model": M, "args": [...]}   bench/zoo/models.py's model M in training mode:
                                               the loss and its gradients (no optimizer step)
eager: PyTorch CUDA eager, float32 exactly (allow_tf32 off); tf32: the same with allow_tf32 on
(products and convolutions); compile: torch.compile of the eager function, where it compiles.
Each in this process, under bench/peer_timing.py's policy (bench.py's POLICY), every call waiting
for the device. Inputs are harness.c's patterns (pattern()), so `verify` can compare gradc's
output of a product with PyTorch's on the same inputs.
"""
import json
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCH)


def pattern(n, dtype="float32", device="cuda"):
    """harness.c's input pattern: ((i * 2654435761) mod 2^32) / 2^32 - 0.5."""
    import torch
    i = torch.arange(n, dtype=torch.int64, device=device)
    v = ((i * 2654435761) % (1 << 32)).to(torch.float64) / 4294967296.0 - 0.5
    return v.to(getattr(torch, dtype))


def case_function(peer):
    """A function of no arguments computing the case on the GPU (inputs made once)."""
    import torch
    import torch.nn.functional as F
    if peer["kind"] == "matmul":
        n = peer["n"]
        a, b = pattern(n * n).view(n, n), pattern(n * n).view(n, n)
        return lambda: torch.matmul(a, b)
    if peer["kind"] == "conv":
        B, C, H = peer["batch"], peer["c"], peer["h"]
        x = pattern(B * C * H * H).view(B, C, H, H).requires_grad_(peer["grad"])
        w = pattern(C * C * 9).view(C, C, 3, 3).requires_grad_(peer["grad"])
        if not peer["grad"]:
            return lambda: F.conv2d(x, w, padding=1)

        def step():
            x.grad = w.grad = None
            F.conv2d(x, w, padding=1).sum().backward()
        return step
    if peer["kind"] == "zoo":
        sys.path.insert(0, os.path.join(BENCH, "zoo"))
        import models
        args = dict(zip(peer["args"][::2], peer["args"][1::2]))
        case = models.build(peer["model"], False, int(args["--res"]) if "--res" in args else None,
                            int(args["--batch"]) if "--batch" in args else None)
        models.set_mode(case, "train")
        model = case.model.float().cuda()
        x = case.x.float().cuda() if case.x.is_floating_point() else case.x.cuda()
        y = case.y.cuda()
        params = [p for p in model.parameters() if p.requires_grad]

        def step():
            for p in params:
                p.grad = None
            model(x, y).backward()
        return step
    raise ValueError("unknown peer kind %r" % peer["kind"])


def timed(f):
    """Milliseconds per call of f under the policy, or None when it fails."""
    import io
    import contextlib
    import torch
    import peer_timing
    from bench import POLICY
    try:
        f()
        torch.cuda.synchronize()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            peer_timing.report(peer_timing.on("cuda", f), POLICY)
        return float(out.getvalue().split()[0])
    except Exception as e:  # an out-of-memory or a compile failure leaves the cell empty
        print("gpu_peers: %s" % e, file=sys.stderr)
        return None


def time_case(peer):
    import torch
    torch.manual_seed(0)
    result = {}
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    f = case_function(peer)
    result["eager"] = timed(f)
    result["tf32"] = None
    if peer["kind"] in ("matmul", "conv"):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        result["tf32"] = timed(f)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        compiled = torch.compile(f)
    except Exception as e:
        print("gpu_peers: torch.compile: %s" % e, file=sys.stderr)
        compiled = None
    result["compile"] = timed(compiled) if compiled else None
    return result


def verify(peer, out_file):
    """None when gradc's product in OUT_FILE (float32, harness.c's pattern inputs) matches
    PyTorch's float64 product on the GPU within float32 accumulation error; else why not."""
    import numpy as np
    import torch
    if peer["kind"] != "matmul":
        return None
    n = peer["n"]
    got = torch.from_numpy(np.fromfile(out_file, dtype=np.float32).reshape(n, n)).cuda().double()
    a, b = pattern(n * n, "float64").view(n, n), pattern(n * n, "float64").view(n, n)
    want = a @ b
    # float32 rounding of a sum of n products grows about as sqrt(n) ulps of the sum of their
    # magnitudes; 8 times that (a wrong element is off by about the sum itself). With tf32
    # operands each product is off by up to 2^-10 of its magnitude.
    magnitude = float(torch.max(torch.abs(a) @ torch.abs(b)))
    bound = 2.0 ** -10 * magnitude if peer.get("tf32") else 8 * n ** 0.5 * 2.0 ** -24 * magnitude
    err = float(torch.max(torch.abs(got - want)))
    return None if err <= bound else "max error %.3g against PyTorch float64 (bound %.3g)" % (err, bound)


def main():
    if len(sys.argv) != 3 or sys.argv[1] != "time":
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(time_case(json.loads(sys.argv[2]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
