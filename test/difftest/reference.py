"""Reference values of a generated program, and how close gradc's must be.

  * forward: numpy in float64 (the generator computed every binding as it drew it);
  * gradient: PyTorch float64 autograd over the same bindings (operators.py's torch column):
    the target is result field 0, itself when a scalar and its sum otherwise (SPEC §5: a
    non-scalar result is seeded with ones); a parameter the target does not reach gets zeros;
  * second order (for some programs): the gradient of sum(d_k), d_k the gradient of one --wrt
    parameter, by PyTorch's double backward; gradc gets it by differentiating a function that
    calls the dumped @main_adjoint (SPEC §5: the adjoint is ordinary IR);
  * a rounding estimate: the same PyTorch evaluation in the program's own dtypes (float16 computed
    in float32 and rounded after every operator), and float64 evaluations whose every result is
    perturbed by a few units of its dtype's roundoff. How far they land from float64 says how
    much rounding the program amplifies (a sin of a large float16 sum, a difference of near
    values); gradc may be off by a multiple of the largest, plus a relative and an absolute
    tolerance per dtype (TOLERANCE).

The numpy and PyTorch forward values must agree to float64 precision; if not, the reference
table is wrong and the tester says so.
"""
import numpy as np
import torch

import operators
from operators import FLOAT_DTYPES

# per dtype: (multiple of the rounding estimate, relative tolerance to the largest reference
# magnitude, absolute tolerance)
TOLERANCE = {"float64": (8.0, 1e-12, 1e-14), "float32": (8.0, 1e-6, 1e-7), "float16": (4.0, 2e-3, 2e-4)}
EPSILON = {"float16": 2.0 ** -11, "float32": 2.0 ** -24, "float64": 2.0 ** -53}  # unit roundoff
PERTURB_ULPS, PERTURB_SAMPLES = 4, 2
PRECISION_ORDER = ("float16", "float32", "float64")
EMULATED = {"float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
            "int32": torch.int64, "int64": torch.int64, "bool": torch.bool}


def least_precise(dtypes):
    return next(d for d in PRECISION_ORDER if d in dtypes) if dtypes else "float64"


def _leaf(value, emulate):
    if value.dtype in FLOAT_DTYPES:
        if emulate:
            return torch.tensor(value.param if value.param is not None else value.data, dtype=EMULATED[value.dtype])
        return torch.tensor(value.data, dtype=torch.float64)
    return torch.tensor(value.data, dtype=operators.TORCH_DTYPE[value.dtype])


def _compute_dtype(t):
    return t.float() if t.dtype == torch.float16 else t


class Evaluation:
    """PyTorch's values of a program, float64 numpy arrays for floats: `forward` (the result's
    leaves), `grads` (of the --wrt parameters, declared order) and, when `prog.second` names the
    k-th of them, `second`: [sum(d_k), its gradient for each --wrt parameter] (second order)."""

    def __init__(self, forward, grads, second):
        self.forward, self.grads, self.second = forward, grads, second


def _grad(target, leaves, create_graph=False):
    grads = [None] * len(leaves)
    if target.requires_grad and leaves:
        grads = torch.autograd.grad(target, leaves, allow_unused=True, create_graph=create_graph)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(leaves, grads)]


def _perturbed(t, dtype, gen):
    """t times 1 + PERTURB_ULPS * eps(dtype) * u (u uniform in [-1, 1], per element), and the
    gradient that flows back through it likewise: a sample of the rounding of one value."""
    if gen is None or dtype not in FLOAT_DTYPES:
        return t
    scale = PERTURB_ULPS * EPSILON[dtype]
    out = t * (1 + scale * (torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1))
    if out.requires_grad:
        v = 1 + scale * (torch.rand(t.shape, generator=gen, dtype=torch.float64) * 2 - 1)
        # g is None where a double backward has no gradient for it (conv2d's weight, say)
        out.register_hook(lambda g: None if g is None else g * v)
    return out


def evaluate(prog, emulate, perturb=None):
    """`prog` in PyTorch, in float64 or (emulate) in the program's own dtypes. With `perturb` (a
    torch.Generator), every operand and result of an operator, and their gradients, are
    perturbed by a few units of their dtype's roundoff (_perturbed): operands too, since the
    rounding of a sum or a product scales with its terms, not with its result."""
    wrt = {p.name for p in prog.wrt_params()}
    env = {}
    leaves = []
    for p in prog.params:
        t = _leaf(p, emulate)
        if p.name in wrt:
            t.requires_grad_(True)
            leaves.append(t)
        env[p.name] = t
    for b in prog.bindings:
        args = []
        def operand(a):
            if isinstance(a, operators.Fields):  # a tuple argument: its fields
                return [operand(v) for v in a.values]
            t = env[a.name] if hasattr(a, "name") else torch.tensor(
                a.value, dtype=EMULATED[a.dtype] if emulate else operators.TORCH_DTYPE[a.dtype])
            return _compute_dtype(t) if emulate else _perturbed(t, a.dtype, perturb)
        for a in b.args:
            args.append(operand(a))
        out = operators.TABLE[b.op].torch(args, b.full_attrs)
        if b.field is not None:  # a tuple result's projection
            out = out[b.field]
        want = EMULATED[b.out.dtype] if emulate else operators.TORCH_DTYPE[b.out.dtype]
        env[b.out.name] = _perturbed(out.to(want), b.out.dtype, perturb)
    forward = [env[v.name] for v in prog.result]
    target = forward[0] if forward[0].dim() == 0 else forward[0].sum()
    grads = _grad(target, leaves, create_graph=prog.second is not None)
    second = None
    if prog.second is not None:
        s = _perturbed(grads[prog.second], prog.wrt_params()[prog.second].dtype, perturb).sum()
        second = [_numpy(s)] + [_numpy(g) for g in _grad(s, leaves)]
    return Evaluation([_numpy(t) for t in forward], [_numpy(g) for g in grads], second)


def _numpy(t):
    # clone: autograd may return an unmaterialised zero tensor (PyTorch's ZeroTensor, e.g. the
    # second derivative of abs), whose .numpy() reads unallocated memory
    t = t.detach().clone()
    return t.double().numpy() if t.is_floating_point() else t.numpy()


class Mismatch:
    def __init__(self, what, detail, max_abs=None, max_rel=None):
        self.what, self.detail, self.max_abs, self.max_rel = what, detail, max_abs, max_rel

    def __str__(self):
        errs = "" if self.max_abs is None else f" (max abs err {self.max_abs:.3g}, max rel err {self.max_rel:.3g})"
        return f"{self.what}: {self.detail}{errs}"


def check_type(what, got, dtype, shape):
    if got.dtype != np.dtype(dtype) or got.shape != tuple(shape):
        return Mismatch(what, f"got {got.dtype}{list(got.shape)}, expected {dtype}{list(shape)}")
    return None


def close(what, got, ref, noise, tol_dtype):
    """gradc's value `got` against the float64 reference `ref`; None when within tolerance."""
    if ref.dtype.kind != "f":
        if np.array_equal(got.astype(ref.dtype), ref):
            return None
        bad = np.argwhere(got.astype(ref.dtype) != ref)[0]
        return Mismatch(what, f"differs at {tuple(bad)}: got {got[tuple(bad)]}, expected {ref[tuple(bad)]}")
    g = got.astype(np.float64)
    err = np.abs(g - ref)
    if not np.all(np.isfinite(g)):
        bad = tuple(np.argwhere(~np.isfinite(g))[0])
        return Mismatch(what, f"not finite at {bad}: got {g[bad]}, expected {ref[bad]}")
    if err.size == 0:
        return None
    factor, rtol, atol = TOLERANCE[tol_dtype]
    allowed = factor * noise + rtol * float(np.max(np.abs(ref))) + atol
    if float(np.max(err)) <= allowed:
        return None
    worst = tuple(np.unravel_index(np.argmax(err), err.shape))
    rel = float(np.max(err / np.maximum(np.abs(ref), 1e-300)))
    return Mismatch(what, f"worst at {worst}: got {g[worst]!r}, expected {ref[worst]!r}; allowed "
                          f"{allowed:.3g} ({tol_dtype})", float(np.max(err)), rel)


def bitwise(what, got, want):
    """Two gradc results that must be identical bit for bit."""
    if got.dtype != want.dtype or got.shape != want.shape:
        return Mismatch(what, f"{got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}")
    if got.tobytes() == want.tobytes():
        return None
    a, b = got.astype(np.float64), want.astype(np.float64)
    diff = a != b
    worst = tuple(np.argwhere(diff)[0]) if got.ndim else ()
    err = np.abs(a - b)
    rel = float(np.max(err / np.maximum(np.abs(b), 1e-300)))
    return Mismatch(what, f"not bitwise identical, first at {worst}: {a[worst]!r} vs {b[worst]!r}",
                    float(np.max(err)), rel)


def rounding_estimates(prog, ref, seed):
    """Per output leaf (forward leaves, gradients, then the second-order values if any): the
    largest distance from the float64 reference `ref` of the evaluation in the program's own
    dtypes and of PERTURB_SAMPLES perturbed ones."""
    gen = torch.Generator().manual_seed(seed)
    runs = [evaluate(prog, emulate=True)] + [evaluate(prog, False, gen) for _ in range(PERTURB_SAMPLES)]
    refs = ref.forward + ref.grads + (ref.second or [])
    out = [0.0] * len(refs)
    for run in runs:
        for i, (e, r) in enumerate(zip(run.forward + run.grads + (run.second or []), refs)):
            if r.dtype.kind == "f" and r.size:
                out[i] = max(out[i], float(np.max(np.abs(e.astype(np.float64) - r))))
    return out
