"""Exports a small CNN in training mode (conv -> batch norm -> relu -> conv ->
batch norm -> mean of squares) from PyTorch to ONNX at each opset given, in
float64 without constant folding, as NAME.onnx with NAME.inputs/ and
NAME.expected/ (the loss and every parameter's gradient, PyTorch autograd)
for check_pytorch_grads.py, through samples/pytorch_export.py's export(). Before opset 14 a training BatchNormalization
has five outputs (the running and the saved statistics) and no
training_mode attribute.

usage: bn_opsets.py OUT_DIR OPSET...
"""
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "samples"))
from pytorch_export import export  # noqa: E402  (the sample's exporter: .onnx, inputs, autograd's gradients)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(2, 3, 3, padding=1)
        # An epsilon float32 holds: ONNX's attribute is a float32.
        self.bn1 = nn.BatchNorm2d(3, eps=2.0 ** -16)
        self.conv2 = nn.Conv2d(3, 4, 3, stride=2)
        self.bn2 = nn.BatchNorm2d(4, eps=2.0 ** -16)

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return (h * h).mean()


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for opset in map(int, sys.argv[2:]):
        torch.manual_seed(opset)
        net = Net().double().train()
        with torch.no_grad():
            for bn in (net.bn1, net.bn2):
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
        x = torch.randn(3, 2, 6, 6, dtype=torch.float64)
        export("bn_opset%d" % opset, net, [x], ["x"], out, train=True, opset=opset)


if __name__ == "__main__":
    main()
