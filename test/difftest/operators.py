"""The differential tester's per-operator table: for every operator of gradc's registry
(`gradc ops --json`), how to generate a well-typed call of it and what it computes.

Each entry of TABLE is an `Op`:

  gen(g, x)      picks the operands (starting from the value `x` the generator offers, a float
                 tensor, or an integer one for an operator marked `ints`) and draws the
                 attributes; returns a `Call`, or None when the operator does not apply to `x`. `g` is the generator (generator.py): it creates
                 parameters, finds compatible values and draws shapes.
  numpy(a, at)   the forward value: numpy in float64, from the operator's documentation
                 (SPEC §4, TVM Relay semantics), never from gradc's kernels;
  torch(a, at)   the same in PyTorch, whose autograd gives the reference gradient;
  attrs          the attribute names the entry knows; a registry attribute it does not know fails
                 the tester (a new attribute needs a generator and a reference);
  ok(a, at, out, margin)
                 rejects a call whose operands sit within `margin` of a point where the operator
                 is not smooth (relu at 0, ties of max, clip bounds, comparisons of near-equal
                 values): there float32 rounding could legitimately flip the result.
  gradient       False where no gradient flows through the operator (creation, *_like,
                 no_grad): the generator does not continue its chain from such a value;
  ints           True where the operator takes integer tensors too (SPEC §4): the generator
                 also builds integer chains of those, compared exactly (`ok` does not apply).

`a` holds the evaluated arguments (numpy arrays or torch tensors; float64 for float values, bool
for bools, int64 for integers), `at` the attributes with the registry's defaults filled in.

NOT_GENERATED lists the registry operators the generator never calls, each with the reason.
An operator in the registry that is in neither fails the tester with a message naming this file,
so every operator added to gradc needs an entry here (see README.md in this directory).
"""
import math

import numpy as np
import torch

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")


class Call:
    """One generated operator call: arguments (generator Values or Literals, or a list of them
    for a tuple argument) and the attributes written in the text (the rest take defaults)."""

    def __init__(self, args, attrs=None, dtype=None):
        self.args = args
        self.attrs = attrs or {}
        self.dtype = dtype  # the result's dtype when it is not the first float argument's


class Op:
    def __init__(self, gen, numpy, torch, attrs=(), ok=None, gradient=True, ints=False):
        self.gen, self.numpy, self.torch = gen, numpy, torch
        self.attrs = frozenset(attrs)
        self.ok = ok
        self.gradient = gradient  # False: the result does not depend differentiably on the operands
        self.ints = ints  # the generator may also call it on int32/int64 values (exact results)


# ------------------------------------------------------------------------------------------------
# attribute semantics shared by the numpy and torch references
# ------------------------------------------------------------------------------------------------


def norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def reduce_axes(axis, rank, exclude):
    """TVM's GetReduceAxes: None or [] reduce every axis (`exclude` notwithstanding); otherwise an
    int or a list (negative allowed), and `exclude` reduces the complement."""
    if axis is None or axis == []:
        return tuple(range(rank))
    ax = [axis] if isinstance(axis, int) else list(axis)
    ax = sorted(norm_axis(a, rank) for a in ax)
    if exclude:
        ax = [i for i in range(rank) if i not in ax]
    return tuple(ax)


def reshape_target(shape, newshape, allowzero):
    """Relay's reshape: 0 copies the input dimension at that position (a size 0 with allowzero),
    -1 is inferred."""
    out = [shape[i] if d == 0 and not allowzero else d for i, d in enumerate(newshape)]
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(shape) // known
    return tuple(out)


def squeeze_target(shape, axis):
    if axis is None:
        return tuple(d for d in shape if d != 1)
    drop = {norm_axis(a, len(shape)) for a in ([axis] if isinstance(axis, int) else axis)}
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def expand_target(shape, axis, num):
    axis = norm_axis(axis, len(shape) + 1)
    return tuple(shape[:axis]) + (1,) * num + tuple(shape[axis:])


def collapse_axes(shape, target):
    """The axes of `shape` that broadcasting `target` to `shape` expanded: (leading, kept-as-1)."""
    lead = len(shape) - len(target)
    ones = tuple(lead + i for i, d in enumerate(target) if d == 1 and shape[lead + i] != 1)
    return tuple(range(lead)), ones


def permutation(axes, rank):
    return list(range(rank))[::-1] if axes is None else [norm_axis(a, rank) for a in axes]


def bias_shape(rank, axis, n):
    return [n if i == norm_axis(axis, rank) else 1 for i in range(rank)]


# ------------------------------------------------------------------------------------------------
# numpy references (float64)
# ------------------------------------------------------------------------------------------------


def np_erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def np_log_softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def np_reduce(fn):
    return lambda a, at: fn(a[0], axis=reduce_axes(at["axis"], a[0].ndim, at["exclude"]),
                            keepdims=at["keepdims"])


def np_collapse_sum(x, target):
    lead, ones = collapse_axes(x.shape, target)
    return np.sum(np.sum(x, axis=lead), axis=tuple(i - len(lead) for i in ones),
                  keepdims=True).reshape(target)


def np_cumsum(x, at):
    if at["axis"] is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = norm_axis(at["axis"], x.ndim)
    out = np.cumsum(x, axis=axis)
    return out - x if at["exclusive"] else out


def nll_class_axis(pred):
    return 0 if pred.ndim == 1 else 1


def np_nll_loss(a, at):
    """PyTorch's nll_loss: classes on axis 1 (axis 0 for a 1-D prediction)."""
    pred, target = a[0], a[1]
    ncls = pred.shape[nll_class_axis(pred)]
    weights = a[2] if len(a) > 2 else np.ones(ncls)
    counted = target != at["ignore_index"]
    cls = np.where(counted, target, 0)
    picked = np.take_along_axis(pred, np.expand_dims(cls, nll_class_axis(pred)),
                                axis=nll_class_axis(pred)).squeeze(nll_class_axis(pred))
    w = np.where(counted, weights[cls], 0.0)
    loss = -w * picked
    if at["reduction"] == "none":
        return loss
    if at["reduction"] == "sum":
        return np.sum(loss)
    return np.sum(loss) / np.sum(w)


# ------------------------------------------------------------------------------------------------
# torch references (float64 in the reference run; the program's dtypes in the rounding estimate)
# ------------------------------------------------------------------------------------------------


def t_reduce(fn):
    def run(a, at):
        ax = reduce_axes(at["axis"], a[0].dim(), at["exclude"])
        return a[0] if not ax else fn(a[0], dim=ax, keepdim=at["keepdims"])
    return run


def t_collapse_sum(x, target):
    lead, ones = collapse_axes(tuple(x.shape), target)
    if lead:
        x = torch.sum(x, dim=lead)
    if ones:
        x = torch.sum(x, dim=tuple(i - len(lead) for i in ones), keepdim=True)
    return x.reshape(target)


def t_cumsum(x, at):
    if at["axis"] is None:
        x, axis = x.reshape(-1), 0
    else:
        axis = norm_axis(at["axis"], x.dim())
    out = torch.cumsum(x, dim=axis)
    return out - x if at["exclusive"] else out


def t_nll_loss(a, at):
    pred, target = a[0], a[1]
    cax = nll_class_axis(pred)
    weights = a[2] if len(a) > 2 else torch.ones(pred.shape[cax], dtype=pred.dtype)
    counted = target != at["ignore_index"]
    cls = torch.where(counted, target, torch.zeros_like(target))
    picked = torch.gather(pred, cax, cls.unsqueeze(cax)).squeeze(cax)
    w = torch.where(counted, weights[cls], torch.zeros((), dtype=weights.dtype))
    loss = -w * picked
    if at["reduction"] == "none":
        return loss
    if at["reduction"] == "sum":
        return torch.sum(loss)
    return torch.sum(loss) / torch.sum(w)


def t_cast(x, dtype):
    if dtype in FLOAT_DTYPES:
        return x.to(torch.float64) if x.dtype == torch.bool or not x.is_floating_point() else x
    if dtype == "bool":
        return (x != 0).detach()
    return torch.trunc(x.detach()).to(torch.int64) if x.is_floating_point() else x.to(torch.int64)


# The dtypes of reference values: floats are float64 whatever the program's float dtype.
TORCH_DTYPE = {"float16": torch.float64, "float32": torch.float64, "float64": torch.float64,
               "int32": torch.int64, "int64": torch.int64, "bool": torch.bool}
NUMPY_DTYPE = {"float16": np.float64, "float32": np.float64, "float64": np.float64,
               "int32": np.int64, "int64": np.int64, "bool": np.bool_}

# ------------------------------------------------------------------------------------------------
# kink checks: operands at least `margin` away from where an operator is not smooth
# ------------------------------------------------------------------------------------------------


def away_from_zero(a, at, out, m):
    return bool(np.all(np.abs(a[0]) > m))


def _scaled(m, *xs):
    """The margin m relative to the operands' magnitudes (at least m)."""
    return m * np.maximum(1.0, np.maximum.reduce([np.abs(x) for x in xs]))


def apart(a, at, out, m):
    """Two operands apart everywhere (a fan-out such as maximum(%x, %x) is rejected: its gradient
    at the tie is a convention)."""
    return bool(np.all(np.abs(a[0] - a[1]) > _scaled(m, *np.broadcast_arrays(a[0], a[1]))))


def compare_apart(a, at, out, m):
    """Apart, or the very same value (the result is then exact)."""
    return a[0] is a[1] or apart(a, at, out, m)


def clip_ok(a, at, out, m):
    return bool(np.all(np.abs(a[0] - at["a_min"]) > m) and np.all(np.abs(a[0] - at["a_max"]) > m))


def no_ties(a, at, out, m):
    """The two largest (and the two smallest) elements of every reduced group differ by > m."""
    x = a[0]
    ax = reduce_axes(at["axis"], x.ndim, at["exclude"])
    if not ax or x.size == 0:
        return True
    kept = [i for i in range(x.ndim) if i not in ax]
    groups = np.transpose(x, kept + list(ax)).reshape(math.prod(x.shape[i] for i in kept), -1)
    if groups.shape[1] < 2:
        return True
    s = np.sort(groups, axis=1)
    scale = _scaled(m, s[:, 0], s[:, -1])
    return bool(np.all(s[:, -1] - s[:, -2] > scale) and np.all(s[:, 1] - s[:, 0] > scale))


def int_cast_ok(a, at, out, m):
    x = a[0]
    if x.dtype == np.bool_ or at["dtype"] in FLOAT_DTYPES or x.dtype.kind != "f":
        return True
    return bool(np.all(np.abs(x - np.round(x)) > _scaled(m, x)) and np.all(np.abs(x) < 1e6))


# ------------------------------------------------------------------------------------------------
# generators: Call(args, attrs) for a float operand x, or None
# ------------------------------------------------------------------------------------------------


def gen_unary(g, x):
    return Call([x])


def gen_positive_unary(g, x):
    return Call([g.positive_operand(x)])


def gen_clip(g, x):
    if x.dtype in INT_DTYPES:
        lo, hi = sorted(int(v) for v in g.rng.integers(-4, 5, 2))
        return Call([x], {"a_min": lo, "a_max": hi})
    lo, hi = sorted(g.rng.uniform(-1.5, 1.5, 2))
    return Call([x], {"a_min": round(float(lo), 2), "a_max": round(float(hi) + 0.1, 2)})


def gen_binary(g, x):
    y = g.broadcast_partner(x)
    return Call([x, y] if g.rng.random() < 0.7 else [y, x])


def gen_divide(g, x):
    return Call([x, g.broadcast_partner(x, nonzero=True)])


def gen_power(g, x):
    base = g.positive_operand(x)
    return Call([base, g.broadcast_partner(base, small=True)])


def gen_compare(g, x):
    return Call([x, g.broadcast_partner(x, fanout=0.2)], dtype="bool")


def gen_where(g, x):
    y = g.broadcast_partner(x)
    return Call([g.condition(x), x, y], dtype=x.dtype)


def gen_cast(g, x):
    """float -> another float dtype; bool or int -> float; float -> int (far from an integer)."""
    choice = g.rng.random()
    if choice < 0.3:
        v = g.pick(lambda v: not v.is_float())
        if v is not None:
            return Call([v], {"dtype": x.dtype}, dtype=x.dtype)
    if choice < 0.5:
        dtype = str(g.rng.choice(INT_DTYPES))
    else:
        dtype = str(g.rng.choice([d for d in FLOAT_DTYPES if d != x.dtype]))
    return Call([x], {"dtype": dtype}, dtype=dtype)


def gen_creation(g, x):
    return Call([], {"shape": list(g.sub_shape(x.shape)), "dtype": x.dtype}, dtype=x.dtype)


def gen_full(g, x):
    value = g.scalar_operand(x.dtype)
    attrs = {"shape": list(g.sub_shape(x.shape))}
    if g.rng.random() < 0.5:
        attrs["dtype"] = x.dtype
    return Call([value], attrs)


def gen_full_like(g, x):
    return Call([x, g.scalar_operand(x.dtype)])


def gen_reduce(g, x):
    r = len(x.shape)
    attrs = {}
    if r and g.rng.random() < 0.8:
        k = int(g.rng.integers(1, r + 1))
        axes = [int(a) - (r if g.rng.random() < 0.5 else 0) for a in g.rng.choice(r, k, replace=False)]
        attrs["axis"] = axes[0] if k == 1 and g.rng.random() < 0.5 else axes
        if g.rng.random() < 0.25:
            attrs["exclude"] = True
    if g.rng.random() < 0.5:
        attrs["keepdims"] = bool(g.rng.random() < 0.6)
    return Call([x], attrs)


def gen_broadcast_to(g, x):
    return Call([x], {"shape": list(g.super_shape(x.shape))})


def gen_collapse_sum_to(g, x):
    return Call([x], {"shape": list(g.sub_shape(x.shape))})


def gen_collapse_sum_like(g, x):
    target = g.sub_shape(x.shape)
    return Call([x, g.operand(target, x.dtype)])


def gen_expand_dims(g, x):
    r = len(x.shape)
    if r >= 5:
        return None
    attrs = {"axis": int(g.rng.integers(-r - 1, r + 1))}
    if g.rng.random() < 0.5:
        attrs["num_newaxis"] = int(g.rng.integers(0, 3)) if r < 4 else 1
    return Call([x], attrs)


def gen_squeeze(g, x):
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if not ones:
        return None
    if g.rng.random() < 0.3:
        return Call([x])
    pick = [int(i) for i in g.rng.choice(ones, int(g.rng.integers(1, len(ones) + 1)), replace=False)]
    return Call([x], {"axis": [i - len(x.shape) if g.rng.random() < 0.4 else i for i in pick]})


def gen_batch_flatten(g, x):
    return Call([x]) if len(x.shape) >= 2 else None


def gen_reshape(g, x):
    """A random factorisation of the size, with Relay's 0 (copy) and -1 (infer); allowzero=True
    sometimes, and always for an empty tensor (its 0 is then written as a size)."""
    size = math.prod(x.shape)
    allowzero = size == 0 or g.rng.random() < 0.3
    if size == 0:
        newshape = g.factorize(math.prod(d for d in x.shape if d))
        newshape.insert(int(g.rng.integers(0, len(newshape) + 1)), 0)
    else:
        newshape = [0 if i < len(x.shape) and d == x.shape[i] and not allowzero and g.rng.random() < 0.4 else d
                    for i, d in enumerate(g.factorize(size))]
        if newshape and g.rng.random() < 0.5:
            newshape[int(g.rng.integers(len(newshape)))] = -1
    attrs = {"newshape": newshape}
    if allowzero or g.rng.random() < 0.2:
        attrs["allowzero"] = allowzero
    return Call([x], attrs)


def gen_reverse(g, x):
    r = len(x.shape)
    return Call([x], {"axis": int(g.rng.integers(-r, r))}) if r else None


def gen_transpose(g, x):
    r = len(x.shape)
    if g.rng.random() < 0.25:
        return Call([x])
    perm = [int(i) - (r if g.rng.random() < 0.3 else 0) for i in g.rng.permutation(r)]
    return Call([x], {"axes": perm})


def gen_cumsum(g, x):
    r = len(x.shape)
    attrs = {}
    if r and g.rng.random() < 0.8:
        attrs["axis"] = int(g.rng.integers(-r, r))
    if g.rng.random() < 0.5:
        attrs["exclusive"] = bool(g.rng.random() < 0.5)
    return Call([x], attrs)


def gen_matmul(g, x):
    """numpy matmul: (..., M, K) x (..., K, N) with broadcast batches, or 1-D operands."""
    r = len(x.shape)
    if r == 0 or r > 4:
        return None
    k = x.shape[-1]
    if r == 1:
        other = g.shape(int(g.rng.integers(1, 3)))
        shape = (k,) if len(other) == 1 and g.rng.random() < 0.3 else other[:-1] + (k,) + other[-1:]
        return Call([x, g.operand(shape, x.dtype)])
    batch = g.sub_shape(x.shape[:-2]) if r > 2 else ()
    if r == 2 and g.rng.random() < 0.3:
        batch = g.shape(1)
    shape = (k,) if g.rng.random() < 0.2 else tuple(batch) + (k, g.dim())
    return Call([x, g.operand(shape, x.dtype)])


def gen_dense(g, x):
    r = len(x.shape)
    if r == 0 or r > 3:
        return None
    n = g.dim()
    attrs = {"units": n} if g.rng.random() < 0.3 else {}
    return Call([x, g.operand((n, x.shape[-1]), x.dtype)], attrs)


def gen_bias_add(g, x):
    r = len(x.shape)
    if r == 0:
        return None
    axis = int(g.rng.integers(-r, r))
    attrs = {"axis": axis} if axis != 1 or g.rng.random() < 0.5 else {}
    return Call([x, g.operand((x.shape[norm_axis(axis, r)],), x.dtype)], attrs)


def gen_softmax(g, x):
    r = len(x.shape)
    if r == 0:
        return None
    return Call([x], {"axis": int(g.rng.integers(-r, r))} if g.rng.random() < 0.7 else {})


def gen_nll_loss(g, x):
    """pred (C,), (N, C) or (N, C, d...); integer targets in [0, C); optional positive weights."""
    r = len(x.shape)
    if r == 0 or r > 4:
        return None
    cax = 0 if r == 1 else 1
    ncls = x.shape[cax]
    if ncls == 0:
        return None
    tshape = tuple(d for i, d in enumerate(x.shape) if i != cax)
    attrs = {}
    reduction = str(g.rng.choice(["mean", "sum", "none"]))
    if reduction != "mean" or g.rng.random() < 0.5:
        attrs["reduction"] = reduction
    low = 0
    if g.rng.random() < 0.3:
        attrs["ignore_index"] = int(g.rng.integers(0, ncls))
    elif g.rng.random() < 0.2:  # an out-of-range target that is ignored
        attrs["ignore_index"] = low = -1
    target = g.int_param(tshape, str(g.rng.choice(INT_DTYPES)), ncls, low)
    args = [x, target]
    if g.rng.random() < 0.5:
        args.append(g.operand((ncls,), x.dtype, positive=True))
    return Call(args, attrs)


def gen_nll_loss_backward(g, x):
    """(g, pred, target[, weights]): the gradient of nn.nll_loss with respect to pred times g, a
    scalar (mean, sum) or target-shaped (none); x is the prediction."""
    call = gen_nll_loss(g, x)
    if call is None:
        return None
    reduction = call.attrs.get("reduction", "mean")
    tshape = call.args[1].shape
    seed = g.operand(tshape, x.dtype) if reduction == "none" else g.scalar_operand(x.dtype)
    return Call([seed] + call.args, call.attrs, dtype=x.dtype)


def np_nll_loss_backward(a, at):
    seed, pred, target = a[0], a[1], a[2]
    cax = nll_class_axis(pred)
    ncls = pred.shape[cax]
    weights = a[3] if len(a) > 3 else np.ones(ncls)
    counted = target != at["ignore_index"]
    cls = np.where(counted, target, 0)
    coef = -np.where(counted, weights[cls], 0.0) * np.broadcast_to(seed, target.shape)
    if at["reduction"] == "mean":
        coef = coef / np.sum(np.where(counted, weights[cls], 0.0))
    onehot = np.expand_dims(cls, cax) == np.arange(ncls).reshape([-1 if i == cax else 1 for i in range(pred.ndim)])
    return np.where(onehot, np.expand_dims(coef, cax), 0.0)


def t_nll_loss_backward(a, at):
    seed, pred, target = a[0], a[1], a[2]
    cax = nll_class_axis(pred)
    ncls = pred.shape[cax]
    weights = a[3] if len(a) > 3 else torch.ones(ncls, dtype=pred.dtype)
    counted = target != at["ignore_index"]
    cls = torch.where(counted, target, torch.zeros_like(target))
    wt = torch.where(counted, weights[cls], torch.zeros((), dtype=weights.dtype))
    coef = -wt * torch.broadcast_to(seed, tuple(target.shape))
    if at["reduction"] == "mean":
        coef = coef / torch.sum(wt)
    onehot = cls.unsqueeze(cax) == torch.arange(ncls).reshape([-1 if i == cax else 1 for i in range(pred.dim())])
    return torch.where(onehot, coef.unsqueeze(cax), torch.zeros((), dtype=coef.dtype))


def nll_backward_ok(a, at, out, m):
    return nll_ok(a[1:], at, out, m)


def nll_ok(a, at, out, m):
    """"mean" divides by the total weight of the counted targets: keep it away from 0."""
    if at["reduction"] != "mean":
        return True
    counted = a[1] != at["ignore_index"]
    weights = a[2] if len(a) > 2 else np.ones(a[0].shape[nll_class_axis(a[0])])
    return float(np.sum(np.where(counted, weights[np.where(counted, a[1], 0)], 0))) > 0.1


def np_divide(a, at):
    """Float division; for integers TVM's truncating division (towards zero)."""
    if a[0].dtype.kind == "f":
        return a[0] / a[1]
    return np.trunc(a[0] / a[1]).astype(np.int64)


def t_divide(a, at):
    return a[0] / a[1] if a[0].is_floating_point() else torch.div(a[0], a[1], rounding_mode="trunc")


def identity_np(a, at):
    return a[0].copy()


def identity_torch(a, at):
    return a[0]


# ------------------------------------------------------------------------------------------------
# THE TABLE
# ------------------------------------------------------------------------------------------------

REDUCE_ATTRS = ("axis", "keepdims", "exclude")

TABLE = {
    # unary
    "negative": Op(gen_unary, lambda a, at: -a[0], lambda a, at: -a[0], ints=True),
    "abs": Op(gen_unary, lambda a, at: np.abs(a[0]), lambda a, at: torch.abs(a[0]), ok=away_from_zero, ints=True),
    "exp": Op(gen_unary, lambda a, at: np.exp(a[0]), lambda a, at: torch.exp(a[0])),
    "log": Op(gen_positive_unary, lambda a, at: np.log(a[0]), lambda a, at: torch.log(a[0])),
    "sqrt": Op(gen_positive_unary, lambda a, at: np.sqrt(a[0]), lambda a, at: torch.sqrt(a[0])),
    "rsqrt": Op(gen_positive_unary, lambda a, at: 1.0 / np.sqrt(a[0]), lambda a, at: torch.rsqrt(a[0])),
    "sigmoid": Op(gen_unary, lambda a, at: np_sigmoid(a[0]), lambda a, at: torch.sigmoid(a[0])),
    "tanh": Op(gen_unary, lambda a, at: np.tanh(a[0]), lambda a, at: torch.tanh(a[0])),
    "sin": Op(gen_unary, lambda a, at: np.sin(a[0]), lambda a, at: torch.sin(a[0])),
    "cos": Op(gen_unary, lambda a, at: np.cos(a[0]), lambda a, at: torch.cos(a[0])),
    "erf": Op(gen_unary, lambda a, at: np_erf(a[0]), lambda a, at: torch.erf(a[0])),
    "nn.relu": Op(gen_unary, lambda a, at: np.maximum(a[0], 0.0), lambda a, at: torch.relu(a[0]),
                  ok=away_from_zero, ints=True),
    "clip": Op(gen_clip, lambda a, at: np.clip(a[0], at["a_min"], at["a_max"]),
               lambda a, at: torch.clamp(a[0], at["a_min"], at["a_max"]), ("a_min", "a_max"), ok=clip_ok, ints=True),
    "copy": Op(gen_unary, identity_np, lambda a, at: a[0].clone(), ints=True),
    # binary, numpy broadcasting
    "add": Op(gen_binary, lambda a, at: a[0] + a[1], lambda a, at: a[0] + a[1], ints=True),
    "subtract": Op(gen_binary, lambda a, at: a[0] - a[1], lambda a, at: a[0] - a[1], ints=True),
    "multiply": Op(gen_binary, lambda a, at: a[0] * a[1], lambda a, at: a[0] * a[1], ints=True),
    "divide": Op(gen_divide, np_divide, t_divide, ints=True),
    "power": Op(gen_power, lambda a, at: np.power(a[0], a[1]), lambda a, at: torch.pow(a[0], a[1])),
    "maximum": Op(gen_binary, lambda a, at: np.maximum(a[0], a[1]), lambda a, at: torch.maximum(a[0], a[1]),
                  ok=apart, ints=True),
    "minimum": Op(gen_binary, lambda a, at: np.minimum(a[0], a[1]), lambda a, at: torch.minimum(a[0], a[1]),
                  ok=apart, ints=True),
    # comparisons (bool) and selection
    "equal": Op(gen_compare, lambda a, at: a[0] == a[1], lambda a, at: torch.eq(a[0], a[1]), ok=compare_apart,
                ints=True),
    "not_equal": Op(gen_compare, lambda a, at: a[0] != a[1], lambda a, at: torch.ne(a[0], a[1]),
                    ok=compare_apart, ints=True),
    "less": Op(gen_compare, lambda a, at: a[0] < a[1], lambda a, at: torch.lt(a[0], a[1]), ok=compare_apart, ints=True),
    "less_equal": Op(gen_compare, lambda a, at: a[0] <= a[1], lambda a, at: torch.le(a[0], a[1]),
                     ok=compare_apart, ints=True),
    "greater": Op(gen_compare, lambda a, at: a[0] > a[1], lambda a, at: torch.gt(a[0], a[1]), ok=compare_apart,
                  ints=True),
    "greater_equal": Op(gen_compare, lambda a, at: a[0] >= a[1], lambda a, at: torch.ge(a[0], a[1]),
                        ok=compare_apart, ints=True),
    "where": Op(gen_where, lambda a, at: np.where(a[0], a[1], a[2]), lambda a, at: torch.where(a[0], a[1], a[2]),
                ints=True),
    # creation (no gradient)
    "zeros": Op(gen_creation, lambda a, at: np.zeros(at["shape"]),
                lambda a, at: torch.zeros(tuple(at["shape"]), dtype=TORCH_DTYPE[at["dtype"]]), ("shape", "dtype"),
                gradient=False),
    "ones": Op(gen_creation, lambda a, at: np.ones(at["shape"]),
               lambda a, at: torch.ones(tuple(at["shape"]), dtype=TORCH_DTYPE[at["dtype"]]), ("shape", "dtype"),
               gradient=False),
    "full": Op(gen_full, lambda a, at: np.full(at["shape"], a[0]),
               lambda a, at: torch.full(tuple(at["shape"]), float(a[0]), dtype=torch.float64), ("shape", "dtype"),
               gradient=False),
    "zeros_like": Op(gen_unary, lambda a, at: np.zeros_like(a[0]), lambda a, at: torch.zeros_like(a[0]),
                     gradient=False, ints=True),
    "ones_like": Op(gen_unary, lambda a, at: np.ones_like(a[0]), lambda a, at: torch.ones_like(a[0]),
                    gradient=False, ints=True),
    "full_like": Op(gen_full_like, lambda a, at: np.full(a[0].shape, a[1]),
                    lambda a, at: torch.full(tuple(a[0].shape), float(a[1]), dtype=torch.float64),
                    gradient=False, ints=True),
    "cast": Op(gen_cast, lambda a, at: np.trunc(a[0]).astype(np.int64) if at["dtype"] in INT_DTYPES
               and a[0].dtype.kind == "f" else a[0].astype(NUMPY_DTYPE[at["dtype"]]),
               lambda a, at: t_cast(a[0], at["dtype"]), ("dtype",), ok=int_cast_ok, ints=True),
    # reductions
    "sum": Op(gen_reduce, np_reduce(np.sum), t_reduce(torch.sum), REDUCE_ATTRS, ints=True),
    "mean": Op(gen_reduce, np_reduce(np.mean), t_reduce(torch.mean), REDUCE_ATTRS),
    "max": Op(gen_reduce, np_reduce(np.max), t_reduce(torch.amax), REDUCE_ATTRS, ok=no_ties, ints=True),
    "min": Op(gen_reduce, np_reduce(np.min), t_reduce(torch.amin), REDUCE_ATTRS, ok=no_ties, ints=True),
    # shape
    "broadcast_to": Op(gen_broadcast_to, lambda a, at: np.broadcast_to(a[0], at["shape"]).copy(),
                       lambda a, at: torch.broadcast_to(a[0], tuple(at["shape"])), ("shape",), ints=True),
    "collapse_sum_to": Op(gen_collapse_sum_to, lambda a, at: np_collapse_sum(a[0], tuple(at["shape"])),
                          lambda a, at: t_collapse_sum(a[0], tuple(at["shape"])), ("shape",), ints=True),
    "collapse_sum_like": Op(gen_collapse_sum_like, lambda a, at: np_collapse_sum(a[0], a[1].shape),
                            lambda a, at: t_collapse_sum(a[0], tuple(a[1].shape)), ints=True),
    "expand_dims": Op(gen_expand_dims,
                      lambda a, at: a[0].reshape(expand_target(a[0].shape, at["axis"], at["num_newaxis"])),
                      lambda a, at: a[0].reshape(expand_target(tuple(a[0].shape), at["axis"], at["num_newaxis"])),
                      ("axis", "num_newaxis"), ints=True),
    "squeeze": Op(gen_squeeze, lambda a, at: a[0].reshape(squeeze_target(a[0].shape, at["axis"])),
                  lambda a, at: a[0].reshape(squeeze_target(tuple(a[0].shape), at["axis"])), ("axis",), ints=True),
    "nn.batch_flatten": Op(gen_batch_flatten, lambda a, at: a[0].reshape(a[0].shape[0], -1),
                           lambda a, at: a[0].reshape(a[0].shape[0], -1), ints=True),
    "reshape": Op(gen_reshape,
                  lambda a, at: a[0].reshape(reshape_target(a[0].shape, at["newshape"], at["allowzero"])),
                  lambda a, at: a[0].reshape(reshape_target(tuple(a[0].shape), at["newshape"], at["allowzero"])),
                  ("newshape", "allowzero"),
                  ints=True),
    "reverse": Op(gen_reverse, lambda a, at: np.flip(a[0], axis=at["axis"]).copy(),
                  lambda a, at: torch.flip(a[0], dims=(norm_axis(at["axis"], a[0].dim()),)), ("axis",), ints=True),
    "transpose": Op(gen_transpose, lambda a, at: np.transpose(a[0], permutation(at["axes"], a[0].ndim)),
                    lambda a, at: a[0].permute(permutation(at["axes"], a[0].dim())), ("axes",), ints=True),
    # recurrences
    "cumsum": Op(gen_cumsum, lambda a, at: np_cumsum(a[0], at), lambda a, at: t_cumsum(a[0], at),
                 ("axis", "exclusive"), ints=True),
    # linear algebra
    "matmul": Op(gen_matmul, lambda a, at: np.matmul(a[0], a[1]), lambda a, at: torch.matmul(a[0], a[1]), ints=True),
    "nn.dense": Op(gen_dense, lambda a, at: np.matmul(a[0], a[1].T), lambda a, at: torch.matmul(a[0], a[1].T),
                   ("units", "out_dtype"), ints=True),
    "nn.bias_add": Op(gen_bias_add,
                      lambda a, at: a[0] + a[1].reshape(bias_shape(a[0].ndim, at["axis"], a[1].shape[0])),
                      lambda a, at: a[0] + a[1].reshape(bias_shape(a[0].dim(), at["axis"], a[1].shape[0])),
                      ("axis",), ints=True),
    # nn
    "nn.softmax": Op(gen_softmax, lambda a, at: np_softmax(a[0], at["axis"]),
                     lambda a, at: torch.softmax(a[0], dim=at["axis"]), ("axis",)),
    "nn.log_softmax": Op(gen_softmax, lambda a, at: np_log_softmax(a[0], at["axis"]),
                         lambda a, at: torch.log_softmax(a[0], dim=at["axis"]), ("axis",)),
    "nn.nll_loss": Op(gen_nll_loss, np_nll_loss, t_nll_loss, ("reduction", "ignore_index"), ok=nll_ok),
    "grad.nll_loss_backward": Op(gen_nll_loss_backward, np_nll_loss_backward, t_nll_loss_backward,
                                 ("reduction", "ignore_index"), ok=nll_backward_ok),
    # gradient helpers the generator places itself (no_grad on a value, checkpoint segments)
    "grad.no_grad": Op(gen_unary, identity_np, lambda a, at: a[0].detach(), gradient=False, ints=True),
    "grad.start_checkpoint": Op(None, identity_np, identity_torch),
    "grad.end_checkpoint": Op(None, identity_np, identity_torch),
}

# Operators whose generator is not `gen`: the checkpoint markers are placed as whole segments
# (generator.py), never as single calls.
SEGMENT_MARKERS = ("grad.start_checkpoint", "grad.end_checkpoint")

NOT_GENERATED = {
    "grad.nll_loss_weights_backward": "a gradient helper with no gradient of its own: it runs in the "
                                      "adjoint of nn.nll_loss with weights, where the reference gradient "
                                      "checks it",
}


def check_registry(registry):
    """Every registry operator has an entry (or a reason not to be generated), and every entry
    knows all of its operator's attributes. Returns the list of problems (empty when covered)."""
    problems = []
    for op in registry:
        name = op["name"]
        if name in NOT_GENERATED:
            continue
        if name not in TABLE:
            problems.append(f"operator {name} has no reference: add one to test/difftest/operators.py "
                            f"(TABLE), or list it in NOT_GENERATED there with the reason")
            continue
        unknown = {a["name"] for a in op["attributes"]} - TABLE[name].attrs
        if unknown:
            problems.append(f"operator {name} has attributes {sorted(unknown)} that its entry in "
                            f"test/difftest/operators.py does not know: generate and reference them")
    return problems
