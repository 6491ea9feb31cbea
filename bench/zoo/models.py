"""The models of the zoo (bench/zoo/zoo.py), built with torchvision and torch.

Each model is wrapped so that forward(x, y) is the cross entropy of its logits
against fixed labels, with random weights drawn from a seed of its own (no
downloads). Weights are then re-drawn where torch.onnx.export would merge them:
the exporter folds initializers with equal values into one, which silently
ties two weights (their gradients come back summed). Norm layers get
non-trivial affine parameters and running statistics, and where ONNX holds a
constant as a float32 attribute (a norm's epsilon, HardSigmoid's 1/6) the
model computes with the rounded value, so that a float64 comparison is tight.

`build(name, quick, res)` returns a Case; `set_mode(case, mode)` puts its
modules in the state an export mode asks for.
"""
import hashlib
import math
import zlib
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from torchvision.models.swin_transformer import ShiftedWindowAttention
from torchvision.ops import StochasticDepth

# torchvision's ImageNet classifiers, by constructor name.
IMAGE_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0", "densenet121",
                "squeezenet1_1", "shufflenet_v2_x1_0", "regnet_y_400mf", "vgg11_bn", "convnext_tiny", "googlenet",
                "vit_b_16", "swin_t"]
MODELS = IMAGE_MODELS + ["vit_small", "transformer_encoder", "gpt2"]
# The quick subset: a CNN with batch norm, a depthwise (mobile) CNN, three transformers.
QUICK_MODELS = ["resnet18", "mobilenet_v2", "vit_small", "transformer_encoder", "gpt2"]
QUICK_RES = 64

# Further torchvision models, out of the default run (name them with --models):
# ImageNet classifiers, video classifiers (input N,3,T,H,W) and semantic
# segmentation models (per-pixel cross entropy against labels N,H,W).
EXTRA_IMAGE_MODELS = ["alexnet", "inception_v3", "mnasnet0_5", "resnext50_32x4d", "wide_resnet50_2",
                      "regnet_x_400mf", "efficientnet_v2_s", "mobilenet_v3_large", "shufflenet_v2_x0_5"]
VIDEO_MODELS = ["r3d_18", "mc3_18", "r2plus1d_18"]
SEGMENTATION_MODELS = ["lraspp_mobilenet_v3_large", "deeplabv3_mobilenet_v3_large", "fcn_resnet50"]
EXTRA_MODELS = EXTRA_IMAGE_MODELS + VIDEO_MODELS + SEGMENTATION_MODELS


def torchvision_classifiers():
    """Every ImageNet classifier this torchvision builds (resnet34, vgg16, swin_v2_t, ...): any of
    them runs like the extras (--models NAME), at the extras' image side unless --res is given."""
    try:
        return sorted(torchvision.models.list_models(module=torchvision.models))
    except AttributeError:  # torchvision before 0.14: only the named lists
        return sorted(set(IMAGE_MODELS + EXTRA_IMAGE_MODELS))


def known(name):
    """Whether build() knows NAME."""
    return name in MODELS + EXTRA_MODELS or name in torchvision_classifiers()

# The smallest image side a model can take (inception_v3: 75; alexnet: its
# AdaptiveAvgPool2d(6) exports only where the features are a multiple of 6
# on a side: 6x6 from 223 px on) and the side used where --res is not given.
MIN_RES = {"inception_v3": 75, "alexnet": 224}
# The VGGs' AdaptiveAvgPool2d(7) likewise (7x7 features from 224 px).
MIN_RES.update({"vgg%d%s" % (d, bn): 224 for d in (11, 13, 16, 19) for bn in ("", "_bn")})
MIN_RES["maxvit_t"] = 224  # its 7 x 7 windows at every stage
EXTRA_RES = 64
VIDEO_SIZE = (4, 32)  # frames, side


@dataclass
class Case:
    name: str
    config: str         # the input and the size, for the report line
    model: nn.Module    # forward(x, y) -> the loss
    x: torch.Tensor
    y: torch.Tensor


class WithLoss(nn.Module):
    """forward(x, y) = F.cross_entropy(net(x), y); per-token logits (N, T, C)
    are flattened to (N·T, C), the form gradc imports."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        logits = self.net(x)
        if logits.dim() > 2:
            logits, y = logits.flatten(0, -2), y.flatten()
        return F.cross_entropy(logits, y)


class SegmentationWithLoss(nn.Module):
    """forward(x, y) = per-pixel F.cross_entropy(net(x)["out"], y): logits
    (N, C, H, W) against labels (N, H, W)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return F.cross_entropy(self.net(x)["out"], y)


class TokenClassifier(nn.Module):
    """nn.TransformerEncoder with a per-token classification head."""

    def __init__(self, layers, width, heads, ff, classes=10):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, ff, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        return self.head(self.encoder(x))


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(width, 3 * width)
        self.c_proj = nn.Linear(width, width)
        self.register_buffer("causal", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = F.softmax(att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf")), dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, width, heads, seq):
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads, seq)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """A nanoGPT-style decoder: token and position embeddings, pre-norm
    blocks with causal attention and exact GELU, lm_head tied to wte, no dropout."""

    def __init__(self, layers, width, heads, seq, vocab):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(seq, width)
        self.h = nn.ModuleList([GPTBlock(width, heads, seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, idx):
        pos = torch.arange(0, idx.shape[1], dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def build(name, quick=False, res=None, batch=None):
    """The model NAME with its inputs: at --quick sizes where QUICK, images of RES² pixels, BATCH
    samples (default 2; gpt2 1)."""
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    n = batch or (1 if name == "gpt2" else 2)
    labels = (torch.arange(n) * 4 + 3) % 10  # 3, 7, 1, 5, ...
    if name in IMAGE_MODELS:
        res = res or (QUICK_RES if quick else 224)
        kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
        if name == "vit_b_16":
            kwargs["image_size"] = res
        net = getattr(torchvision.models, name)(**kwargs)
        x, y = torch.randn(n, 3, res, res), labels
        config = "%dx3x%dx%d" % (n, res, res)
    elif name == "vit_small":
        net = torchvision.models.VisionTransformer(image_size=32, patch_size=4, num_layers=4, num_heads=4,
                                                   hidden_dim=128, mlp_dim=512, num_classes=10)
        x, y = torch.randn(n, 3, 32, 32), labels
        config = "%dx3x32x32, patch 4, 4 layers, d 128" % n
    elif name == "transformer_encoder":
        layers, width, heads, ff, seq = (2, 64, 4, 256, 16) if quick else (6, 256, 4, 1024, 64)
        net = TokenClassifier(layers, width, heads, ff)
        x, y = torch.randn(n, seq, width), torch.randint(0, 10, (n, seq))
        config = "%dx%d, %d layers, d %d, %d heads, FF %d" % (n, seq, layers, width, heads, ff)
    elif name == "gpt2":
        layers, width, heads, seq, vocab = (2, 64, 4, 32, 512) if quick else (12, 768, 12, 128, 50257)
        net = GPT(layers, width, heads, seq, vocab)
        x, y = torch.randint(0, vocab, (n, seq)), torch.randint(0, vocab, (n, seq))
        config = "%dx%d, %d layers, d %d, %d heads, vocab %d" % (n, seq, layers, width, heads, vocab)
    elif name in EXTRA_IMAGE_MODELS or name in torchvision_classifiers():
        res = max(res or EXTRA_RES, MIN_RES.get(name, 0))
        kwargs = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
        if name.startswith("vit_"):  # a position embedding per patch of this side
            kwargs["image_size"] = res
        net = getattr(torchvision.models, name)(**kwargs)
        x, y = torch.randn(n, 3, res, res), labels
        config = "%dx3x%dx%d" % (n, res, res)
    elif name in VIDEO_MODELS:
        frames, side = VIDEO_SIZE
        net = getattr(torchvision.models.video, name)()
        x, y = torch.randn(n, 3, frames, side, side), labels
        config = "%dx3x%dx%dx%d" % (n, frames, side, side)
    elif name in SEGMENTATION_MODELS:
        res = res or EXTRA_RES
        net = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        x, y = torch.randn(n, 3, res, res), torch.randint(0, 21, (n, res, res))
        config = "%dx3x%dx%d, 21 classes per pixel" % (n, res, res)
    else:
        raise ValueError("unknown model %r (known: %s, any torchvision classifier)" % (name, ", ".join(MODELS + EXTRA_MODELS)))
    model = SegmentationWithLoss(net) if name in SEGMENTATION_MODELS else WithLoss(net)
    redraw(model, seed)
    round_to_onnx_attributes(model)
    return Case(name, config, model, x, y)


def redraw(model, seed):
    """Norm layers: weight in [0.5, 1.5), bias and running mean N(0, 0.1²),
    running variance in [0.5, 1.5). Then every floating-point parameter or
    running statistic whose entries are all equal, or that equals one seen
    before, is drawn again around its mean with its spread (0.05 if none)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=g))
                if getattr(m, "running_mean", None) is not None:
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=g))
                    m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
        seen = set()
        for t in weight_tensors(model):
            flat = t.flatten()
            if bool((flat == flat[0]).all()) or digest(t) in seen:
                spread = float(flat.std()) if flat.numel() > 1 and float(flat.std()) > 0 else 0.05
                t.copy_(float(flat.mean()) + spread * torch.randn(t.shape, generator=g))
            if digest(t) in seen:
                raise RuntimeError("redraw: a tensor still equals another")
            seen.add(digest(t))


class OnnxHardsigmoid(nn.Hardsigmoid):
    """nn.Hardsigmoid as its export computes: ONNX HardSigmoid's alpha is a
    float32 attribute, 1/6 rounded, where PyTorch divides by 6 (the float64
    results differ by 3e-8). Exported as nn.Hardsigmoid; run in PyTorch with
    the rounded alpha."""

    ALPHA = float(np.float32(1 / 6))

    def forward(self, x):
        if torch.onnx.is_in_onnx_export():
            return super().forward(x)
        return torch.clamp(x * self.ALPHA + 0.5, 0, 1)


def round_to_onnx_attributes(model):
    """Makes the model compute with the float32 values its ONNX attributes
    will hold, so that the float64 comparison stays tight: every norm
    layer's epsilon rounded to float32 (where a batch holds few values per
    channel, as BatchNorm over 2x1x1 at the end of a ResNet on 32² images,
    1e-5 and float32's 1e-5 give gradients that differ by 1e-7), and
    nn.Hardsigmoid as OnnxHardsigmoid."""
    for m in list(model.modules()):
        if isinstance(getattr(m, "eps", None), float):
            m.eps = float(np.float32(m.eps))
        for name, child in m.named_children():
            if type(child) is nn.Hardsigmoid:
                setattr(m, name, OnnxHardsigmoid())


def weight_tensors(model):
    """The floating-point parameters (each once: a tied weight is one) and running statistics."""
    tensors = [p for p in model.parameters() if p.numel() > 0]
    return tensors + [b for n, b in model.named_buffers() if n.rsplit(".", 1)[-1] in ("running_mean", "running_var")]


def digest(t):
    return hashlib.sha1(t.detach().cpu().contiguous().numpy().tobytes() + str(tuple(t.shape)).encode()).digest()


# Modules whose training flag only draws random numbers: nn.Dropout and its
# kin, stochastic depth, and attention modules that call F.dropout themselves.
RANDOM_MODULES = (nn.modules.dropout._DropoutNd, StochasticDepth, nn.MultiheadAttention, ShiftedWindowAttention)


def set_mode(case, mode):
    """Puts the model's modules in the state of an export mode and returns a
    note for the report line, or "" when there is nothing to say:
      train    training mode: batch norm on the batch's statistics, dropout on;
               StochasticDepth in eval (PyTorch 1.13 cannot export it training)
      trainbn  training mode with every RANDOM_MODULES module in eval
      eval     model.eval()"""
    model = case.model
    model.train(mode != "eval")
    if mode == "eval":
        return ""
    off = [m for m in model.modules()
           if isinstance(m, StochasticDepth if mode == "train" else RANDOM_MODULES)]
    for m in off:
        m.eval()
    if mode == "train" and off:
        return "stochastic depth off"
    return ""
