"""The good model of make_models.py in PyTorch, on the same weights and input:
does gradc's run of good.onnx match it? usage: torch_good.py DIR"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

d = sys.argv[1]
w = {t.name: torch.tensor(numpy_helper.to_array(t)) for t in onnx.load(os.path.join(d, "good.onnx")).graph.initializer}
x = torch.tensor(np.load(os.path.join(d, "x.npy")))
h = F.conv2d(x, w["conv.weight"], padding=1)
h = F.batch_norm(h, w["bn.mean"], w["bn.var"], w["bn.scale"], w["bn.bias"], eps=1e-3)
h = F.avg_pool2d(F.relu(h), 2).flatten(1)
y = torch.softmax(0.5 * (h @ w["0fc"]), dim=1).numpy()
got = np.load(os.path.join(d, "run_onnx", "output_0.npy"))
print("matches PyTorch:", got.shape == y.shape and bool(np.allclose(got, y, rtol=1e-5, atol=1e-6)))
