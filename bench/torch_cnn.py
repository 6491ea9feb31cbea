"""torch_cnn.py - PyTorch CPU eager peers of bench/bench.py's CNN rows, each timed
in a process of its own under the policy of bench/peer_timing.py; prints
"MS SETTLED". Usage: torch_cnn.py THREADS conv POLICY   (conv2d 3x3, 64->64,
56x56, batch 8, forward) | torch_cnn.py THREADS step POLICY (the CNN training
step of samples-style layers, batch 32, 3x32x32) [cuda] (cuda: on the GPU, each
timed call waiting for the device). bench/bench.py starts it with
OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS set to THREADS;
PyTorch's own thread counts are set here before any operation."""
import sys

import torch
import torch.nn.functional as F

import peer_timing

threads, what, policy, device = peer_timing.torch_peer(sys.argv)

if what == "conv":
    torch.set_grad_enabled(False)
    x = torch.rand(8, 64, 56, 56).to(device)
    w = (torch.rand(64, 64, 3, 3) * 0.05).to(device)
    peer_timing.report(peer_timing.on(device, lambda: F.conv2d(x, w, padding=1)), policy)
else:
    x = torch.rand(32, 3, 32, 32).to(device)
    y = (torch.arange(32) % 10).to(device)
    params = {
        "w1": torch.rand(16, 3, 3, 3) * 0.2, "g1": torch.ones(16), "b1": torch.zeros(16),
        "w2": torch.rand(32, 16, 3, 3) * 0.1, "g2": torch.ones(32), "b2": torch.zeros(32),
        "w3": torch.rand(64, 32, 3, 3) * 0.05, "w4": torch.rand(10, 64) * 0.1, "b4": torch.zeros(10),
    }
    params = {name: t.to(device).requires_grad_() for name, t in params.items()}
    p = params

    def step():
        for t in p.values():
            t.grad = None
        h = F.relu(F.batch_norm(F.conv2d(x, p["w1"], padding=1), None, None, p["g1"], p["b1"], training=True))
        h = F.relu(F.batch_norm(F.conv2d(h, p["w2"], padding=1), None, None, p["g2"], p["b2"], training=True))
        h = F.max_pool2d(h, 2, 2)
        h = F.relu(F.conv2d(h, p["w3"], stride=2, padding=1))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        loss = F.nll_loss(F.log_softmax(h @ p["w4"].t() + p["b4"], dim=-1), y)
        loss.backward()

    peer_timing.report(peer_timing.on(device, step), policy)
