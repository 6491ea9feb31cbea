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
  video3d   a 3-D convolutional net: Conv3d (stride, padding, dilation,
            groups), BatchNorm3d in training mode, MaxPool3d (ceil_mode),
            AvgPool3d (with and without count_include_pad), ConvTranspose3d
            (stride, output_padding, groups), adaptive (global) average pool
  indexing  causal attention written with einsum and torch.triu/tril
            (Trilu, folded and on data), torch.gather (GatherElements),
            advanced indexing, index_put (ScatterND), repeat (Tile), fmod (Mod)
  resample  Resize to sizes that are not integer multiples (a segmentation
            head's 5x5 -> 9x9 bilinear), downsampling, align_corners, nearest
  gathernd  GatherND with batch_dims and negative indices (built with
            onnx.helper: PyTorch does not export it), gradients from numpy

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


class Video3d(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv3d(2, 4, 3, stride=(2, 1, 2), padding=(1, 1, 0), dilation=(1, 2, 1))
        self.bn = nn.BatchNorm3d(4)
        self.c2 = nn.Conv3d(4, 6, 3, padding=1, groups=2)
        self.up = nn.ConvTranspose3d(6, 4, (3, 2, 2), stride=(2, 2, 1), padding=(1, 0, 1), output_padding=(1, 0, 0),
                                     groups=2)
        self.fc = nn.Linear(4, 5)

    def forward(self, x, y):
        h = F.relu(self.bn(self.c1(x)))
        h = F.max_pool3d(h, 2, stride=(2, 1, 1), padding=(1, 0, 1), ceil_mode=True)
        h = F.relu(self.c2(h))
        h = F.avg_pool3d(h, 3, stride=(1, 2, 1), padding=1, count_include_pad=False)
        h = F.avg_pool3d(h, (2, 1, 2), stride=1, padding=(1, 0, 0), ceil_mode=True)
        h = F.relu(self.up(h))
        h = F.adaptive_avg_pool3d(h, 1).flatten(1)
        return F.cross_entropy(self.fc(h), y)


class Indexing(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(6, 24)
        self.table = nn.Parameter(torch.randn(5, 8, dtype=torch.float64))
        self.head = nn.Linear(8, 3)

    def forward(self, x, y):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 4).unbind(2)
        causal = torch.triu(torch.full((t, t), float("-inf"), dtype=x.dtype), diagonal=1)  # Trilu, folded
        att = (torch.einsum("bqhd,bkhd->bhqk", q, k) + causal).softmax(-1)
        att = att + 0.5 * torch.tril(att, diagonal=-1)  # Trilu on data
        o = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, 8)
        picked = torch.gather(o, 1, torch.tensor([[[0], [2], [1]], [[3], [3], [0]]]).expand(b, 3, 8))
        rows = self.table[torch.tensor([4, 0, 2]), torch.tensor([1, 7, 3])]
        h = picked.repeat(1, 2, 1) * 0.5
        h[torch.tensor([1, 0]), torch.tensor([5, 2])] = rows[:2, None] * o[:, 0]
        h = h + torch.fmod(h, 0.3) + torch.einsum("ij,bj->bi", self.table, o.mean(1)).sum(1)[:, None, None]
        return F.cross_entropy(self.head(h.mean(1)), y)


class Resample(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 1)
        self.head = nn.Conv2d(16, 3, 3, padding=1)

    def forward(self, x, y):
        h = self.c(x)  # (N, 4, 5, 7)
        size = (9, 11)
        a = F.interpolate(h, size=size, mode="bilinear", align_corners=False)
        b = F.interpolate(h, size=size, mode="bilinear", align_corners=True)
        c = F.interpolate(h, size=size, mode="nearest")
        d = F.interpolate(F.interpolate(h, size=(13, 16), mode="bilinear", align_corners=False), size=size,
                          mode="bilinear", align_corners=False)
        return F.cross_entropy(self.head(torch.cat([a, b, c, d], 1)), y)


def export_gathernd(out):
    """loss = sum(GatherND(W, idx, batch_dims=1) * C): dloss/dW is C
    scattered back to the rows idx names (added where they repeat)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((2, 3, 4, 5))
    idx = np.array([[[0, 1], [2, -1], [0, 1]], [[-3, 3], [1, 0], [2, 2]]], dtype=np.int64)  # (2, 3, 2)
    c = rng.standard_normal((2, 3, 5))
    nodes = [helper.make_node("GatherND", ["W", "idx"], ["g"], batch_dims=1),
             helper.make_node("Mul", ["g", "c"], ["p"]),
             helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0)]
    graph = helper.make_graph(nodes, "gathernd", [helper.make_tensor_value_info("c", TensorProto.DOUBLE, c.shape)],
                              [helper.make_tensor_value_info("loss", TensorProto.DOUBLE, [])],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(idx, "idx")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), os.path.join(out, "gathernd.onnx"))
    os.makedirs(os.path.join(out, "gathernd.inputs"), exist_ok=True)
    np.save(os.path.join(out, "gathernd.inputs", "c.npy"), c)
    grad, loss = np.zeros_like(w), 0.0
    for bi in range(2):
        for m in range(3):
            i, j = idx[bi, m]
            loss += float(w[bi, i, j] @ c[bi, m])
            grad[bi, i, j] += c[bi, m]
    exp = os.path.join(out, "gathernd.expected")
    os.makedirs(exp, exist_ok=True)
    np.save(os.path.join(exp, "loss.npy"), np.array(loss))
    np.save(os.path.join(exp, "W.npy"), grad)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    audio, unet, pads, mobile = Audio1d(), UNet(), Pads(), Mobile()
    video, indexing = Video3d(), Indexing()
    with torch.no_grad():
        for norm in (audio.bn, mobile.ln, mobile.inorm, video.bn):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)
    d = torch.float64
    export("audio1d", audio, [torch.randn(3, 2, 32, dtype=d), torch.tensor([1, 4, 0])], ["x", "y"], out, True)
    export("unet", unet, [torch.randn(2, 3, 8, 8, dtype=d), torch.randint(0, 4, (2, 8, 8))], ["x", "y"], out, False)
    export("pads", pads, [torch.randn(2, 2, 6, 7, dtype=d), torch.tensor([2, 0])], ["x", "y"], out, False)
    export("mobile", mobile, [torch.randn(2, 3, 6, dtype=d), torch.tensor([2, 0])], ["x", "y"], out, False)
    export("video3d", video, [torch.randn(3, 2, 7, 9, 10, dtype=d), torch.tensor([1, 4, 0])], ["x", "y"], out, True)
    export("indexing", indexing, [torch.randn(2, 4, 6, dtype=d), torch.tensor([2, 0])], ["x", "y"], out, False)
    export("resample", Resample(), [torch.randn(2, 3, 5, 7, dtype=d), torch.randint(0, 3, (2, 9, 11))], ["x", "y"],
           out, False)
    export_gathernd(out)


if __name__ == "__main__":
    main()
