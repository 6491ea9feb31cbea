"""torch_gpt.py - the PyTorch CPU eager peer of bench/gpt_step.relay: one
GPT-style training step (forward, mean cross-entropy loss, backward for every
weight), float32, timed in a process of its own under the policy of
bench/peer_timing.py; prints "MS SETTLED".
Usage: torch_gpt.py THREADS step POLICY [cuda]   (cuda: the same step on the GPU,
each timed call waiting for the device: bench/gpu_table.py)
bench/bench.py starts it with OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and
MKL_NUM_THREADS set to THREADS; PyTorch's own thread counts are set here before
any operation.

The model: batch B=8, sequence T=64, width C=128, 4 heads of 32, MLP hidden 512,
vocabulary V=1000, one pre-norm transformer block. Token embedding E[V, C],
tied as the output layer (logits = h @ E^T); learned position embedding P[T, C].
    x = E[tokens] + P
    h = x + attn(layer_norm1(x))
    h = h + mlp(layer_norm2(h))
    loss = cross_entropy(h @ E^T, targets)          (mean over the B*T tokens)
There is no final layer norm before the output layer, to keep it simple.
attn: qkv = ln1 @ Wqkv^T + bqkv (Wqkv [3C, C]), split into q, k, v, heads to
(B, 4, T, 32); att = q @ k^T * (1/sqrt(32)) + mask, where mask [T, T] is a
constant additive causal mask (0 on and below the diagonal, -1e9 above, not
masked_fill with -inf, so that gradc matches it exactly with its %mask input);
softmax over the last axis; y = att @ v, heads merged to (B, T, C);
out = y @ Wo^T + bo. mlp: gelu (exact, erf) (ln2 @ W1^T + b1) @ W2^T + b2,
W1 [512, C], W2 [C, 512]. Layer norms with weight and bias, eps 1e-5.
The timed call sets every weight's .grad to None, runs the forward and
loss.backward(). Weights are drawn once with seed 0 (normal * 0.02; layer norm
weights 1, biases 0); tokens and targets are random integers in [0, V)."""
import math
import sys

import torch
import torch.nn.functional as F

import peer_timing

threads, what, policy, device = peer_timing.torch_peer(sys.argv)
if what != "step":
    sys.exit("usage: torch_gpt.py THREADS step POLICY")

B, T, C, H, D, HIDDEN, V = 8, 64, 128, 4, 32, 512, 1000
SCALE = 1.0 / math.sqrt(D)

tokens = torch.randint(0, V, (B, T)).to(device)
targets = torch.randint(0, V, (B, T)).to(device)
mask = torch.triu(torch.full((T, T), -1e9), diagonal=1).to(device)


def normal(*shape):
    return torch.randn(*shape) * 0.02


# In the order of bench/gpt_step.relay's @main parameters after %mask.
params = {
    "E": normal(V, C), "P": normal(T, C),
    "ln1_g": torch.ones(C), "ln1_b": torch.zeros(C),
    "Wqkv": normal(3 * C, C), "bqkv": normal(3 * C),
    "Wo": normal(C, C), "bo": normal(C),
    "ln2_g": torch.ones(C), "ln2_b": torch.zeros(C),
    "W1": normal(HIDDEN, C), "b1": normal(HIDDEN),
    "W2": normal(C, HIDDEN), "b2": normal(C),
}
params = {name: t.to(device).requires_grad_() for name, t in params.items()}
p = params


def heads(t):
    """(B, T, C) -> (B, H, T, D)."""
    return t.reshape(B, T, H, D).transpose(1, 2)


def loss_of():
    x = p["E"][tokens] + p["P"]
    a = F.layer_norm(x, (C,), p["ln1_g"], p["ln1_b"], eps=1e-5)
    q, k, v = (a @ p["Wqkv"].t() + p["bqkv"]).split(C, dim=-1)
    att = torch.softmax(heads(q) @ heads(k).transpose(-2, -1) * SCALE + mask, dim=-1)
    y = (att @ heads(v)).transpose(1, 2).reshape(B, T, C)
    h = x + (y @ p["Wo"].t() + p["bo"])
    m = F.layer_norm(h, (C,), p["ln2_g"], p["ln2_b"], eps=1e-5)
    h = h + (F.gelu(m @ p["W1"].t() + p["b1"]) @ p["W2"].t() + p["b2"])
    logits = h @ p["E"].t()
    return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))


def step():
    for t in p.values():
        t.grad = None
    loss_of().backward()


peer_timing.report(peer_timing.on(device, step), policy)
