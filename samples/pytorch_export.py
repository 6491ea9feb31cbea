"""Exports two small PyTorch models to ONNX for gradc import, with inputs and
PyTorch's own outputs and gradients (autograd, float64) to check gradc by:

  cnn.onnx          conv -> batch norm -> relu -> max pool -> conv -> relu ->
                    global average pool -> linear -> log softmax -> NLL loss
  transformer.onnx  a pre-norm transformer block (layer norm, causal
                    self-attention with 2 heads, residual; layer norm, GELU MLP,
                    residual) and the mean of its output's squares
  mlp.onnx          linear -> relu -> dropout -> linear -> cross entropy
  attention.onnx    torch.nn.MultiheadAttention (4 heads), residual, layer norm

Exported in float64 without constant folding, opset 15: the CNN in training
mode (batch norm on the batch's statistics, as it trains), the others in eval
mode (dropout off). For each model NAME it writes
NAME.onnx, NAME.inputs/INPUT.npy, and NAME.expected/ with the loss (loss.npy)
and the gradient of every parameter (PARAM.npy, named as in the ONNX file).

usage: samples/pytorch_export.py OUT_DIR
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 8, 3)
        self.fc = nn.Linear(8, 10)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        h = F.relu(self.conv2(h))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.nll_loss(F.log_softmax(self.fc(h), dim=1), y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 5))

    def forward(self, x, y):
        return F.cross_entropy(self.net(x), y)


class Attention(nn.Module):
    """torch.nn.MultiheadAttention as exported, with a residual and layer norm."""

    def __init__(self, width=16, heads=4):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        h = self.norm(x + self.attn(x, x, x, need_weights=False)[0])
        return (h * h).mean()


class Block(nn.Module):
    def __init__(self, width=16, heads=2, seq=6):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), -1e9, dtype=torch.float64), 1))

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.reshape(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(2, 3) / math.sqrt(d) + self.mask, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, c))
        x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
        return (x * x).mean()


def export(name, model, inputs, input_names, out, train, opset=15):
    model = model.double().train(train)
    mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, tuple(inputs), os.path.join(out, name + ".onnx"), opset_version=opset,
                      input_names=input_names, output_names=["loss"], do_constant_folding=False, training=mode)
    os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
    for n, v in zip(input_names, inputs):
        np.save(os.path.join(out, name + ".inputs", n + ".npy"), v.numpy())
    loss = model(*inputs)
    loss.backward()
    exp = os.path.join(out, name + ".expected")
    os.makedirs(exp, exist_ok=True)
    np.save(os.path.join(exp, "loss.npy"), loss.detach().numpy())
    for n, p in model.named_parameters():
        np.save(os.path.join(exp, n + ".npy"), p.grad.numpy())


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    cnn, block, mlp, attention = CNN(), Block(), MLP(), Attention()
    with torch.no_grad():
        # Norm weights other than ones and zeros: the exporter would merge
        # equal initializers (ln2's into ln1's), tying what PyTorch keeps apart.
        for norm in (cnn.bn1, block.ln1, block.ln2, attention.norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    # The CNN in training mode: batch norm on the batch's own statistics.
    export("cnn", cnn, [torch.randn(4, 1, 10, 10, dtype=torch.float64), torch.tensor([1, 7, 3, 0])], ["x", "y"], out,
           True)
    export("transformer", block, [torch.randn(2, 6, 16, dtype=torch.float64)], ["x"], out, False)
    export("mlp", mlp, [torch.randn(8, 12, dtype=torch.float64), torch.tensor([0, 4, 2, 1, 3, 3, 0, 2])], ["x", "y"],
           out, False)
    export("attention", attention, [torch.randn(3, 5, 16, dtype=torch.float64)], ["x"], out, False)


if __name__ == "__main__":
    main()
