"""Exports small PyTorch models with the operators real models add beyond
samples/pytorch_export.py's, in float64, each as NAME.onnx, NAME.inputs/ and
NAME.expected/ (PyTorch's loss and parameter gradients), for
check_pytorch_grads.py:

  audio1d   a 1-D convolutional net: Conv1d (stride, padding, dilation),
            BatchNorm1d in training mode, MaxPool1d, AvgPool1d,
            ConvTranspose1d, global average pool, Linear
  unet      a UNet-like net: conv, max pool, nearest and bilinear
            (align_corners=False) 2x upsampling, skip concat, conv,
            per-pixel cross entropy over (N, C, H, W)
  pads      reflect and replicate (edge) padding before convolutions
  mobile    hard-swish (mobilenet_v3's; hard-sigmoid exports its 1/6 as a float32
            attribute, so it is checked by ONNX's own tests), Expand of a
            class token (ViT's), LayerNorm over two axes, InstanceNorm

usage: torch_model_ops.py OUT_DIR
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples"))
from pytorch_export import export  # noqa: E402


class Audio1d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(2, 6, 5, stride=2, padding=2)
        self.bn = nn.BatchNorm1d(6)
        self.c2 = nn.Conv1d(6, 8, 3, dilation=2, padding=1)
        self.up = nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1)
        self.fc = nn.Linear(4, 5)

    def forward(self, x, y):
        h = F.max_pool1d(F.relu(self.bn(self.c1(x))), 2)
        h = F.avg_pool1d(F.relu(self.c2(h)), 3, stride=1, padding=1)
        h = F.adaptive_avg_pool1d(F.relu(self.up(h)), 1).flatten(1)
        return F.cross_entropy(self.fc(h), y)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 6, 3, padding=1)
        self.mid = nn.Conv2d(6, 6, 3, padding=1)
        self.out = nn.Conv2d(15, 4, 3, padding=1)

    def forward(self, x, y):
        d = F.relu(self.down(x))
        m = F.relu(self.mid(F.max_pool2d(d, 2)))
        a = F.interpolate(m, scale_factor=2, mode="nearest")
        b = F.interpolate(m[:, :3], scale_factor=2, mode="bilinear", align_corners=False)
        return F.cross_entropy(self.out(torch.cat([d, a, b], 1)), y)


class Pads(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(2, 4, 3)
        self.c2 = nn.Conv1d(4, 3, 3)

    def forward(self, x, y):
        h = F.relu(self.c1(F.pad(x, (2, 1, 1, 3), mode="reflect")))
        h = F.pad(h.mean(2), (1, 2), mode="replicate")
        return F.cross_entropy(self.c2(h).mean(2), y)


class Mobile(nn.Module):
    def __init__(self):
        super().__init__()
        self.token = nn.Parameter(torch.randn(1, 1, 6, dtype=torch.float64))
        self.proj = nn.Linear(6, 6)
        self.ln = nn.LayerNorm([4, 6])
        self.inorm = nn.InstanceNorm1d(4, affine=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x, y):
        h = F.hardswish(self.proj(x)) * torch.sigmoid(x)
        h = torch.cat([self.token.expand(x.shape[0], -1, -1), h], 1)
        h = self.inorm(self.ln(h))
        return F.cross_entropy(self.head(h.mean(1)), y)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    audio, unet, pads, mobile = Audio1d(), UNet(), Pads(), Mobile()
    with torch.no_grad():
        for norm in (audio.bn, mobile.ln, mobile.inorm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    d = torch.float64
    export("audio1d", audio, [torch.randn(3, 2, 32, dtype=d), torch.tensor([1, 4, 0])], ["x", "y"], out, True)
    export("unet", unet, [torch.randn(2, 3, 8, 8, dtype=d), torch.randint(0, 4, (2, 8, 8))], ["x", "y"], out, False)
    export("pads", pads, [torch.randn(2, 2, 6, 7, dtype=d), torch.tensor([2, 0])], ["x", "y"], out, False)
    export("mobile", mobile, [torch.randn(2, 3, 6, dtype=d), torch.tensor([2, 0])], ["x", "y"], out, False)


if __name__ == "__main__":
    main()
