"""Exports small PyTorch functions to ONNX (opset 13) for the importer's
regression tests, with their inputs and PyTorch's outputs in the layout of
onnx_hostile.py (NAME.onnx, NAME.inputs/, NAME.expected/output_I.npy):

  masked_fill     softmax(s.masked_fill(m, -inf)): a fully masked row is NaN
  ceil_pool       MaxPool2d(2, 2, padding=1, ceil_mode=True), flatten, linear
  ceil_pool_out   the same pool as the graph's output, which PyTorch 1.13
                  declares with ONNX's extent (4x4), not its own (3x3)

usage: onnx_torch_exports.py DIR
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


def export(out, name, fn, inputs, input_names):
    torch.onnx.export(fn, tuple(inputs), os.path.join(out, name + ".onnx"), opset_version=13,
                      input_names=input_names, output_names=["y"])
    os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
    for n, v in zip(input_names, inputs):
        np.save(os.path.join(out, name + ".inputs", n + ".npy"), v.numpy())
    os.makedirs(os.path.join(out, name + ".expected"), exist_ok=True)
    with torch.no_grad():
        np.save(os.path.join(out, name + ".expected", "output_0.npy"), fn(*inputs).numpy())


class MaskedSoftmax(nn.Module):
    def forward(self, s, m):
        return torch.softmax(s.masked_fill(m, float("-inf")), dim=-1)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    s = torch.randn(3, 4)
    m = torch.tensor([[False, True, False, True], [True, True, True, True], [False, False, False, False]])
    export(out, "masked_fill", MaskedSoftmax(), [s, m], ["s", "m"])
    x = torch.randn(1, 1, 5, 5, dtype=torch.float64)
    pool = nn.MaxPool2d(2, 2, padding=1, ceil_mode=True)
    export(out, "ceil_pool", nn.Sequential(pool, nn.Flatten(), nn.Linear(9, 2)).double(), [x], ["x"])
    export(out, "ceil_pool_out", nn.Sequential(pool).double(), [x], ["x"])


if __name__ == "__main__":
    main()
