"""Exports a small CNN in training mode (conv -> batch norm -> relu -> conv ->
batch norm -> mean of squares) from PyTorch to ONNX at each opset given, in
float64 without constant folding, as NAME.onnx with NAME.inputs/ and
NAME.expected/ (the loss and every parameter's gradient, PyTorch autograd)
for check_pytorch_grads.py. Before opset 14 a training BatchNormalization
has five outputs (the running and the saved statistics) and no
training_mode attribute.

usage: bn_opsets.py OUT_DIR OPSET...
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn


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
        name = "bn_opset%d" % opset
        torch.onnx.export(net, (x,), os.path.join(out, name + ".onnx"), opset_version=opset, input_names=["x"],
                          output_names=["loss"], do_constant_folding=False, training=torch.onnx.TrainingMode.TRAINING)
        os.makedirs(os.path.join(out, name + ".inputs"), exist_ok=True)
        np.save(os.path.join(out, name + ".inputs", "x.npy"), x.numpy())
        loss = net(x)
        loss.backward()
        exp = os.path.join(out, name + ".expected")
        os.makedirs(exp, exist_ok=True)
        np.save(os.path.join(exp, "loss.npy"), loss.detach().numpy())
        for n, p in net.named_parameters():
            np.save(os.path.join(exp, n + ".npy"), p.grad.numpy())


if __name__ == "__main__":
    main()
