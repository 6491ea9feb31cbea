"""Random well-typed gradc programs for the differential tester.

A program is `def @main(PARAMS) { BINDINGS; RESULT }`: a chain of 2-8 operator calls drawn from
the registry (operators.py says how to call each), over shapes of odd and prime sizes, in float32,
float64 or float16. The generator evaluates every binding in numpy (float64) as it goes, on the
very inputs the program will run on, and rejects a call whose result is not finite or too large,
or whose operands sit on a kink of the operator (operators.py, `ok`), so every program it keeps is
numerically well-posed and its forward value is known.

What the programs exercise:
  * fan-out: an operator takes an earlier value, not only the last one, and binary operators may
    take the same value twice; a result tuple carries every value nobody used (tuples pass through
    the gradient, SPEC §5);
  * broadcasting partners, literals (`0.5f`, `2f64`), infix `+ - * /`, `let` bindings with and
    without a type;
  * checkpoint segments: `grad.start_checkpoint` on 1-2 values (sometimes twice on one value, of
    which one may stay unclosed), 0-3 calls inside, and `grad.end_checkpoint` on 1-2 of its values
    (SPEC §6; a segment starts only on values outside every segment, possibly on an end's output:
    adjacent segments; every start or a duplicate of it reaches an end; values of a closed segment
    are read after it: escaping values);
  * parameters: created on demand with the shape a call needs, some never used (their gradient
    is zeros), integer (nll_loss targets, in range) and bool (conditions) ones; `--wrt` names a
    random subset in a random order, or is left out (every float parameter);
  * helper functions (`def @hN`, some returning tuples) and tuples with projections in @main:
    the same values, printed differently (BindingGroup);
  * operators with a tuple result (nn.batch_norm, nn.dropout), called with a projection
    `op(...).k`, and operands that are calls of their own (variance's mean, batch_norm's
    statistics from mean and variance of the data);
  * integer chains: calls of the operators that take int32/int64 tensors too (truncating
    division, int reductions and products, ...) on integer parameters, casts or nll_loss targets,
    compared exactly; one program in seven is mostly integer;
  * results: a tensor (its gradient is seeded with ones), a scalar, or a tuple, sometimes nested;
  * sizes: mostly up to 6000 elements; one program in five up to 150 000 (loops on the thread
    pool), one in twenty with empty tensors (a dimension of size 0).
"""
import math
import warnings

import numpy as np

import operators
from operators import FLOAT_DTYPES, INT_DTYPES, Call, Fields

SIZES = (1, 2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
LARGE_SIZES = (47, 64, 67, 97, 131)  # across vector widths, with remainders
# One program in LARGE_PROGRAMS has tensors of up to 150 000 elements, so that loops do enough
# work to run on the object's thread pool (gradc's cost rule wants 2^14 operations).
MAX_ELEMENTS = 6000
LARGE_PROGRAMS, LARGE_MAX_ELEMENTS, HUGE_SIZES = 0.2, 150000, (257, 509, 1031)
# One program in EMPTY_PROGRAMS may have dimensions of size 0 (empty tensors).
EMPTY_PROGRAMS = 0.05
MAGNITUDE = {"float16": 200.0, "float32": 1e4, "float64": 1e4, "int32": 1e6, "int64": 1e6}
# The share of calls that continue an integer chain (operators.py, `ints`) when there is one; one
# program in INT_PROGRAMS starts with an integer parameter and makes half of its calls on integers.
INT_CALLS, INT_PROGRAMS = 0.1, 0.15
# How far an operand must be from a kink (operators.py, `ok`): float32 rounding of a chain stays
# far below it.
MARGIN = {"float16": 0.05, "float32": 2e-3, "float64": 1e-6}
# Parameter names that are C keywords, names of m.h (fields, macros) or equal but for case: one
# program in ODD_NAME_PROGRAMS uses them, and the harness must find its fields in m.h all the same.
ODD_NAMES = ("int", "for", "float", "inputs", "outputs", "workspace", "output_0", "main", "m_main",
             "M_ALIGNMENT", "NULL", "_", "w", "W", "data", "threads")
ODD_NAME_PROGRAMS = 0.15
LITERAL_SUFFIX = {"float16": "f16", "float32": "f", "float64": "f64", "int32": "", "int64": "i64"}


class Value:
    """A parameter or a binding's result, with its value computed in numpy (float64 for floats)."""

    def __init__(self, name, shape, dtype, data, param=None):
        self.name, self.shape, self.dtype, self.data = name, tuple(shape), dtype, data
        self.param = param  # the input array in the parameter's dtype, for a parameter
        self.segment = None  # the open checkpoint segment it lies in
        self.dirty = False  # depends on the inside of a segment (so no segment may start on it)
        self.grad = dtype in FLOAT_DTYPES  # a gradient flows from it to a float parameter
        self.ops = frozenset()  # (binding index, operator) of every binding that computes it

    def is_float(self):
        return self.dtype in FLOAT_DTYPES

    def type_text(self):
        dims = ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "")
        return f"Tensor[({dims}), {self.dtype}]"


class Literal:
    """A scalar constant argument such as `0.5f`, `-2f64` or `3i64`."""

    def __init__(self, value, dtype):
        self.value, self.dtype, self.shape = value, dtype, ()
        self.data = np.asarray(value, dtype=operators.NUMPY_DTYPE[dtype])

    def text(self):
        return f"{self.value!r}{LITERAL_SUFFIX[self.dtype]}"


class Binding:
    def __init__(self, out, op, args, attrs, full_attrs, style, infix, field=None):
        self.out, self.op, self.args = out, op, args
        self.attrs = attrs  # as written in the text
        self.full_attrs = full_attrs  # with the registry's defaults, for the references
        self.field = field  # for an operator with a tuple result: the field projected (`op(...).k`)
        self.style = style  # "graph" (`%3 = ...`), "let" or "let-typed" (`let %v3: TYPE = ...`)
        self.infix = infix  # `(%a + %b)` rather than `add(%a, %b)`
        self.group = None  # the BindingGroup it is printed in

    def values(self):
        return [v for a in self.args for v in (a.values if isinstance(a, Fields) else [a]) if isinstance(v, Value)]


def attr_text(v):
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(attr_text(x) for x in v) + "]"
    return repr(v)


INFIX = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/"}


def expr_text(b, names):
    """The call of binding b, its Value arguments renamed by `names` (name -> text) where given."""
    def arg_text(a):
        if isinstance(a, Literal):
            return a.text()
        if isinstance(a, Fields):  # a tuple argument
            return "(" + ", ".join(arg_text(v) for v in a.values) + ("," if len(a.values) == 1 else "") + ")"
        return names.get(a.name, a.name)
    args = [arg_text(a) for a in b.args]
    if b.infix:
        return f"({args[0]} {INFIX[b.op]} {args[1]})"
    call = f"{b.op}(" + ", ".join(args + [f"{k}={attr_text(v)}" for k, v in b.attrs.items()]) + ")"
    return call if b.field is None else f"{call}.{b.field}"


def _binding_line(b, expr):
    if b.style == "graph":
        return f"  {b.out.name} = {expr};"
    if b.style == "let":
        return f"  let {b.out.name} = {expr};"
    return f"  let {b.out.name}: {b.out.type_text()} = {expr};"


class BindingGroup:
    """Consecutive bindings printed together (the values are the same):
      helper  1 or 2 bindings (a chain) outlined into `def @hN(...)`, called from @main;
      tuple   2 independent bindings as `%tN = (call1, call2);` and projections `%tN.0`, `%tN.1`;
      helper-tuple  the same tuple returned by a helper function."""

    def __init__(self, kind, bindings):
        self.kind, self.bindings = kind, bindings


class Program:
    def __init__(self, params, bindings, result, wrt, nest_result=False, second=None, checks=frozenset(),
                 olevel=0, cpu="x86-64"):
        self.params, self.bindings = params, bindings
        self.result = result  # list of Values: one (a tensor or scalar result) or a tuple's fields
        self.wrt = wrt  # list of parameter names for --wrt, or None for the default
        self.nest_result = nest_result  # print a tuple result as `(%a, (%b, %c))`
        self.second = second  # k: also differentiate sum(d_k), d_k the k-th --wrt gradient
        self.checks = checks  # the comparisons beyond the core ones (difftest.py, Checker)
        self.olevel, self.cpu = olevel, cpu  # the -O level and --cpu of the "olevel" and "cpu" ones

    def is_tuple(self):
        return len(self.result) > 1

    def float_dtypes(self):
        return {v.dtype for v in self.params + [b.out for b in self.bindings] if v.is_float()}

    def wrt_params(self):
        names = self.wrt if self.wrt is not None else [p.name for p in self.params if p.is_float()]
        return [p for p in self.params if p.name in names]  # declared order (SPEC §5)

    def grad_flags(self):
        return ["--grad"] + ([] if self.wrt is None else ["--wrt=" + ",".join(self.wrt)])

    def ops(self):
        return {b.op for b in self.bindings}

    def text(self):
        lines, helpers = [], []
        i = 0
        while i < len(self.bindings):
            b = self.bindings[i]
            group = b.group
            if group is not None and self.bindings[i:i + len(group.bindings)] == group.bindings:
                lines += self._group_text(group, helpers)
                i += len(group.bindings)
            else:
                lines.append(_binding_line(b, expr_text(b, {})))
                i += 1
        names = [v.name for v in self.result]
        if len(names) == 1:
            lines.append("  " + names[0])
        elif self.nest_result and len(names) > 2:  # `(%a, (%b, %c))`: the same leaves, depth-first
            lines.append("  (%s, (%s))" % (names[0], ", ".join(names[1:])))
        else:
            lines.append("  (" + ", ".join(names) + ")")
        main = ["def @main(%s) {" % ", ".join(f"{p.name}: {p.type_text()}" for p in self.params)] + lines + ["}"]
        return "\n".join(['#[version = "0.0.5"]'] + main + helpers) + "\n"

    @staticmethod
    def _group_text(group, helpers):
        """A helper function call, or a tuple of two calls and its projections (BindingGroup)."""
        first, last = group.bindings[0], group.bindings[-1]
        if group.kind == "tuple":
            tuple_name = "%t" + first.out.name[1:]
            lines = [f"  {tuple_name} = ({expr_text(first, {})}, {expr_text(last, {})});"]
            return lines + [_binding_line(b, f"{tuple_name}.{k}") for k, b in enumerate(group.bindings)]
        inner, outer = {}, []
        for b in group.bindings:
            for a in b.values():
                if a not in outer and a is not first.out:
                    outer.append(a)
                    inner[a.name] = f"%a{len(outer) - 1}"
        name = "@h" + first.out.name.lstrip("%v")
        head = "def %s(%s) {" % (name, ", ".join(f"{inner[a.name]}: {a.type_text()}" for a in outer))
        call = f"{name}({', '.join(a.name for a in outer)})"
        if group.kind == "helper":  # a chain: the first binding feeds the second
            body = [f"  %0 = {expr_text(first, inner)};"] if len(group.bindings) == 2 else []
            inner[first.out.name] = "%0"
            helpers += [head] + body + [f"  {expr_text(last, inner)}", "}"]
            return [_binding_line(last, call)]
        helpers += [head, f"  ({expr_text(first, inner)}, {expr_text(last, inner)})", "}"]
        tuple_name = "%t" + first.out.name[1:]
        return [f"  {tuple_name} = {call};"] + [_binding_line(b, f"{tuple_name}.{k}")
                                                 for k, b in enumerate(group.bindings)]

    def restricted(self, keep):
        """The program computing the result `keep` (a Value) alone, with the bindings it needs and
        the parameters it uses; None if that would cut a checkpoint segment open."""
        needed, bindings = {keep.name}, []
        for b in reversed(self.bindings):
            if b.out.name in needed:
                bindings.append(b)
                needed.update(v.name for v in b.values())
        bindings.reverse()
        starts = {b.out.name for b in bindings if b.op == "grad.start_checkpoint"}
        closed = set()
        for b in bindings:
            if b.op == "grad.end_checkpoint":
                closed |= self._start_ancestors(b.out, bindings)
        if starts - closed:
            return None
        params = [p for p in self.params if p.name in needed]
        if not any(p.is_float() for p in params):
            return None
        wrt = None if self.wrt is None else [n for n in self.wrt if n in needed]
        cut = Program(params, bindings, [keep], wrt or None, self.nest_result, checks=self.checks,
                      olevel=self.olevel, cpu=self.cpu)
        if self.second is not None:
            name = self.wrt_params()[self.second].name
            cut.second = next((k for k, p in enumerate(cut.wrt_params()) if p.name == name), 0)
        return cut

    @staticmethod
    def _start_ancestors(value, bindings):
        by_name = {b.out.name: b for b in bindings}
        found, todo = set(), [value.name]
        while todo:
            b = by_name.get(todo.pop())
            if b is None:
                continue
            if b.op == "grad.start_checkpoint":
                found.add(b.out.name)
            else:
                todo.extend(v.name for v in b.values())
        return found


class RejectCall(Exception):
    """A drawn call that is not kept (see _bind); the generator draws another."""


class Generator:
    """Draws one program from `registry` (the records of `gradc ops --json`); `forced_op` is the
    operator the program features: it is tried at a random step until it fits."""

    def __init__(self, seed, registry, forced_op=None):
        self.rng = np.random.default_rng(seed)
        self.registry = {op["name"]: op for op in registry}
        self.defaults = {op["name"]: {a["name"]: parse_default(a["default"]) for a in op["attributes"]}
                         for op in registry}
        self.generated = sorted(n for n in self.registry
                                if n not in operators.NOT_GENERATED and n not in operators.SEGMENT_MARKERS)
        self.int_ops = [n for n in self.generated if operators.TABLE[n].ints]
        self.forced_op = self.featured = forced_op
        self.dtype = str(self.rng.choice(FLOAT_DTYPES, p=[0.15, 0.55, 0.3]))
        self.margin = MARGIN[self.dtype]
        self.large = self.rng.random() < LARGE_PROGRAMS
        self.max_elements = LARGE_MAX_ELEMENTS if self.large else MAX_ELEMENTS
        self.empty = not self.large and self.rng.random() < EMPTY_PROGRAMS
        self.params, self.values, self.bindings = [], [], []
        self.names = list(self.rng.permutation(ODD_NAMES)) if self.rng.random() < ODD_NAME_PROGRAMS else []
        self.used = set()
        self.segment = None  # the open segment: its start values

    # -- shapes ------------------------------------------------------------------------------

    def dim(self):
        if self.empty and self.rng.random() < 0.2:
            return 0
        if self.large and self.rng.random() < 0.3:
            return int(self.rng.choice(HUGE_SIZES))
        return int(self.rng.choice(LARGE_SIZES if self.rng.random() < 0.08 else SIZES))

    def shape(self, rank=None):
        if rank is None:
            rank = int(self.rng.choice(5, p=[0.08, 0.27, 0.35, 0.2, 0.1]))
        for _ in range(20):
            s = tuple(self.dim() for _ in range(rank))
            if math.prod(s) <= self.max_elements:
                return s
        return tuple(int(self.rng.choice(SIZES[:4])) for _ in range(rank))

    def sub_shape(self, shape):
        """A shape that broadcasts to `shape`: leading axes dropped, some axes set to 1."""
        lead = int(self.rng.integers(0, len(shape) + 1)) if self.rng.random() < 0.5 else 0
        return tuple(1 if self.rng.random() < 0.3 else d for d in shape[lead:])

    def super_shape(self, shape):
        """A shape `shape` broadcasts to: its 1-axes widened, leading axes added."""
        for _ in range(10):
            lead = self.shape(int(self.rng.integers(0, 3))) if len(shape) < 4 else ()
            s = lead + tuple(self.dim() if d == 1 and self.rng.random() < 0.7 else d for d in shape)
            if math.prod(s) <= self.max_elements:
                return s
        return tuple(shape)

    def factorize(self, size):
        """A random list of dimensions whose product is `size` (ones inserted here and there)."""
        dims, n = [], size
        for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 97, 131):
            while n % p == 0:
                dims.append(p)
                n //= p
        if n > 1:
            dims.append(n)
        self.rng.shuffle(dims)
        out = []
        for d in dims:  # merge neighbours at random, keep at most 4 dimensions
            if out and (self.rng.random() < 0.5 or len(out) >= 4):
                out[-1] *= d
            else:
                out.append(d)
        while len(out) < 5 and self.rng.random() < 0.2:
            out.insert(int(self.rng.integers(0, len(out) + 1)), 1)
        return out

    # -- parameters and operands -------------------------------------------------------------

    def _new_param(self, shape, dtype, array):
        index = len(self.params)
        name = str(self.names[index]) if index < len(self.names) else f"p{index}"
        p = Value("%" + name, shape, dtype, array.astype(operators.NUMPY_DTYPE[dtype]), param=array)
        self.params.append(p)
        self.values.append(p)
        return p

    def param(self, shape, dtype, positive=False):
        """A new float parameter of ±[0.25, 2] ([0.5, 1.5] if positive), or an integer one of ±[1, 4]."""
        if dtype in INT_DTYPES:
            sign = 1 if positive else self.rng.choice([-1, 1], shape)
            return self._new_param(shape, dtype, np.asarray(self.rng.integers(1, 5, shape) * sign).astype(dtype))
        mag = self.rng.uniform(0.25, 2.0, shape) if not positive else self.rng.uniform(0.5, 1.5, shape)
        sign = 1 if positive else self.rng.choice([-1.0, 1.0], shape)
        return self._new_param(shape, dtype, np.asarray(mag * sign).astype(dtype))

    def int_param(self, shape, dtype, high, low=0):
        return self._new_param(shape, dtype, np.asarray(self.rng.integers(low, high, shape)).astype(dtype))

    def bool_param(self, shape):
        return self._new_param(shape, "bool", np.asarray(self.rng.random(shape) < 0.5))

    def usable(self, v):
        """Inside an open segment, only its own values and values outside every segment."""
        if self.segment is None:
            return True
        return v.segment is self.segment or (v.segment is None and not v.dirty)

    def pick(self, pred):
        """An existing value satisfying `pred`: the newest one, or often any one (fan-out)."""
        cands = [v for v in self.values if self.usable(v) and pred(v)]
        if not cands:
            return None
        if self.rng.random() < 0.5:
            return cands[-1]
        return cands[int(self.rng.integers(len(cands)))]

    def operand(self, shape, dtype, positive=False):
        """A float operand of exactly this shape: an existing value or a new parameter."""
        ok = (lambda v: np.all(v.data >= 0.25)) if positive else (lambda v: True)
        v = self.pick(lambda v: v.dtype == dtype and v.shape == tuple(shape) and ok(v)) \
            if self.rng.random() < 0.5 else None
        return v or self.param(tuple(shape), dtype, positive)

    def positive_operand(self, x):
        """x when all its elements are comfortably positive, else a positive value or parameter."""
        if np.all(x.data >= 0.25):
            return x
        v = self.pick(lambda v: v.dtype == x.dtype and v.is_float() and np.all(v.data >= 0.25))
        return v or self.param(x.shape, x.dtype, positive=True)

    def literal(self, dtype, nonzero=False):
        """A scalar constant: for floats one of ±[0.25, 2] (or [-2, 2]), for integers of ±[1, 4]
        (or [-4, 4])."""
        if dtype in INT_DTYPES:
            if nonzero:
                return Literal(int(self.rng.integers(1, 5) * self.rng.choice([-1, 1])), dtype)
            return Literal(int(self.rng.integers(-4, 5)), dtype)
        value = self.rng.uniform(0.25, 2) * self.rng.choice([-1, 1]) if nonzero else self.rng.uniform(-2, 2)
        return Literal(round(float(value), 3), dtype)

    def scalar_operand(self, dtype):
        if self.rng.random() < 0.5:
            return self.literal(dtype)
        v = self.pick(lambda v: v.dtype == dtype and v.shape == ())
        return v or self.param((), dtype)

    def broadcast_partner(self, x, nonzero=False, small=False, fanout=0.1):
        """A second operand for a binary operator, broadcast-compatible with x."""
        if self.rng.random() < fanout and not nonzero and not small:
            return x

        def fits(v):
            if v.dtype != x.dtype:
                return False
            try:
                out = np.broadcast_shapes(v.shape, x.shape)
            except ValueError:
                return False
            return math.prod(out) <= self.max_elements and (not nonzero or np.all(np.abs(v.data) >= 0.25)) \
                and (not small or np.all(np.abs(v.data) <= 2))

        r = self.rng.random()
        if r < 0.15:
            return self.literal(x.dtype, nonzero=True)
        if r < 0.55:
            v = self.pick(lambda v: v is not x and fits(v))
            if v is not None:
                return v
        shape = self.sub_shape(x.shape) if self.rng.random() < 0.7 else self.super_shape(x.shape)
        return self.param(shape, x.dtype)

    def condition(self, x):
        """A bool operand broadcast-compatible with x (a comparison's result or a parameter)."""
        c = self.pick(lambda v: v.dtype == "bool" and _broadcasts(v.shape, x.shape))
        return c or self.bool_param(self.sub_shape(x.shape))

    # -- bindings ----------------------------------------------------------------------------

    def _bind(self, op, call):
        defaults = self.defaults[op]
        full_attrs = {**defaults, **call.attrs}
        args = [v.data for v in call.args]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the mean of an empty axis: rejected below
            try:
                out = operators.TABLE[op].numpy(args, full_attrs)
            except ValueError:  # no value: the max of an empty axis, say
                raise RejectCall()
        out = np.asarray(out if call.field is None else out[call.field])
        first_float = next((a.dtype for a in call.args if a.dtype in FLOAT_DTYPES), None)
        dtype = call.dtype or first_float or call.args[0].dtype
        out = out.astype(operators.NUMPY_DTYPE[dtype])
        if out.size > self.max_elements:
            raise RejectCall()
        if dtype in MAGNITUDE and (not np.all(np.isfinite(out)) or np.any(np.abs(out) > MAGNITUDE[dtype])):
            raise RejectCall()
        check = operators.TABLE[op].ok
        exact = not any(a.dtype in FLOAT_DTYPES for a in call.args)  # integers: no kinks
        if check is not None and not exact and not check(args, full_attrs, out, self.margin):
            raise RejectCall()
        if dtype in FLOAT_DTYPES:  # kinks downstream of a less precise value need a wider margin
            self.margin = max(self.margin, MARGIN[dtype])
        infix = op in INFIX and self.rng.random() < 0.25
        style = str(self.rng.choice(["graph", "let", "let-typed"], p=[0.8, 0.1, 0.1]))
        index = len(self.bindings)
        v = Value(f"%{index}" if style == "graph" else f"%v{index}", out.shape, dtype, out)
        inputs = [v for a in call.args for v in (a.values if isinstance(a, Fields) else [a]) if isinstance(v, Value)]
        v.grad = v.is_float() and operators.TABLE[op].has_gradient(call.field) and any(a.grad for a in inputs)
        v.ops = frozenset({(index, op)}).union(*(a.ops for a in inputs))
        if op == "grad.start_checkpoint":
            v.segment = self.segment
        elif op != "grad.end_checkpoint":
            v.segment = self.segment if any(a.segment is not None and a.segment is self.segment
                                            for a in inputs) else None
            v.dirty = any(a.dirty or a.segment is not None for a in inputs)
        self.bindings.append(Binding(v, op, call.args, call.attrs, full_attrs, style, infix, call.field))
        self.values.append(v)
        self.used.update(id(a) for a in inputs)
        return v

    def try_op(self, op, x):
        """Binds one call of `op` offered x; returns the result or None (nothing changed, the
        operand calls its generator bound included)."""
        n_params, n_values, n_bindings, used = len(self.params), len(self.values), len(self.bindings), set(self.used)
        try:
            call = operators.TABLE[op].gen(self, x)
            if call is None:
                raise RejectCall()
            return self._bind(op, call)
        except RejectCall:
            del self.params[n_params:]
            del self.values[n_values:]
            del self.bindings[n_bindings:]
            self.used = used
            return None

    def operand_call(self, op, call):
        """An operand that is a call of its own (variance's mean of the data, say): bound before
        the call that takes it, and dropped with it if that is rejected (try_op). Raises
        RejectCall when it has no acceptable value."""
        return self._bind(op, call)

    def current(self):
        """The value the next call starts from: the newest float result (the chain goes on), or
        any earlier float value (a branch)."""
        floats = [v for v in self.values if v.is_float() and self.usable(v)]
        if self.segment is not None:
            return [v for v in floats if v.segment is self.segment][-1]
        results = [v for v in floats if v.param is None and v.grad]
        if results and self.rng.random() < 0.9:
            return results[-1]
        return floats[int(self.rng.integers(len(floats)))]

    def open_segment(self):
        clean = [v for v in self.values if v.is_float() and v.segment is None and not v.dirty]
        if not clean:
            return
        segment = []
        self.segment = segment
        inputs = [clean[-1]]
        if len(clean) > 1 and self.rng.random() < 0.3:
            inputs.append(clean[int(self.rng.integers(len(clean) - 1))])
        if self.rng.random() < 0.15:  # a duplicated start: equal calls on one value are one marker
            inputs.append(inputs[0])
        for v in inputs:
            try:
                segment.append(self._bind("grad.start_checkpoint", Call([v])))
            except RejectCall:  # too large to mark
                pass
        if not segment:
            self.segment = None

    def close_segment(self):
        segment = self.segment
        inside = [v for v in self.values if v.segment is segment and v.is_float()]
        ends = [inside[-1]]
        if len(inside) > 1 and self.rng.random() < 0.3:
            ends.append(inside[int(self.rng.integers(len(inside) - 1))])
        closed = lambda start: any(self._depends(e, start) for e in ends)
        for start in segment:  # every start reaches an end, or a duplicate of it does
            twins = [s for s in segment if self._marked(s) is self._marked(start)]
            if not any(closed(s) for s in twins):
                ends.append(start)
        for v in ends:
            self._bind("grad.end_checkpoint", Call([v]))
        for v in self.values:
            if v.segment is segment:
                v.segment, v.dirty = None, True
        self.segment = None

    def _marked(self, start):
        """The value a grad.start_checkpoint marks."""
        return next(b for b in self.bindings if b.out is start).args[0]

    def _depends(self, v, start):
        if v is start:
            return True
        producer = next((b for b in self.bindings if b.out is v), None)
        return producer is not None and any(self._depends(a, start) for a in producer.values())

    def build(self):
        self.param(self.shape(), self.dtype)
        self.int_calls = INT_CALLS
        if self.rng.random() < INT_PROGRAMS:
            self.param(self.shape(), str(self.rng.choice(INT_DTYPES)))
            self.int_calls = 0.5
        if self.rng.random() < 0.4:
            self.param(self.sub_shape(self.params[0].shape), self.dtype)
        n_calls = int(self.rng.integers(2, 9))
        forced_at = int(self.rng.integers(0, n_calls))
        segment_left = 0  # calls still to place inside the open segment
        for call in range(n_calls):
            if self.segment is None and self.rng.random() < 0.08:
                self.open_segment()
                segment_left = int(self.rng.choice(4, p=[0.1, 0.4, 0.3, 0.2]))
            if self.segment is not None and segment_left == 0:
                self.close_segment()
            x, ops = self.current(), self.generated
            ints = [v for v in self.values if v.dtype in INT_DTYPES and self.usable(v)]
            if ints and self.rng.random() < self.int_calls:  # an integer chain
                x, ops = ints[-1], self.int_ops
            for attempt in range(30):
                if self.forced_op and call >= forced_at and attempt < 10 and x.is_float():
                    op = self.forced_op
                else:
                    op = ops[int(self.rng.integers(len(ops)))]
                if self.try_op(op, x) is not None:
                    if op == self.forced_op:
                        self.forced_op = None
                    break
            segment_left -= 1
        if self.segment is not None:
            self.close_segment()
        return self.finish()

    def finish(self):
        results = [b.out for b in self.bindings if b.out.is_float() and b.out.grad]
        if not results:
            return None
        # the value computed by the featured operator and the most bindings, the newest of those
        result = max(reversed(results), key=lambda v: (any(op == self.featured for _, op in v.ops), len(v.ops)))
        if result.shape and self.rng.random() < 0.3:  # a scalar result
            try:
                result = self._bind(str(self.rng.choice(["sum", "mean"])), Call([result]))
            except RejectCall:
                pass
        fields = [result]
        if self.rng.random() < 0.6:
            fields += [b.out for b in self.bindings if id(b.out) not in self.used and b.out is not result]
        for _ in range(int(self.rng.choice(3, p=[0.5, 0.3, 0.2]))):  # unused parameters
            dtype = str(self.rng.choice([self.dtype, "float32", "int64"]))
            p = self.param(self.shape(), dtype) if dtype != "int64" else self.int_param(self.shape(), dtype, 5)
            self.params.remove(p)
            self.params.insert(int(self.rng.integers(0, len(self.params) + 1)), p)
        floats = [p.name for p in self.params if p.is_float()]
        wrt = None
        if self.rng.random() < 0.6:
            wrt = [str(n) for n in self.rng.permutation(floats)[:int(self.rng.integers(1, len(floats) + 1))]]
        self.group_bindings(fields)
        prog = Program(self.params, self.bindings, fields, wrt, nest_result=self.rng.random() < 0.3)
        # beyond the core comparisons, each program gets some of the others (they cost a gradc
        # compile or run each): remat mostly where there are segments, second order with the
        # round trip of the dumped adjoint it needs
        segments = any(b.op == "grad.start_checkpoint" for b in self.bindings)
        checks = {c for c, p in (("olevel", 0.5), ("cpu", 0.5), ("remat-none", 0.9 if segments else 0.2),
                                 ("roundtrip", 0.5)) if self.rng.random() < p}
        prog.olevel = int(self.rng.choice([0, 1, 3]))
        prog.cpu = str(self.rng.choice(["x86-64", "haswell"]))
        if "roundtrip" in checks:
            checks.add("second")
            prog.second = int(self.rng.integers(len(prog.wrt_params())))
        prog.checks = frozenset(checks)
        return prog

    def group_bindings(self, fields):
        """Chooses the bindings printed as helper functions and tuples (BindingGroup)."""
        users = {}
        for b in self.bindings:
            for a in b.values():
                users.setdefault(id(a), []).append(b)
        i = 0
        while i < len(self.bindings):
            b = self.bindings[i]
            nxt = self.bindings[i + 1] if i + 1 < len(self.bindings) else None
            plain = lambda c: c is not None and c.op not in operators.SEGMENT_MARKERS
            r = self.rng.random()
            if not plain(b) or r > 0.15:
                i += 1
                continue
            if plain(nxt) and r < 0.05 and b.out not in nxt.values():
                kind = "tuple" if self.rng.random() < 0.5 else "helper-tuple"
                group = BindingGroup(kind, [b, nxt])
            elif plain(nxt) and r < 0.1 and users.get(id(b.out)) == [nxt] and b.out not in fields:
                group = BindingGroup("helper", [b, nxt])
            else:
                group = BindingGroup("helper", [b])
            for member in group.bindings:
                member.group = group
            i += len(group.bindings)


def _broadcasts(small, big):
    try:
        return np.broadcast_shapes(small, big) == tuple(big)
    except ValueError:
        return False


def parse_default(text):
    """A registry attribute default (`None`, `False`, `-1`, `"mean"`, `0.5f`, `[1, 1]`,
    `(required)`) as a value."""
    if text == "(required)" or text == "None":
        return None
    if text in ("True", "False"):
        return text == "True"
    if text.startswith('"'):
        return text.strip('"')
    if text.startswith("["):
        return [parse_default(t.strip()) for t in text[1:-1].split(",") if t.strip()]
    try:
        return int(text)
    except ValueError:
        return float(text.rstrip("f"))


def generate(seed, registry, forced_op=None):
    return Generator(seed, registry, forced_op).build()
