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
                 no_grad): the generator does not continue its chain from such a value; for an
                 operator with a tuple result, one flag per field;
  ints           True where the operator takes integer tensors too (SPEC §4): the generator
                 also builds integer chains of those, compared exactly (`ok` does not apply).

An operator with a tuple result (nn.batch_norm, nn.dropout) is called with a projection: `gen`
sets the Call's `field` k (the text is `op(...).k`), numpy and torch return the whole tuple, and
the value is field k. A `gen` may bind operands that are calls of their own
(`g.operand_call`: variance's mean, batch_norm's statistics of the data).

`a` holds the evaluated arguments (numpy arrays or torch tensors; float64 for float values, bool
for bools, int64 for integers), `at` the attributes with the registry's defaults filled in.

NOT_GENERATED lists the registry operators the generator never calls, each with the reason.
An operator in the registry that is in neither fails the tester with a message naming this file,
so every operator added to gradc needs an entry here (see README.md in this directory).
"""
import functools
import math

import numpy as np
import torch

FLOAT_DTYPES = ("float16", "float32", "float64")
INT_DTYPES = ("int32", "int64")


class Call:
    """One generated operator call: arguments (generator Values or Literals, or a list of them
    for a tuple argument) and the attributes written in the text (the rest take defaults); for an
    operator with a tuple result, the field it projects (`op(...).k`)."""

    def __init__(self, args, attrs=None, dtype=None, field=None):
        self.args = args  # Values, Literals or Fields (a tuple argument)
        self.attrs = attrs or {}
        self.dtype = dtype  # the result's dtype when it is not the first float argument's
        self.field = field  # the index k of `op(...).k` for a tuple result, else None


class Fields:
    """A tuple argument of a call (concatenate's, stack's): generator Values, its fields. `data`
    holds their arrays, as a reference receives them: a list."""

    def __init__(self, values):
        self.values = list(values)
        self.dtype = self.values[0].dtype
        self.data = [v.data for v in self.values]


class Op:
    def __init__(self, gen, numpy, torch, attrs=(), ok=None, gradient=True, ints=False):
        self.gen, self.numpy, self.torch = gen, numpy, torch
        self.attrs = frozenset(attrs)
        self.ok = ok
        self.gradient = gradient  # False: the result does not depend differentiably on the operands
        self.ints = ints  # the generator may also call it on int32/int64 values (exact results)

    def has_gradient(self, field=None):
        """`gradient`, or for a tuple result (a tuple of flags, one per field) the projected field's."""
        return self.gradient[field] if isinstance(self.gradient, tuple) else self.gradient


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
    x, axis = scanned(x, at)
    out = np.cumsum(x, axis=axis)
    return out - x if at["exclusive"] else out


def np_cumprod(x, at):
    x, axis = scanned(x, at)
    out = np.cumprod(x, axis=axis)
    if not at["exclusive"] or x.shape[axis] == 0:
        return out
    head = np.ones_like(np.take(out, [0], axis=axis))
    return np.concatenate([head, np.take(out, np.arange(x.shape[axis] - 1), axis=axis)], axis=axis)


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


def scanned(x, at):
    """A cumulative operator's input and axis: the flattened input for axis=None."""
    if at["axis"] is None:
        return x.reshape(-1), 0
    return x, norm_axis(at["axis"], len(x.shape))


def t_cumsum(x, at):
    x, axis = scanned(x, at)
    out = torch.cumsum(x, dim=axis)
    return out - x if at["exclusive"] else out


def t_cumprod(x, at):
    """PyTorch's cumprod (its backward is right at zeros); exclusive: shifted by one, 1 first."""
    x, axis = scanned(x, at)
    out = torch.cumprod(x, dim=axis)
    if not at["exclusive"] or x.shape[axis] == 0:
        return out
    return torch.cat([torch.ones_like(out.narrow(axis, 0, 1)), out.narrow(axis, 0, x.shape[axis] - 1)], axis)


def cumprod_ok(a, at, out, margin):  # long products of values near 1.5 overflow float16
    return bool(np.all(np.abs(np.asarray(out)) < 1e3))


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


def gen_sum_pair(g, x):
    """sum_pair(x, y): a reduction's attributes, y of x's type; either field projected."""
    call = gen_reduce(g, x)
    return Call([x, g.operand(x.shape, x.dtype)], call.attrs, field=int(g.rng.integers(0, 2)))


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
# convolution, pooling, normalisation, padding (NCHW, float only)
# ------------------------------------------------------------------------------------------------


def pair(v):
    """A 1-or-2-value attribute (strides, dilation, pool_size, output_padding, output_size) as
    (H, W)."""
    if isinstance(v, int):
        return v, v
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def pad4(v):
    """padding as (top, left, bottom, right): 1 value (all sides), 2 (H, W: both sides) or 4."""
    if isinstance(v, int):
        v = [v]
    if len(v) == 1:
        return (v[0],) * 4
    if len(v) == 2:
        return v[0], v[1], v[0], v[1]
    return tuple(v)


def conv_extent(size, k, stride, dilation, before, after):
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1


def conv_transpose_extent(size, k, stride, dilation, before, after, output_padding):
    return (size - 1) * stride - before - after + dilation * (k - 1) + output_padding + 1


def pool_extent(size, k, stride, dilation, before, after, ceil_mode):
    """PyTorch's rule: floor (or ceil) of the windows' span over the stride, plus one; in ceil
    mode, a last window that starts at or past size + before (in the padding after) is dropped."""
    span = size + before + after - dilation * (k - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + before:
        out -= 1
    return out


def conv_geometry(at, kh, kw):
    """((sh, sw), (dh, dw), (top, left, bottom, right)) of a convolution or pool."""
    return pair(at["strides"]), pair(at["dilation"]), pad4(at["padding"])


def tap_slice(i, dilation, out, stride):
    """The rows of tap i of every window, in a padded array whose row 0 is the first window's."""
    return slice(i * dilation, i * dilation + (out - 1) * stride + 1, stride)


def np_conv2d(a, at):
    """Zero-pad, then correlate: out[n, o] = Σ_c Σ_taps x[n, g·C/G + c] · w[o, c], per group."""
    x, w = a[0], a[1]
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, *w.shape[2:])
    groups = at["groups"]
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    n, c, hp, wp = xp.shape
    o, cg, kh, kw = w.shape
    oh, ow = conv_extent(hp, kh, sh, dh, 0, 0), conv_extent(wp, kw, sw, dw, 0, 0)
    xg = xp.reshape(n, groups, cg, hp, wp)
    wg = w.reshape(groups, o // groups, cg, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow))
    for i in range(kh):
        for j in range(kw):
            win = xg[:, :, :, tap_slice(i, dh, oh, sh), tap_slice(j, dw, ow, sw)]
            out += np.einsum("ngchw,goc->ngohw", win, wg[:, :, :, i, j])
    return out.reshape(n, o, oh, ow)


def t_conv2d(a, at):
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, *a[1].shape[2:])
    return torch.nn.functional.conv2d(torch.nn.functional.pad(a[0], (l, r, t, b)), a[1], stride=(sh, sw),
                                      dilation=(dh, dw), groups=at["groups"])


def np_conv2d_transpose(a, at):
    """Every input element scatters x · w over its window of the full output ((H - 1)·s +
    d·(KH - 1) + 1 rows), zeros after it for output_padding; the output is the full one cropped
    by the padding: rows [top, top + OH)."""
    x, w = a[0], a[1]
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, *w.shape[2:])
    oph, opw = pair(at["output_padding"])
    groups = at["groups"]
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // groups
    full_h, full_w = (h - 1) * sh + dh * (kh - 1) + 1, (wd - 1) * sw + dw * (kw - 1) + 1
    full = np.zeros((n, groups, og, full_h + oph, full_w + opw))
    xg = x.reshape(n, groups, cg, h, wd)
    wg = w.reshape(groups, cg, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            full[:, :, :, tap_slice(i, dh, h, sh), tap_slice(j, dw, wd, sw)] += \
                np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
    oh = conv_transpose_extent(h, kh, sh, dh, t, b, oph)
    ow = conv_transpose_extent(wd, kw, sw, dw, l, r, opw)
    return full[:, :, :, t:t + oh, l:l + ow].reshape(n, groups * og, oh, ow)


def t_conv2d_transpose(a, at):
    x, w = a[0], a[1]
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, *w.shape[2:])
    oph, opw = pair(at["output_padding"])
    kh, kw = w.shape[2:]
    oh = conv_transpose_extent(x.shape[2], kh, sh, dh, t, b, oph)
    ow = conv_transpose_extent(x.shape[3], kw, sw, dw, l, r, opw)
    full = torch.nn.functional.conv_transpose2d(x, w, stride=(sh, sw), dilation=(dh, dw), groups=at["groups"])
    full = torch.nn.functional.pad(full, (0, opw, 0, oph))
    return full[:, :, t:t + oh, l:l + ow]


def pool_taps(x, at, fill):
    """Every window's taps, (N, C, OH, OW, KH·KW), `fill` where a tap lies outside the data."""
    kh, kw = pair(at["pool_size"])
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, kh, kw)
    n, c, h, w = x.shape
    oh = pool_extent(h, kh, sh, dh, t, b, at["ceil_mode"])
    ow = pool_extent(w, kw, sw, dw, l, r, at["ceil_mode"])
    hp = max((oh - 1) * sh + dh * (kh - 1) + 1, t + h)
    wp = max((ow - 1) * sw + dw * (kw - 1) + 1, l + w)
    xp = np.full((n, c, hp, wp), fill)
    xp[:, :, t:t + h, l:l + w] = x
    return np.stack([xp[:, :, tap_slice(i, dh, oh, sh), tap_slice(j, dw, ow, sw)]
                     for i in range(kh) for j in range(kw)], axis=-1)


def pool_divisor(size, out, k, stride, dilation, before, after, include_pad):
    """Per output row: the taps of its window inside the data, or inside the padded data."""
    start = np.arange(out)[:, None] * stride - before + np.arange(k)[None, :] * dilation
    lo, hi = (-before, size + after) if include_pad else (0, size)
    return np.sum((start >= lo) & (start < hi), axis=1)


def np_max_pool2d(a, at):
    return np.max(pool_taps(a[0], at, -np.inf), axis=-1)


def np_avg_pool2d(a, at):
    kh, kw = pair(at["pool_size"])
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, kh, kw)
    total = np.sum(pool_taps(a[0], at, 0.0), axis=-1)
    oh, ow = total.shape[2:]
    inc = at["count_include_pad"]
    div = np.multiply.outer(pool_divisor(a[0].shape[2], oh, kh, sh, dh, t, b, inc),
                            pool_divisor(a[0].shape[3], ow, kw, sw, dw, l, r, inc))
    return total / np.maximum(div, 1)


def t_max_pool2d(a, at):
    """torch's max_pool2d; asymmetric padding written as -inf rows and columns (F.pad), cut or
    extended to exactly the rows the windows span."""
    x = a[0]
    kh, kw = pair(at["pool_size"])
    (sh, sw), (dh, dw), (t, l, b, r) = conv_geometry(at, kh, kw)
    if t == b and l == r:
        return torch.nn.functional.max_pool2d(x, (kh, kw), (sh, sw), (t, l), (dh, dw), ceil_mode=at["ceil_mode"])
    h, w = x.shape[2:]
    oh = pool_extent(h, kh, sh, dh, t, b, at["ceil_mode"])
    ow = pool_extent(w, kw, sw, dw, l, r, at["ceil_mode"])
    hp, wp = (oh - 1) * sh + dh * (kh - 1) + 1, (ow - 1) * sw + dw * (kw - 1) + 1
    xp = torch.nn.functional.pad(x, (l, wp - l - w, t, hp - t - h), value=-math.inf)
    return torch.nn.functional.max_pool2d(xp, (kh, kw), (sh, sw), 0, (dh, dw))


def t_avg_pool2d(a, at):
    """torch's avg_pool2d (the generator draws symmetric padding and dilation 1 for it)."""
    kh, kw = pair(at["pool_size"])
    (sh, sw), _, (t, l, _, _) = conv_geometry(at, kh, kw)
    return torch.nn.functional.avg_pool2d(a[0], (kh, kw), (sh, sw), (t, l), ceil_mode=at["ceil_mode"],
                                          count_include_pad=at["count_include_pad"])


def top_two_apart(groups, m):
    """The two largest elements of every row of `groups` differ by more than m (relative)."""
    if groups.size == 0 or groups.shape[1] < 2:
        return True
    s = np.sort(groups, axis=1)
    return bool(np.all(s[:, -1] - s[:, -2] > _scaled(m, s[:, -1])))


def max_pool_ok(a, at, out, m):
    taps = pool_taps(a[0], at, -np.inf)
    return top_two_apart(taps.reshape(-1, taps.shape[-1]), m)


def global_max_ok(a, at, out, m):
    x = a[0]
    # (an empty plane count reshapes to (0, -1) only with the plane's size spelled out)
    return top_two_apart(x.reshape(x.shape[0] * x.shape[1], int(np.prod(x.shape[2:]))), m)


def adaptive_size(x_shape, at):
    return tuple(x_shape[2:]) if at["output_size"] is None else pair(at["output_size"])


def adaptive_matrix(size, out):
    """(out, size): row i averages [⌊i·size/out⌋, ⌈(i+1)·size/out⌉)."""
    m = np.zeros((out, size))
    for i in range(out):
        lo, hi = (i * size) // out, -((-(i + 1) * size) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return m


def np_adaptive_avg_pool2d(a, at):
    x = a[0]
    oh, ow = adaptive_size(x.shape, at)
    return adaptive_matrix(x.shape[2], oh) @ x @ adaptive_matrix(x.shape[3], ow).T


def np_variance(a, at):
    x = a[0]
    ax = reduce_axes(at["axis"], x.ndim, at["exclude"])
    mean = a[1] if len(a) > 1 else np.mean(x, axis=ax, keepdims=True)
    n = math.prod(x.shape[i] for i in ax)
    if n - int(at["unbiased"]) <= 0:  # fewer elements than degrees of freedom: no variance
        raise ValueError("variance of %d elements, unbiased=%s" % (n, at["unbiased"]))
    return np.sum((x - mean) ** 2, axis=ax, keepdims=at["keepdims"]) / (n - int(at["unbiased"]))


def t_variance(a, at):
    x = a[0]
    ax = reduce_axes(at["axis"], x.dim(), at["exclude"])
    if not ax:  # nothing reduced: (x - mean)² / (1 - unbiased)
        return (x - (a[1] if len(a) > 1 else x)) ** 2 / (1 - int(at["unbiased"]))
    if len(a) == 1:
        return torch.var(x, dim=ax, unbiased=at["unbiased"], keepdim=at["keepdims"])
    n = math.prod(x.shape[i] for i in ax)
    return torch.sum((x - a[1]) ** 2, dim=ax, keepdim=at["keepdims"]) / (n - int(at["unbiased"]))


def np_pad(a, at):
    """out[i] = x[i - before] where that is inside x, else the pad value (a negative width crops)."""
    x = a[0]
    value = a[1] if len(a) > 1 else at["pad_value"]
    widths = at["pad_width"]
    out = np.full([d + b + e for d, (b, e) in zip(x.shape, widths)], value, dtype=np.float64)
    src = tuple(slice(max(-b, 0), d - max(-e, 0)) for d, (b, e) in zip(x.shape, widths))
    dst = tuple(slice(max(b, 0), max(b, 0) + s.stop - s.start) for s, (b, e) in zip(src, widths))
    out[dst] = x[src]
    return out


def t_pad(a, at):
    """Per axis: the crops (narrow; the generator keeps them within the axis), then the value
    concatenated before and after (differentiable in the value when it is an operand; F.pad
    refuses empty results)."""
    x = a[0]
    value = a[1] if len(a) > 1 else torch.tensor(float(at["pad_value"]), dtype=x.dtype)
    for axis, (b, e) in enumerate(at["pad_width"]):
        x = x.narrow(axis, max(-b, 0), x.shape[axis] - max(-b, 0) - max(-e, 0))
        side = lambda n: value.to(x.dtype).expand(x.shape[:axis] + (n,) + x.shape[axis + 1:])  # noqa: E731
        x = torch.cat([side(max(b, 0)), x, side(max(e, 0))], dim=axis)
    return x


def channel_vector(v, x_dim, axis):
    return v.reshape(bias_shape(x_dim, axis, v.shape[0]))


def np_batch_norm(a, at):
    x, gamma, beta, mean, var = a
    along = lambda v: channel_vector(v, x.ndim, at["axis"])  # noqa: E731
    out = (x - along(mean)) / np.sqrt(along(var) + at["epsilon"])
    if at["scale"]:
        out = out * along(gamma)
    if at["center"]:
        out = out + along(beta)
    return out, mean.copy(), var.copy()


def t_batch_norm(a, at):
    x, gamma, beta, mean, var = a
    along = lambda v: channel_vector(v, x.dim(), at["axis"])  # noqa: E731
    out = (x - along(mean)) * torch.rsqrt(along(var) + at["epsilon"])
    if at["scale"]:
        out = out * along(gamma)
    if at["center"]:
        out = out + along(beta)
    return out, mean, var


def batch_norm_ok(a, at, out, m):
    """var + epsilon away from 0, where rsqrt has its pole (a variance of few equal elements)."""
    return bool(np.all(a[4] + at["epsilon"] > 0.01))


def prelu_np(a, at):
    return np.where(a[0] > 0, a[0], channel_vector(a[1], a[0].ndim, at["axis"]) * a[0])


def prelu_torch(a, at):
    return torch.where(a[0] > 0, a[0], channel_vector(a[1], a[0].dim(), at["axis"]) * a[0])


# -- their generators ----------------------------------------------------------------------------


def nchw_shape(g):
    """A small (N, C, H, W): N of 1-3 (0 sometimes in a program with empty tensors), C of 1-8."""
    for _ in range(20):
        n = 0 if g.empty and g.rng.random() < 0.2 else int(g.rng.choice([1, 2, 3]))
        s = (n, int(g.rng.choice([1, 2, 3, 4, 6, 8])), g.dim(), g.dim())
        if min(s[1:]) >= 1 and math.prod(s) <= g.max_elements:
            return s
    return 1, 2, 5, 7


def nchw_operand(g, x):
    """x if it is an NCHW tensor (rank 4, C, H and W not empty), else another one of x's dtype
    or a new parameter: every NCHW operator applies whatever the chain offers."""
    fits = lambda v: v.dtype == x.dtype and len(v.shape) == 4 and min(v.shape[1:]) >= 1  # noqa: E731
    if fits(x) and g.rng.random() < 0.9:
        return x
    return g.pick(fits) or g.param(nchw_shape(g), x.dtype)


def pair_text(g, h, w):
    """(h, w) as written: [h, w], or when equal sometimes one value (`v` or `[v]`)."""
    if h == w and g.rng.random() < 0.5:
        return h if g.rng.random() < 0.5 else [h]
    return [h, w]


def pad_text(g, t, l, b, r):
    """padding as written: 1 value when all sides are equal, 2 (H, W) when symmetric, or 4."""
    if t == l == b == r and g.rng.random() < 0.5:
        return t if g.rng.random() < 0.5 else [t]
    if t == b and l == r and g.rng.random() < 0.6:
        return [t, l]
    return [t, l, b, r]


def put_pair(g, attrs, name, hw, default):
    if hw != default or g.rng.random() < 0.2:
        attrs[name] = pair_text(g, *hw)


def put_layouts(g, attrs, layouts):
    """The layout attributes (each has one valid value) and out_layout, written now and then."""
    for name, value in layouts.items():
        if g.rng.random() < 0.15:
            attrs[name] = value
    if g.rng.random() < 0.15:
        attrs["out_layout"] = str(g.rng.choice(["", "NCHW"]))


def draw_window(g, size, k_choices, max_stride, dilations, pad_max):
    """A kernel extent, stride, dilation and (before, after) padding along one axis whose
    windows fit (the padded size holds one dilated window); None after a few tries."""
    for _ in range(10):
        k = int(g.rng.choice(k_choices))
        s = int(g.rng.integers(1, max_stride + 1)) if g.rng.random() < 0.5 else 1
        d = int(g.rng.choice(dilations)) if g.rng.random() < 0.3 else 1
        before = int(g.rng.integers(0, pad_max(k) + 1)) if g.rng.random() < 0.5 else 0
        after = before if g.rng.random() < 0.6 else int(g.rng.integers(0, pad_max(k) + 1))
        if size + before + after >= d * (k - 1) + 1:
            return k, s, d, before, after
    return None


def gen_conv2d(g, x, transpose=False):
    """conv2d: data (N, C, H, W), weight (O, C/G, KH, KW); conv2d_transpose: weight (C, O/G, KH, KW)
    and output_padding < strides. Groups divide C (1, C for depthwise, or another divisor)."""
    x = nchw_operand(g, x)
    n, c, h, w = x.shape
    divisors = [d for d in range(1, c + 1) if c % d == 0]
    r = g.rng.random()
    groups = 1 if r < 0.5 else c if r < 0.75 else int(g.rng.choice(divisors))
    per_group = int(g.rng.choice([1, 2, 3])) if groups > 1 else int(g.rng.choice([1, 2, 3, 5, 8]))
    axes = [draw_window(g, size, [1, 2, 3, 3, 5], 3, [2, 3], lambda k: k) for size in (h, w)]
    if None in axes:
        return None
    (kh, sh, dh, t, b), (kw, sw, dw, l, r) = axes
    attrs = {}
    put_pair(g, attrs, "strides", (sh, sw), (1, 1))
    if (t, l, b, r) != (0, 0, 0, 0) or g.rng.random() < 0.2:
        attrs["padding"] = pad_text(g, t, l, b, r)
    put_pair(g, attrs, "dilation", (dh, dw), (1, 1))
    if groups != 1 or g.rng.random() < 0.2:
        attrs["groups"] = groups
    if transpose:
        oph = int(g.rng.integers(0, sh)) if g.rng.random() < 0.5 else 0
        opw = int(g.rng.integers(0, sw)) if g.rng.random() < 0.5 else 0
        if conv_transpose_extent(h, kh, sh, dh, t, b, oph) < 1 or conv_transpose_extent(w, kw, sw, dw, l, r, opw) < 1:
            return None
        put_pair(g, attrs, "output_padding", (oph, opw), (0, 0))
        weight = g.operand((c, per_group, kh, kw), x.dtype)
    else:
        weight = g.operand((groups * per_group, c // groups, kh, kw), x.dtype)
    if g.rng.random() < 0.2:
        attrs["channels"] = groups * per_group
    if g.rng.random() < 0.2:
        attrs["kernel_size"] = pair_text(g, kh, kw)
    put_layouts(g, attrs, {"data_layout": "NCHW", "kernel_layout": "IOHW" if transpose else "OIHW"})
    if g.rng.random() < 0.1:
        attrs["out_dtype"] = str(g.rng.choice(["", x.dtype]))
    return Call([x, weight], attrs)


def gen_pool(g, x, avg=False):
    """max: padding of at most half the window per side (PyTorch's bound; asymmetric sometimes),
    dilation 1-2; avg: symmetric padding and dilation 1 (torch's avg_pool2d is the reference).
    ceil_mode sometimes; every window then still starts inside the data or its padding before."""
    x = nchw_operand(g, x)
    axes = [draw_window(g, size, [1, 2, 2, 3, 3, 4, 5], 3, [1] if avg else [2], lambda k: k // 2)
            for size in x.shape[2:]]
    if None in axes:
        return None
    (kh, sh, dh, t, b), (kw, sw, dw, l, r) = axes
    if avg:
        b, r = t, l
    if g.rng.random() < 0.3:  # the usual pooling: strides = the window
        sh, sw = kh, kw
    ceil_mode = bool(g.rng.random() < 0.3)
    if min(pool_extent(x.shape[2], kh, sh, dh, t, b, ceil_mode),
           pool_extent(x.shape[3], kw, sw, dw, l, r, ceil_mode)) < 1:
        return None
    attrs = {"pool_size": pair_text(g, kh, kw)}
    put_pair(g, attrs, "strides", (sh, sw), (1, 1))
    put_pair(g, attrs, "dilation", (dh, dw), (1, 1))
    if (t, l, b, r) != (0, 0, 0, 0) or g.rng.random() < 0.2:
        attrs["padding"] = pad_text(g, t, l, b, r)
    if ceil_mode or g.rng.random() < 0.2:
        attrs["ceil_mode"] = ceil_mode
    if avg and g.rng.random() < 0.6:
        attrs["count_include_pad"] = bool(g.rng.random() < 0.5)
    put_layouts(g, attrs, {"layout": "NCHW"})
    return Call([x], attrs)


def gen_global_pool(g, x):
    attrs = {}
    put_layouts(g, attrs, {"layout": "NCHW"})
    return Call([nchw_operand(g, x)], attrs)


def gen_adaptive_avg_pool2d(g, x):
    """output_size: None (the input's), one value, or (OH, OW), each up to 2 more than the input's."""
    x = nchw_operand(g, x)
    h, w = x.shape[2:]
    oh, ow = int(g.rng.integers(1, h + 3)), int(g.rng.integers(1, w + 3))
    attrs = {}
    r = g.rng.random()
    if r < 0.6:
        attrs["output_size"] = [oh, ow]
    elif r < 0.8:
        attrs["output_size"] = oh if g.rng.random() < 0.5 else [oh]
    elif r < 0.9:
        attrs["output_size"] = None
    put_layouts(g, attrs, {"layout": "NCHW"})
    return Call([x], attrs)


def gen_variance(g, x):
    """The axes of a reduction, unbiased sometimes, and sometimes the mean as an operand:
    mean(x, axis, keepdims=True) bound as a call of its own."""
    call = gen_reduce(g, x)
    if g.rng.random() < 0.5:
        call.attrs["unbiased"] = bool(g.rng.random() < 0.6)
    if g.rng.random() < 0.4:
        mean_attrs = {k: v for k, v in call.attrs.items() if k in ("axis", "exclude")}
        call.args.append(g.operand_call("mean", Call([x], {**mean_attrs, "keepdims": True})))
    return call


def gen_pad(g, x):
    """[before, after] per axis in [-2, 3] (crops of at most the axis), the value as an attribute,
    as a scalar operand (a literal, a 0-d value), or left to the default 0."""
    widths = []
    for d in x.shape:
        before, after = (int(v) for v in g.rng.integers(-2, 4, 2))
        if -min(before, 0) - min(after, 0) > d:
            before, after = max(before, 0), max(after, 0)
        widths.append([before, after])
    attrs = {"pad_width": widths}
    args = [x]
    r = g.rng.random()
    if r < 0.35:
        args.append(g.scalar_operand(x.dtype))
    elif r < 0.7:
        attrs["pad_value"] = round(float(g.rng.uniform(-2, 2)), 2)
    if g.rng.random() < 0.15:
        attrs["pad_mode"] = "constant"
    return Call(args, attrs)


def gen_leaky_relu(g, x):
    if g.rng.random() < 0.3:
        return Call([x])
    return Call([x], {"alpha": float(g.rng.choice([0.01, 0.1, 0.2, 0.3, 0.5, 1.5, -0.25]))})


def gen_batch_norm(g, x):
    """Field 0 mostly (the statistics, fields 1 and 2, pass through); the statistics are
    operands (the variance positive) or, a third of the time, the data's own: mean and variance
    over every axis but the channel's (training mode)."""
    r = len(x.shape)
    if r == 0:
        return None
    axis = int(g.rng.integers(-r, r))
    c = x.shape[norm_axis(axis, r)]
    attrs = {"axis": axis} if axis != 1 or g.rng.random() < 0.5 else {}
    if g.rng.random() < 0.5:
        attrs["epsilon"] = float(g.rng.choice([1e-5, 1e-3, 0.01, 0.1]))
    for name in ("center", "scale"):
        if g.rng.random() < 0.3:
            attrs[name] = bool(g.rng.random() < 0.5)
    gamma, beta = g.operand((c,), x.dtype), g.operand((c,), x.dtype)
    if g.rng.random() < 0.3:
        mean = g.operand_call("mean", Call([x], {"axis": [axis], "exclude": True}))
        var = g.operand_call("variance", Call([x], {"axis": [axis], "exclude": True}))
    else:
        mean, var = g.operand((c,), x.dtype), g.operand((c,), x.dtype, positive=True)
    field = 0 if g.rng.random() < 0.8 else int(g.rng.integers(1, 3))
    return Call([x, gamma, beta, mean, var], attrs, field=field)


def gen_dropout(g, x):
    attrs = {"rate": round(float(g.rng.uniform(0, 0.9)), 2)} if g.rng.random() < 0.5 else {}
    return Call([x], attrs, field=0 if g.rng.random() < 0.75 else 1)


def split_parts(n, ios):
    """split's parts along an axis of size n as (begin, end): sections, or numpy's indices."""
    if isinstance(ios, int):
        return [(i * (n // ios), (i + 1) * (n // ios)) for i in range(ios)]
    parts, begin = [], 0
    for i in ios:
        end = min(max(i + n if i < 0 else i, 0), n)
        parts.append((begin, max(begin, end)))
        begin = end
    return parts + [(begin, max(begin, n))]


def np_split(a, at):
    axis = norm_axis(at["axis"], a[0].ndim)
    n = a[0].shape[axis]
    return tuple(np.take(a[0], np.arange(b, e), axis=axis) for b, e in split_parts(n, at["indices_or_sections"]))


def t_split(a, at):
    axis = norm_axis(at["axis"], a[0].dim())
    return tuple(a[0].narrow(axis, b, e - b) for b, e in split_parts(a[0].shape[axis], at["indices_or_sections"]))


def slice_index_lists(shape, at):
    """Per axis, the input indices strided_slice reads (python's slice semantics = numpy's)."""
    lists = [list(range(n)) for n in shape]
    begin, end = at["begin"], at["end"]
    axes = at["axes"] if at["axes"] is not None else list(range(len(begin)))
    strides = at["strides"] or [1]
    for j, ax in enumerate(axes):
        ax = norm_axis(ax, len(shape))
        n = shape[ax]
        step = 1 if at["slice_mode"] == "size" else strides[0] if len(strides) == 1 else (
            strides[j] if j < len(strides) else 1)
        b, e = begin[j], end[j]
        if at["slice_mode"] == "size":
            e = n if e < 0 else (b + n if b < 0 else b) + e
        lists[ax] = list(range(*slice(b, e, step).indices(n)))
    return lists


def np_strided_slice(a, at):
    out = a[0]
    for ax, idx in enumerate(slice_index_lists(a[0].shape, at)):
        out = np.take(out, np.array(idx, dtype=np.int64), axis=ax)
    return out


def t_strided_slice(a, at):
    out = a[0]
    for ax, idx in enumerate(slice_index_lists(tuple(a[0].shape), at)):
        out = out.index_select(ax, torch.tensor(idx, dtype=torch.int64))
    return out


def gen_split(g, x):
    """Sections that divide the axis, or index lists (ascending, or not: numpy's empty and
    overlapping parts); a projection of one part."""
    r = len(x.shape)
    if r == 0:
        return None
    axis = int(g.rng.integers(-r, r))
    n = x.shape[norm_axis(axis, r)]
    if g.rng.random() < 0.4 and n > 0:
        ios = int(g.rng.choice([k for k in range(1, n + 1) if n % k == 0]))
    else:
        ios = sorted(int(i) for i in g.rng.integers(-n - 1, n + 2, int(g.rng.integers(0, 4))))
        if g.rng.random() < 0.25:
            ios = ios[::-1]
    parts = len(split_parts(n, ios))
    attrs = {"indices_or_sections": ios}
    if axis != 0 or g.rng.random() < 0.5:
        attrs["axis"] = axis
    return Call([x], attrs, field=int(g.rng.integers(0, parts)))


def gen_strided_slice(g, x):
    """begin/end anywhere in [-n - 2, n + 2] (numpy clips them), steps in ±[1, 3], a subset of
    the axes named or the leading ones, sometimes slice_mode="size"."""
    r = len(x.shape)
    if r == 0:
        return None
    if g.rng.random() < 0.5:
        axes = [int(a) for a in g.rng.permutation(r)[:int(g.rng.integers(1, r + 1))]]
        named = [a - r if g.rng.random() < 0.3 else a for a in axes]
    else:
        axes, named = list(range(int(g.rng.integers(1, r + 1)))), None
    begin, end, strides = [], [], []
    size_mode = g.rng.random() < 0.2
    for a in axes:
        n = x.shape[a]
        begin.append(int(g.rng.integers(-n - 2, n + 3)))
        end.append(int(g.rng.integers(-1, n + 1)) if size_mode else int(g.rng.integers(-n - 2, n + 3)))
        strides.append(int(g.rng.choice([1, 2, 3, -1, -2, -3])))
    attrs = {"begin": begin, "end": end}
    if named is not None:
        attrs["axes"] = named
    if size_mode:
        attrs["slice_mode"] = "size"
    elif g.rng.random() < 0.8:
        attrs["strides"] = strides if g.rng.random() < 0.8 else strides[:1]
    return Call([x], attrs)


def take_parts(x, ind, at):
    """take's data (flattened for axis=None), axis and the indices brought into range by the mode."""
    axis = at["axis"]
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = norm_axis(axis, x.ndim)
    n = x.shape[axis]
    return x, axis, (ind % n) if at["mode"] == "wrap" else ind.clip(0, n - 1)


def np_take(a, at):
    x, axis, ind = take_parts(a[0], a[1], at)
    return np.take(x, ind, axis=axis)


def t_take(a, at):
    x, axis, ind = take_parts(a[0], a[1], at)
    picked = torch.index_select(x, axis, ind.reshape(-1))
    return picked.reshape(tuple(x.shape[:axis]) + tuple(ind.shape) + tuple(x.shape[axis + 1:]))


def gen_take(g, x):
    """An embedding-style lookup: integer indices (int32 or int64, repeated, and out of range
    for clip and wrap) along an axis or into the flattened data."""
    r = len(x.shape)
    if r == 0 or 0 in x.shape:
        return None
    attrs = {}
    axis = None
    if g.rng.random() < 0.75:
        axis = int(g.rng.integers(-r, r))
        attrs["axis"] = axis
    n = math.prod(x.shape) if axis is None else x.shape[norm_axis(axis, r)]
    mode = str(g.rng.choice(["clip", "wrap", "fast"]))
    if mode != "clip" or g.rng.random() < 0.5:
        attrs["mode"] = mode
    low, high = (0, n) if mode == "fast" else (-n - 2, 2 * n + 2)
    ind = g.int_param(g.shape(int(g.rng.integers(0, 3))), str(g.rng.choice(INT_DTYPES)), high, low)
    return Call([x, ind], attrs)


def gen_gelu(g, x):
    return Call([x], {"approximate": str(g.rng.choice(["none", "tanh"]))} if g.rng.random() < 0.5 else {})


def gen_softplus(g, x):
    attrs = {}
    if g.rng.random() < 0.5:
        attrs["beta"] = float(g.rng.choice([0.5, 1.0, 2.0, 3.0]))
    if g.rng.random() < 0.5:
        attrs["threshold"] = float(g.rng.choice([0.5, 1.0, 5.0, 20.0]))
    return Call([x], attrs)


def softplus_ok(a, at, out, margin):  # away from the threshold's switch
    return not np.any(np.abs(a[0] * at["beta"] - at["threshold"]) < margin * 10)


def gen_annotation(g, x, names):
    attrs = {}
    for name in names:
        if g.rng.random() < 0.4:
            attrs[name] = bool(g.rng.random() < 0.5) if name.startswith(("is_", "constrain")) else int(g.rng.integers(0, 3))
    return Call([x], attrs)


def norm_params(g, x, axis):
    c = x.shape[norm_axis(axis, len(x.shape))]
    return g.operand((c,), x.dtype), g.operand((c,), x.dtype)


def draw_norm_attrs(g, attrs):
    """epsilon, center and scale, each given sometimes."""
    if g.rng.random() < 0.4:
        attrs["epsilon"] = float(g.rng.choice([1e-5, 1e-3, 0.1]))
    for name in ("center", "scale"):
        if g.rng.random() < 0.25:
            attrs[name] = bool(g.rng.random() < 0.5)
    return attrs


def gen_layer_norm(g, x):
    """Not in float16: the gradient of a normalisation sums to zero along each group, and in float16
    that cancellation leaves the second order (and sums of the first) mostly rounding, beyond the
    tester's error model; float32 and float64 are checked."""
    r = len(x.shape)
    if r == 0 or x.shape[-1] == 0 or x.dtype == "float16":
        return None
    axis = -1 if g.rng.random() < 0.6 else int(g.rng.integers(-r, r))
    if x.shape[norm_axis(axis, r)] < 2:
        return None
    gamma, beta = norm_params(g, x, axis)
    attrs = {"axis": axis} if axis != -1 or g.rng.random() < 0.3 else {}
    return Call([x, gamma, beta], draw_norm_attrs(g, attrs))


def gen_group_norm(g, x):
    """Not in float16 (see gen_layer_norm)."""
    r = len(x.shape)
    if r < 2 or x.dtype == "float16":
        return None
    axis = 1 if g.rng.random() < 0.7 else int(g.rng.integers(-r, r))
    c = x.shape[norm_axis(axis, r)]
    if c == 0:
        return None
    groups = int(g.rng.choice([k for k in range(1, c + 1) if c % k == 0]))
    if math.prod(x.shape[norm_axis(axis, r) + 1:]) * (c // groups) < 2:
        return None
    gamma, beta = norm_params(g, x, axis)
    attrs = {"num_groups": groups}
    if axis != 1 or g.rng.random() < 0.3:
        attrs["axis"] = axis
    return Call([x, gamma, beta], draw_norm_attrs(g, attrs))


def np_norm(x, axes, eps):
    m = x.mean(axis=axes, keepdims=True)
    return (x - m) / np.sqrt(((x - m) ** 2).mean(axis=axes, keepdims=True) + eps)


def t_norm(x, axes, eps):
    m = x.mean(dim=axes, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(dim=axes, keepdim=True) + eps)


def affine_ref(y, gamma, beta, axis, at):
    along = [1] * y.ndim
    along[axis] = -1
    if at["scale"]:
        y = y * gamma.reshape(along)
    if at["center"]:
        y = y + beta.reshape(along)
    return y


def layer_norm_ref(norm):
    def run(a, at):
        axis = norm_axis(at["axis"], a[0].ndim)
        return affine_ref(norm(a[0], (axis,), at["epsilon"]), a[1], a[2], axis, at)
    return run


def group_norm_ref(norm):
    def run(a, at):
        x = a[0]
        axis = norm_axis(at["axis"], x.ndim)
        k = at["num_groups"]
        shape = tuple(x.shape[:axis]) + (k, x.shape[axis] // k) + tuple(x.shape[axis + 1:])
        y = norm(x.reshape(shape), tuple(range(axis + 1, len(shape))), at["epsilon"]).reshape(tuple(x.shape))
        return affine_ref(y, a[1], a[2], axis, at)
    return run


def norm_groups(x, at):
    """The normalised groups of layer_norm (the axis) or group_norm (a group's channels and the
    axes after them), as rows of a 2-D array."""
    axis = norm_axis(at["axis"], x.ndim)
    if "num_groups" in at:
        lead = math.prod(x.shape[:axis]) * at["num_groups"]
        return x.reshape(lead, x.size // lead if lead else 0)
    return np.moveaxis(x, axis, -1).reshape(math.prod(x.shape) // max(1, x.shape[axis]), x.shape[axis])


def norm_ok(a, at, out, margin):
    """Groups of at least 4 values that are not nearly constant: with 2 the normalised values are
    ±1 whatever the data, and the gradients (second order most) are all cancellation, which float16
    cannot resolve; a near-constant group divides by its tiny deviation."""
    rows = norm_groups(np.asarray(a[0], dtype=np.float64), at)
    return rows.shape[1] >= 4 and (rows.size == 0 or float(rows.std(axis=1).min()) > 0.2)


def np_std(a, at):
    return np.sqrt(np_variance(a, at))


def t_std(a, at):
    return torch.sqrt(t_variance(a, at))


def std_ok(a, at, out, margin):  # sqrt's kink at a zero variance
    return bool(np.all(np.asarray(out) > 1e-2))


def np_logsumexp(a, at):
    x = a[0]
    ax = reduce_axes(at["axis"], x.ndim, at["exclude"])
    m = np.max(x, axis=ax, keepdims=True) if ax and x.size else np.zeros([1] * x.ndim)
    r = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return r if at["keepdims"] else np.squeeze(r, axis=ax)


def t_logsumexp(a, at):
    ax = reduce_axes(at["axis"], a[0].dim(), at["exclude"])
    return a[0] if not ax else torch.logsumexp(a[0], dim=ax, keepdim=at["keepdims"])


def gen_logsumexp(g, x):
    return gen_reduce(g, x) if 0 not in x.shape else None


def gen_batch_matmul(g, x):
    if len(x.shape) != 3:
        return None
    ta, tb = bool(g.rng.random() < 0.3), bool(g.rng.random() < 0.7)
    batch = x.shape[0]
    k = x.shape[1] if ta else x.shape[2]
    n = int(g.rng.integers(1, 6))
    ob = 1 if g.rng.random() < 0.2 else batch
    other = g.operand((ob, n, k) if tb else (ob, k, n), x.dtype)
    attrs = {}
    if ta:
        attrs["transpose_a"] = True
    if not tb or g.rng.random() < 0.3:
        attrs["transpose_b"] = tb
    return Call([x, other], attrs)


def batch_matmul_ref(matmul, swap):
    def run(a, at):
        x = swap(a[0]) if at["transpose_a"] else a[0]
        y = swap(a[1]) if at["transpose_b"] else a[1]
        return matmul(x, y)
    return run


def gen_cross_entropy(g, x):
    if len(x.shape) == 0:
        return None
    return Call([x, g.operand(x.shape, x.dtype)])


def cross_entropy_ref(a, at):
    return -(a[0] * a[1]).sum() / max(1, a[0].shape[0])


def gen_concatenate(g, x):
    """x and one to three more tensors that differ from it only along the axis (some of size 0),
    in a shuffled order, as the tuple argument."""
    r = len(x.shape)
    if r == 0:
        return None
    axis = int(g.rng.integers(-r, r))
    a = norm_axis(axis, r)
    parts = [x]
    for _ in range(int(g.rng.integers(1, 4))):
        shape = list(x.shape)
        shape[a] = int(g.rng.integers(0, 4))
        parts.append(g.operand(tuple(shape), x.dtype))
    order = [int(i) for i in g.rng.permutation(len(parts))]
    attrs = {"axis": axis} if axis != 0 or g.rng.random() < 0.5 else {}
    return Call([Fields([parts[i] for i in order])], attrs)


def gen_stack(g, x):
    r = len(x.shape)
    parts = [x] + [g.operand(x.shape, x.dtype) for _ in range(int(g.rng.integers(0, 3)))]
    order = [int(i) for i in g.rng.permutation(len(parts))]
    attrs = {"axis": int(g.rng.integers(-r - 1, r + 1))}
    return Call([Fields([parts[i] for i in order])], attrs)


# ------------------------------------------------------------------------------------------------
# THE TABLE
# ------------------------------------------------------------------------------------------------

REDUCE_ATTRS = ("axis", "keepdims", "exclude")
LAYOUT_ATTRS = ("layout", "out_layout")
POOL_ATTRS = LAYOUT_ATTRS + ("pool_size", "strides", "dilation", "padding", "ceil_mode")
CONV_ATTRS = ("strides", "padding", "dilation", "groups", "channels", "kernel_size", "data_layout", "kernel_layout",
              "out_layout", "out_dtype")

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
    "sum_pair": Op(gen_sum_pair, lambda a, at: (np_reduce(np.sum)(a[:1], at), np_reduce(np.sum)(a[1:], at)),
                   lambda a, at: (t_reduce(torch.sum)(a[:1], at), t_reduce(torch.sum)(a[1:], at)), REDUCE_ATTRS,
                   ints=True),
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
    "cumprod": Op(gen_cumsum, lambda a, at: np_cumprod(a[0], at), lambda a, at: t_cumprod(a[0], at),
                  ("axis", "exclusive"), ok=cumprod_ok),
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
    "nn.leaky_relu": Op(gen_leaky_relu, lambda a, at: np.where(a[0] > 0, a[0], at["alpha"] * a[0]),
                        lambda a, at: torch.nn.functional.leaky_relu(a[0], at["alpha"]), ("alpha",),
                        ok=away_from_zero),
    # an axis and one value per index of it, drawn as bias_add's
    "nn.prelu": Op(gen_bias_add, prelu_np, prelu_torch, ("axis",), ok=away_from_zero),
    "nn.pad": Op(gen_pad, np_pad, t_pad, ("pad_width", "pad_value", "pad_mode")),
    "concatenate": Op(gen_concatenate, lambda a, at: np.concatenate(a[0], axis=at["axis"]),
                      lambda a, at: torch.cat(a[0], dim=at["axis"]), ("axis",), ints=True),
    "stack": Op(gen_stack, lambda a, at: np.stack(a[0], axis=at["axis"]), lambda a, at: torch.stack(a[0], dim=at["axis"]),
                ("axis",), ints=True),
    "split": Op(gen_split, np_split, t_split, ("indices_or_sections", "axis"), ints=True),
    "take": Op(gen_take, np_take, t_take, ("axis", "batch_dims", "mode")),
    "strided_slice": Op(gen_strided_slice, np_strided_slice, t_strided_slice,
                        ("begin", "end", "strides", "axes", "slice_mode"), ints=True),
    "variance": Op(gen_variance, np_variance, t_variance, REDUCE_ATTRS + ("unbiased",)),
    "std": Op(gen_variance, np_std, t_std, REDUCE_ATTRS + ("unbiased",), ok=std_ok),
    "logsumexp": Op(gen_logsumexp, np_logsumexp, t_logsumexp, REDUCE_ATTRS),
    "nn.gelu": Op(gen_gelu, lambda a, at: 0.5 * a[0] * (1 + (np.tanh(math.sqrt(2 / math.pi) * (a[0] + 0.044715 * a[0] ** 3))
                                                             if at["approximate"] == "tanh" else np_erf(a[0] / math.sqrt(2)))),
                  lambda a, at: torch.nn.functional.gelu(a[0], approximate=at["approximate"]), ("approximate",)),
    "nn.silu": Op(gen_unary, lambda a, at: a[0] * np_sigmoid(a[0]), lambda a, at: torch.nn.functional.silu(a[0])),
    "nn.softplus": Op(gen_softplus, lambda a, at: np.where(a[0] * at["beta"] > at["threshold"], a[0],
                                                           np.logaddexp(0, a[0] * at["beta"]) / at["beta"]),
                      lambda a, at: torch.nn.functional.softplus(a[0], at["beta"], at["threshold"]),
                      ("beta", "threshold"), ok=softplus_ok),
    "nn.layer_norm": Op(gen_layer_norm, layer_norm_ref(np_norm), layer_norm_ref(t_norm),
                        ("axis", "epsilon", "center", "scale"), ok=norm_ok),
    "nn.group_norm": Op(gen_group_norm, group_norm_ref(np_norm), group_norm_ref(t_norm),
                        ("num_groups", "axis", "epsilon", "center", "scale"), ok=norm_ok),
    "nn.batch_matmul": Op(gen_batch_matmul, batch_matmul_ref(np.matmul, lambda m: np.swapaxes(m, -1, -2)),
                          batch_matmul_ref(torch.matmul, lambda m: m.transpose(-1, -2)),
                          ("out_dtype", "transpose_a", "transpose_b")),
    "nn.cross_entropy_with_logits": Op(gen_cross_entropy, cross_entropy_ref, cross_entropy_ref),
    "on_device": Op(lambda g, x: gen_annotation(g, x, ("device_type", "is_fixed", "constrain_result",
                                                       "constrain_body")),
                    identity_np, lambda a, at: a[0].clone(),
                    ("device_type", "virtual_device", "is_fixed", "constrain_result", "constrain_body"), ints=True),
    "device_copy": Op(lambda g, x: gen_annotation(g, x, ("src_dev_type", "dst_dev_type")), identity_np,
                      lambda a, at: a[0].clone(),
                      ("src_dev_type", "dst_dev_type", "src_virtual_device", "dst_virtual_device"), ints=True),
    "nn.batch_norm": Op(gen_batch_norm, np_batch_norm, t_batch_norm, ("axis", "epsilon", "center", "scale"),
                        ok=batch_norm_ok),
    "nn.dropout": Op(gen_dropout, lambda a, at: (a[0].copy(), np.ones_like(a[0])),
                     lambda a, at: (a[0], torch.ones_like(a[0])), ("rate", "training", "stream"),
                     gradient=(True, False)),
    # convolution and pooling (NCHW)
    "nn.conv2d": Op(gen_conv2d, np_conv2d, t_conv2d, CONV_ATTRS),
    "nn.conv2d_transpose": Op(functools.partial(gen_conv2d, transpose=True), np_conv2d_transpose,
                              t_conv2d_transpose, CONV_ATTRS + ("output_padding",)),
    "nn.max_pool2d": Op(gen_pool, np_max_pool2d, t_max_pool2d, POOL_ATTRS, ok=max_pool_ok),
    "nn.avg_pool2d": Op(functools.partial(gen_pool, avg=True), np_avg_pool2d, t_avg_pool2d,
                        POOL_ATTRS + ("count_include_pad",)),
    "nn.global_avg_pool2d": Op(gen_global_pool, lambda a, at: np.mean(a[0], axis=(2, 3), keepdims=True),
                               lambda a, at: torch.mean(a[0], dim=(2, 3), keepdim=True), LAYOUT_ATTRS),
    "nn.global_max_pool2d": Op(gen_global_pool, lambda a, at: np.max(a[0], axis=(2, 3), keepdims=True),
                               lambda a, at: torch.amax(a[0], dim=(2, 3), keepdim=True), LAYOUT_ATTRS,
                               ok=global_max_ok),
    "nn.adaptive_avg_pool2d": Op(gen_adaptive_avg_pool2d, np_adaptive_avg_pool2d,
                                 lambda a, at: torch.nn.functional.adaptive_avg_pool2d(
                                     a[0], adaptive_size(tuple(a[0].shape), at)),
                                 LAYOUT_ATTRS + ("output_size",)),
    # gradient helpers the generator places itself (no_grad on a value, checkpoint segments)
    "grad.no_grad": Op(gen_unary, identity_np, lambda a, at: a[0].detach(), gradient=False, ints=True),
    "grad.start_checkpoint": Op(None, identity_np, identity_torch),
    "grad.end_checkpoint": Op(None, identity_np, identity_torch),
}

# Operators whose generator is not `gen`: the checkpoint markers are placed as whole segments
# (generator.py), never as single calls.
SEGMENT_MARKERS = ("grad.start_checkpoint", "grad.end_checkpoint")

NOT_GENERATED = {
    "optim.sgd_momentum": "an optimizer's update with no gradient, built by --train: its forward is checked by "
                          "the oracle's cases, the training step by test/train against torch.optim",
    "optim.adam": "an optimizer's update with no gradient, built by --train: its forward is checked by the "
                  "oracle's cases, the training step by test/train against torch.optim",
    "scan": "its argument is a `fn` body, which the generator does not write; the oracle checks its forward "
            "(an independent loop over the body), the finite-difference test its gradient",
    "grad.scan_backward": "a gradient helper: it runs in the adjoint of scan, where the finite-difference and "
                          "PyTorch tests check it",
    "argmax": "an integer result with no gradient; its forward is checked by the oracle's cases",
    "argmin": "an integer result with no gradient; its forward is checked by the oracle's cases",
    "logical_and": "bool operands and result; its forward is checked by the oracle's cases",
    "logical_or": "bool operands and result; its forward is checked by the oracle's cases",
    "logical_not": "a bool operand and result; its forward is checked by the oracle's cases",
    "isnan": "a bool result with no gradient; its forward is checked by the oracle's cases",
    "isinf": "a bool result with no gradient; its forward is checked by the oracle's cases",
    "nn.dropout_mask": "a random bool mask of an int64 seed, with no gradient: its bits are checked by the oracle "
                       "against an independent Philox, its statistics, thread and remat invariance and the "
                       "gradient through it by test/random/dropout.test",
    "grad.take_backward": "a gradient helper: it runs in the adjoint of take, where the reference gradient "
                          "checks it (and the second order its own gradient)",
    "one_hot": "no gradient and an integer operand; its forward is checked by the oracle's cases",
    "grad.strided_slice_backward": "a gradient helper: it runs in the adjoint of strided_slice, where the "
                                   "reference gradient checks it (and the second order its own gradient)",
    "grad.nll_loss_weights_backward": "a gradient helper with no gradient of its own: it runs in the "
                                      "adjoint of nn.nll_loss with weights, where the reference gradient "
                                      "checks it",
    "nn.conv2d_backward_weight": "a gradient helper: it runs in the adjoints of nn.conv2d and "
                                 "nn.conv2d_transpose (the weight's), where the reference gradient checks "
                                 "it (and the second order its own gradient)",
    "grad.max_pool2d_backward": "a gradient helper: it runs in the adjoint of nn.max_pool2d, where the "
                                "reference gradient checks it (and the second order its own gradient)",
    "grad.max_pool2d_gather": "the gradient of grad.max_pool2d_backward: it runs in second-order "
                              "adjoints through max pools, where the reference checks it",
    "grad.max_pool2d_argmax": "an integer result with no gradient: it runs in the adjoint of nn.max_pool2d, "
                              "where the reference gradient checks it; the oracle checks its forward",
    "grad.max_pool2d_unpool": "a gradient helper: it runs in the adjoint of nn.max_pool2d, where the reference "
                              "gradient checks it (and the second order its own gradient)",
    "grad.max_pool2d_take": "the gradient of grad.max_pool2d_unpool: it runs in second-order adjoints through "
                            "max pools, where the reference checks it",
    "grad.avg_pool2d_backward": "a gradient helper: it runs in the adjoint of nn.avg_pool2d, where the "
                                "reference gradient checks it (and the second order its own gradient)",
    "grad.adaptive_avg_pool2d_backward": "a gradient helper: it runs in the adjoint of "
                                         "nn.adaptive_avg_pool2d, where the reference gradient checks it "
                                         "(and the second order its own gradient)",
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
