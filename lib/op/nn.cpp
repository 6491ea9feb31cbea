//===- nn.cpp - dense, matmul, bias_add, softmax, log_softmax, nll_loss ---===//
//
// The neural-network operators. All but nn.bias_add (injective: it fuses)
// lower to a loop nest of their own, and each accumulates in a fixed order so
// that a recomputed value is bitwise identical to the original.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Ops.h"
#include "gradc/op/Gemm.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

#include <cmath>
#include <limits>

namespace gradc {
namespace {

LExprPtr add(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
LExprPtr mul(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }

/// The last two axes swapped (the matrix transpose of a batch of matrices).
ExprPtr transpose_last2(Builder &b, ExprPtr x) {
  int64_t r = x->type.rank();
  std::vector<int64_t> axes(r);
  for (int64_t i = 0; i < r; ++i)
    axes[i] = i;
  std::swap(axes[r - 1], axes[r - 2]);
  Attrs a;
  a.set("axes", AttrValue::ints(axes));
  return b.call(ops::transpose, {x}, a);
}

//===--- nn.dense ---------------------------------------------------------===//

Type dense_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *w = x ? ctx.tensor(1) : nullptr;
  if (!w)
    return Type::unknown();
  if (x->rank() < 1 || w->rank() != 2)
    return ctx.fail("expects data of rank >= 1 and a weight of rank 2, found " + x->str() + " and " + w->str());
  if (x->dtype != w->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(x->dtype) + " and " + dtype_name(w->dtype) + " differ");
  if (x->shape.back() != w->shape[1])
    return ctx.fail("inner dimensions differ (" + std::to_string(x->shape.back()) + " vs " +
                    std::to_string(w->shape[1]) + ")");
  if (!ctx.attrs.is_none("units") && ctx.attrs.get_int("units") != w->shape[0])
    return ctx.fail("units=" + std::to_string(ctx.attrs.get_int("units")) + " but the weight has " +
                    std::to_string(w->shape[0]) + " rows");
  const std::string &od = ctx.attrs.get_str("out_dtype");
  if (!od.empty() && od != dtype_name(x->dtype))
    return ctx.fail("out_dtype \"" + od + "\" differs from the input dtype " + dtype_name(x->dtype));
  Shape out = x->shape;
  out.back() = w->shape[0];
  return Type::tensor(out, x->dtype);
}

/// out[m, n] = sum_k x[m, k] w[n, k]   (m ranges over the flattened batch),
/// through one of the matrix-product strategies of Gemm.h.
template <GemmStrategy strategy> StmtPtr dense_kernel(KernelCtx &k) {
  const Shape &xs = k.arg_type(0).shape;
  Gemm g;
  g.K = xs.back();
  g.N = k.arg_type(1).shape[0];
  g.M = num_rows(xs); // not elements / K: K may be 0
  g.dtype = k.call.type.dtype;
  g.b_contiguous_in_k = true;
  g.epilogue = bool(k.epilogue);
  const Shape &os = k.call.type.shape;
  g.a = [&](const LExprPtr &m, const LExprPtr &kk) {
    return xs.size() == 2 ? k.in(0, {m, kk}) : k.in(0, unravel_index(add(mul(m, int_imm(g.K)), kk), xs));
  };
  g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return k.in(1, {n, kk}); };
  Shape batch(os.begin(), os.end() - 1);
  g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
    Index idx = batch.size() == 1 ? Index{m} : unravel_index(m, batch);
    idx.push_back(n);
    return store(k.out(), add(mul(m, int_imm(g.N)), n), k.finish(idx, v));
  };
  if (k.out()->dtype == g.dtype)
    g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
      return store(k.out(), add(mul(m, int_imm(g.N)), n), v);
    };
  g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), add(mul(m, int_imm(g.N)), n)); };
  return strategy(k, g);
}

//===--- matmul -----------------------------------------------------------===//

/// numpy's rules: a 1-D left operand is a row (1, K) and a 1-D right
/// operand a column (K, 1), and the added axis is dropped from the result.
struct MatmulShapes {
  Shape a, b, batch, out; // a and b promoted to rank >= 2; out is the promoted result
  bool a_vec = false, b_vec = false;
  std::string error;

  MatmulShapes(const Shape &as, const Shape &bs) : a(as), b(bs), a_vec(as.size() == 1), b_vec(bs.size() == 1) {
    if (as.empty() || bs.empty()) {
      error = "operands must have rank >= 1";
      return;
    }
    if (a_vec)
      a.insert(a.begin(), 1);
    if (b_vec)
      b.push_back(1);
    int64_t K = a.back(), Kb = b[b.size() - 2];
    if (K != Kb) {
      error = "inner dimensions differ (" + std::to_string(K) + " vs " + std::to_string(Kb) + ")";
      return;
    }
    Shape ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
    auto bc = broadcast_shapes(ab, bb);
    if (!bc) {
      error = "batch shapes " + shape_str(ab) + " and " + shape_str(bb) + " are not broadcast-compatible";
      return;
    }
    batch = *bc;
    out = batch;
    out.push_back(a[a.size() - 2]);
    out.push_back(b.back());
  }
  Shape result() const {
    Shape r = batch;
    if (!a_vec)
      r.push_back(out[out.size() - 2]);
    if (!b_vec)
      r.push_back(out.back());
    return r;
  }
};

Type matmul_rel(RelationCtx &ctx) {
  const Type *a = ctx.tensor(0), *b = a ? ctx.tensor(1) : nullptr;
  if (!b)
    return Type::unknown();
  if (a->dtype != b->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(a->dtype) + " and " + dtype_name(b->dtype) + " differ");
  MatmulShapes s(a->shape, b->shape);
  if (!s.error.empty())
    return ctx.fail(s.error + " (found " + a->str() + " and " + b->str() + ")");
  return Type::tensor(s.result(), a->dtype);
}

/// out[.., i, j] = sum_k a[.., i, k] b[.., k, j], one matrix product per
/// batch index (batch axes broadcast), each accumulated in k order.
template <GemmStrategy strategy> StmtPtr matmul_kernel(KernelCtx &k) {
  const Shape &os = k.call.type.shape;
  MatmulShapes s(k.arg_type(0).shape, k.arg_type(1).shape);
  Shape a_batch(s.a.begin(), s.a.end() - 2), b_batch(s.b.begin(), s.b.end() - 2);
  return loop_nest(
      s.batch,
      [&](const Index &batch) {
        Gemm g;
        g.M = s.out[s.out.size() - 2];
        g.N = s.out.back();
        g.K = s.a.back();
        g.dtype = k.call.type.dtype;
        g.epilogue = bool(k.epilogue);
        auto with = [](Index idx, std::initializer_list<LExprPtr> tail) {
          idx.insert(idx.end(), tail);
          return idx;
        };
        Index ab = broadcast_index(a_batch, s.batch, batch), bb = broadcast_index(b_batch, s.batch, batch);
        g.a = [&](const LExprPtr &m, const LExprPtr &kk) { return k.in(0, s.a_vec ? Index{kk} : with(ab, {m, kk})); };
        g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return k.in(1, s.b_vec ? Index{kk} : with(bb, {kk, n})); };
        auto out_index = [&](const LExprPtr &m, const LExprPtr &n) {
          Index idx = batch;
          if (!s.a_vec)
            idx.push_back(m);
          if (!s.b_vec)
            idx.push_back(n);
          return idx;
        };
        g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
          Index idx = out_index(m, n);
          return store(k.out(), flat_index(os, idx), k.finish(idx, v));
        };
        g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), flat_index(os, out_index(m, n))); };
        if (k.out()->dtype == g.dtype)
          g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
            return store(k.out(), flat_index(os, out_index(m, n)), v);
          };
        return strategy(k, g);
      },
      // The packed schedule's jobs are Parallel loops already (which may not
      // nest) and share its packed rows and partial sums (kernel scratch):
      // its batch iterations run one after another.
      strategy == gemm_cpu_packed ? ForKind::Serial : ForKind::Spatial);
}

/// da = g bᵀ, db = aᵀ g on the promoted operands; the pass sums the
/// adjoints over broadcast batch axes.
Grads matmul_grad(GradCtx &g) {
  ExprPtr a = g.arg(0), b = g.arg(1);
  MatmulShapes s(a->type.shape, b->type.shape);
  ExprPtr A = g.b.reshape(a, s.a), B = g.b.reshape(b, s.b), G = g.b.reshape(g.grad, s.out);
  ExprPtr da = g.b.call(ops::matmul, {G, transpose_last2(g.b, B)});
  ExprPtr db = g.b.call(ops::matmul, {transpose_last2(g.b, A), G});
  auto drop = [&](ExprPtr d, bool vec, size_t axis_from_end) {
    if (!vec)
      return d;
    Shape sh = d->type.shape;
    sh.erase(sh.end() - axis_from_end);
    return g.b.reshape(d, sh);
  };
  return {drop(da, s.a_vec, 2), drop(db, s.b_vec, 1)};
}

//===--- nn.bias_add --------------------------------------------------------===//

Type bias_add_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0), *b = x ? ctx.tensor(1) : nullptr;
  if (!b)
    return Type::unknown();
  auto axis = ctx.axis(ctx.attrs.get_int("axis"), x->rank());
  if (!axis)
    return Type::unknown();
  if (x->dtype != b->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(x->dtype) + " and " + dtype_name(b->dtype) + " differ");
  if (b->rank() != 1 || b->shape[0] != x->shape[*axis])
    return ctx.fail("bias of type " + b->str() + " does not match axis " + std::to_string(*axis) + " of size " +
                    std::to_string(x->shape[*axis]));
  return *x;
}

int64_t norm_axis(const Attrs &a, int64_t rank) {
  int64_t axis = a.get_int("axis");
  return axis < 0 ? axis + rank : axis;
}

//===--- softmax and log_softmax ------------------------------------------===//

/// Loops over every element of `shape` except along `axis`; `body` receives
/// a function that completes the index with a position along the axis.
using AtAxis = std::function<Index(const LExprPtr &)>;
StmtPtr over_axis(const Shape &shape, int64_t axis, const std::function<StmtPtr(const AtAxis &)> &body) {
  Shape outer = shape;
  outer.erase(outer.begin() + axis);
  return loop_nest(
      outer,
      [&](const Index &oidx) {
        AtAxis at = [&, oidx](const LExprPtr &j) {
          Index idx = oidx;
          idx.insert(idx.begin() + axis, j);
          return idx;
        };
        return body(at);
      },
      ForKind::Spatial);
}

/// m = max_j x_j; s = sum_j exp(x_j - m); out_j = finalize(x_j, m, s), all in
/// the dtype's accumulator (float16 rows are computed in float32, as PyTorch
/// does) and rounded to the output dtype once.
StmtPtr softmax_kernel(KernelCtx &k, bool log) {
  const Shape &shape = k.arg_type(0).shape;
  int64_t axis = norm_axis(k.attrs(), int64_t(shape.size())), n = shape[axis];
  DType dt = k.out()->dtype, at = dtype_info(dt).accumulator;
  // softmax in the accumulator dtype writes each exp as it sums it, then
  // scales it in place: one exp per element, not two, and three passes.
  bool write_exp = !log && dt == at;
  // out_j from x_j - m and s' = log(s) (log_softmax) or 1 / s: a multiply
  // per element, where a divide cost about a cycle each (softmax of 4096 x
  // 1024: 3.6 -> 3.3 ms); within an ulp of the quotient.
  auto finalize = [&](const LExprPtr &shifted, const LExprPtr &written, const LExprPtr &sum) {
    if (log)
      return binary(BinaryOp::Sub, shifted, sum);
    return binary(BinaryOp::Mul, write_exp ? written : unary(UnaryOp::Exp, shifted), sum);
  };
  auto finish_sum = [&](const LExprPtr &total) {
    return log ? unary(UnaryOp::Log, total) : binary(BinaryOp::Div, constant_of(1, at), total);
  };
  int64_t rows = n ? num_elements(shape) / n : 0;
  if (!k.target.is_gpu() && n < 2 * kSumLanes && rows >= 2) {
    // On a CPU, short rows side by side, one per lane (64 rows of 10 classes:
    // 8.5 -> 1.6 us); each row reduced in order. On a GPU a row is a thread's.
    Shape outer = shape;
    outer.erase(outer.begin() + axis);
    return over_lane_blocks(k, rows, [&](const LExprPtr &first, int64_t width) {
      auto idx = [&](const LExprPtr &l, const LExprPtr &j) {
        Index i = unravel_index(binary(BinaryOp::Add, first, l), outer);
        i.insert(i.begin() + axis, j);
        return i;
      };
      auto x = [&](const LExprPtr &l, const LExprPtr &j) { return cast(at, k.in(0, idx(l, j))); };
      auto out_at = [&](const LExprPtr &l, const LExprPtr &j) { return flat_index(shape, idx(l, j)); };
      BufferPtr m = k.local("row_max", at, width), s = k.local("row_sum", at, width);
      auto shifted = [&](const LExprPtr &l, const LExprPtr &j) { return binary(BinaryOp::Sub, x(l, j), load(m, l)); };
      StmtPtr max = lanes_max(k, width, n, at, x, [&](const LExprPtr &l, const LExprPtr &v) { return store(m, l, v); });
      StmtPtr sum = compensated_sums(
          k, width, n, at, [&](const LExprPtr &l, const LExprPtr &j) { return unary(UnaryOp::Exp, shifted(l, j)); },
          [&](const LExprPtr &l, const LExprPtr &total) { return store(s, l, finish_sum(total)); },
          write_exp ? [&](const LExprPtr &l, const LExprPtr &j, const LExprPtr &e) { return store(k.out(), out_at(l, j), e); }
                    : std::function<StmtPtr(const LExprPtr &, const LExprPtr &, const LExprPtr &)>());
      LVarPtr j = k.var("j"), l = k.var("l");
      LExprPtr jr = var_ref(j), lr = var_ref(l);
      StmtPtr write = for_loop(
          j, n, ForKind::Spatial,
          for_loop(l, width, ForKind::Spatial,
                   store(k.out(), out_at(lr, jr),
                         cast(dt, finalize(shifted(lr, jr), load(k.out(), out_at(lr, jr)), load(s, lr))))));
      return alloc(m, alloc(s, seq({max, sum, write})));
    });
  }
  // Both reductions run in lanes along the row (vectorized; exp is vector
  // arithmetic), the sum compensated every 2 exponentials of a lane (all of
  // one sign: Kernel.h, compensated_sum's group): a fixed, shape-determined
  // order, accurate on long rows.
  return over_axis(shape, axis, [&](const AtAxis &at_axis) {
    auto x = [&](const LExprPtr &j) { return cast(at, k.in(0, at_axis(j))); };
    auto out_at = [&](const LExprPtr &j) { return flat_index(shape, at_axis(j)); };
    return lane_max(k, n, at, x, [&](const LExprPtr &max) {
      auto shifted = [&](const LExprPtr &j) { return binary(BinaryOp::Sub, x(j), max); };
      auto exp_of = [&](const LExprPtr &j) { return unary(UnaryOp::Exp, shifted(j)); };
      auto also = [&](const LExprPtr &j, const LExprPtr &e) { return store(k.out(), out_at(j), e); };
      return compensated_sum(
          k, n, at, exp_of,
          [&](const LExprPtr &total) {
            LVarPtr j = k.var("j");
            BufferPtr s = k.local("row_sum", at);
            LExprPtr jr = var_ref(j), sum = load(s, int_imm(0));
            return alloc(s, seq({store(s, int_imm(0), finish_sum(total)),
                                 for_loop(j, n, ForKind::Spatial,
                                          store(k.out(), out_at(jr),
                                                cast(dt, finalize(shifted(jr), load(k.out(), out_at(jr)), sum))))}));
          },
          write_exp ? std::function<StmtPtr(const LExprPtr &, const LExprPtr &)>(also) : nullptr, 2);
    });
  });
}

Type softmax_rel(RelationCtx &ctx) {
  const Type *x = ctx.tensor(0);
  if (!x)
    return Type::unknown();
  if (!require_float(ctx, *x))
    return Type::unknown();
  if (x->rank() == 0)
    return ctx.fail("expects a tensor of rank >= 1");
  return ctx.axis(ctx.attrs.get_int("axis"), x->rank()) ? *x : Type::unknown();
}

ExprPtr sum_keep(Builder &b, ExprPtr x, int64_t axis) {
  Attrs a;
  a.set("axis", AttrValue::ints({axis}));
  a.set("keepdims", AttrValue::of(true));
  return b.call(ops::sum, {x}, a);
}

//===--- nn.nll_loss ------------------------------------------------------===//
// pred (N, C, d...) or (C); target (N, d...) or (); weights (C). PyTorch's
// semantics: loss = -w[t] pred[t] where t != ignore_index; "mean" divides the
// sum by the total weight of the counted targets. Out-of-range targets are
// clamped into [0, C) so a bad target can never read out of bounds.

Type nll_loss_rel(RelationCtx &ctx) {
  const Type *p = ctx.tensor(0), *t = p ? ctx.tensor(1) : nullptr;
  if (!t)
    return Type::unknown();
  if (!is_float(p->dtype))
    return ctx.fail("predictions must be floating-point, found " + p->str());
  if (!is_int(t->dtype))
    return ctx.fail("targets must be int32 or int64, found " + t->str());
  if (p->rank() == 0)
    return ctx.fail("predictions must have rank >= 1");
  Shape expect = p->shape;
  expect.erase(expect.begin() + (p->rank() == 1 ? 0 : 1));
  if (t->shape != expect)
    return ctx.fail("targets of shape " + shape_str(t->shape) + " do not match predictions " + shape_str(p->shape) +
                    " (expected " + shape_str(expect) + ")");
  if (ctx.args.size() == 3) {
    const Type *w = ctx.tensor(2);
    if (!w)
      return Type::unknown();
    int64_t C = p->shape[p->rank() == 1 ? 0 : 1];
    if (w->dtype != p->dtype || w->shape != Shape{C})
      return ctx.fail("weights must be " + Type::tensor({C}, p->dtype).str() + ", found " + w->str());
  }
  const std::string &r = ctx.attrs.get_str("reduction");
  if (r != "mean" && r != "sum" && r != "none")
    return ctx.fail("reduction must be \"mean\", \"sum\" or \"none\", found \"" + r + "\"");
  return Type::tensor(r == "none" ? t->shape : Shape{}, p->dtype);
}

/// Index helpers shared by nll_loss and its backward operator.
struct NllShape {
  Shape pred, target;
  int64_t class_axis, C;
  explicit NllShape(const Shape &p) : pred(p) {
    class_axis = p.size() == 1 ? 0 : 1;
    C = p[class_axis];
    target = p;
    target.erase(target.begin() + class_axis);
  }
  Index pred_index(const Index &tidx, const LExprPtr &c) const {
    Index idx = tidx;
    idx.insert(idx.begin() + class_axis, c);
    return idx;
  }
};

/// The target at `tidx` as an in-range int64 class, and whether it counts.
std::pair<LExprPtr, LExprPtr> nll_target(const KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx) {
  LExprPtr t = k.in(target_arg, tidx);
  LExprPtr counted = compare(CompareOp::NE, t, constant_of(double(k.attrs().get_int("ignore_index")), t->dtype));
  LExprPtr t64 = cast(DType::Int64, t);
  LExprPtr cls = binary(BinaryOp::Min, binary(BinaryOp::Max, t64, int_imm(0)), int_imm(s.C - 1));
  return {cls, counted};
}

/// A counted target outside [0, C) is reported through the function's status
/// (the entry point returns kStatusIndexOutOfRange); the kernel itself reads
/// the clamped class, so memory stays safe.
StmtPtr check_target(KernelCtx &k, size_t target_arg, const NllShape &s, const Index &tidx) {
  LExprPtr t = k.in(target_arg, tidx);
  LExprPtr counted = compare(CompareOp::NE, t, constant_of(double(k.attrs().get_int("ignore_index")), t->dtype));
  LExprPtr t64 = cast(DType::Int64, t);
  LExprPtr outside = binary(BinaryOp::Or, compare(CompareOp::LT, t64, int_imm(0)),
                            compare(CompareOp::GE, t64, int_imm(s.C)));
  return k.report_if(binary(BinaryOp::And, counted, outside), kStatusIndexOutOfRange, t64,
                     flat_index(s.target, tidx), s.C);
}

LExprPtr nll_weight(const KernelCtx &k, size_t weight_arg, const LExprPtr &cls, DType dt) {
  return k.call.args.size() > weight_arg ? k.in(weight_arg, {cls}) : constant_of(1, dt);
}

StmtPtr nll_loss_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(0).shape);
  DType dt = k.out()->dtype;
  const std::string &reduction = k.attrs().get_str("reduction");
  LExprPtr zero_f = constant_of(0, dt), zero = int_imm(0);
  auto loss_at = [&](const Index &tidx, LExprPtr *weight) {
    auto [cls, counted] = nll_target(k, 1, s, tidx);
    LExprPtr w = nll_weight(k, 2, cls, dt);
    if (weight)
      *weight = select(counted, w, zero_f);
    return select(counted, unary(UnaryOp::Neg, mul(w, k.in(0, s.pred_index(tidx, cls)))), zero_f);
  };
  if (reduction == "none")
    return loop_nest(s.target, [&](const Index &tidx) {
      return seq({check_target(k, 1, s, tidx), store(k.out(), flat_index(s.target, tidx), loss_at(tidx, nullptr))});
    });
  // Sums accumulate in the dtype's accumulator (float16 in float32).
  DType at = dtype_info(dt).accumulator;
  LExprPtr zero_a = constant_of(0, at);
  BufferPtr acc = k.local("loss", at), wsum = k.local("weight", at);
  StmtPtr body = loop_nest(
      s.target,
      [&](const Index &tidx) {
        LExprPtr w;
        LExprPtr l = loss_at(tidx, &w);
        return seq({check_target(k, 1, s, tidx), store(acc, zero, add(load(acc, zero), cast(at, l))),
                    store(wsum, zero, add(load(wsum, zero), cast(at, w)))});
      },
      ForKind::Reduce);
  LExprPtr result = reduction == "mean" ? binary(BinaryOp::Div, load(acc, zero), load(wsum, zero)) : load(acc, zero);
  return alloc(acc, alloc(wsum, seq({store(acc, zero, zero_a), store(wsum, zero, zero_a), body,
                                     store(k.out(), zero, cast(dt, result))})));
}

//===--- grad.nll_loss_backward -------------------------------------------===//

Type nll_loss_backward_rel(RelationCtx &ctx) {
  const Type *g = ctx.tensor(0), *p = g ? ctx.tensor(1) : nullptr;
  if (!p)
    return Type::unknown();
  std::vector<Type> fwd(ctx.args.begin() + 1, ctx.args.end());
  RelationCtx inner{ctx.op, fwd, ctx.attrs, "", 1}; // fwd[i] is argument i + 1
  Type loss = nll_loss_rel(inner);
  if (!inner.error.empty()) {
    ctx.error = inner.error;
    return Type::unknown();
  }
  if (*g != loss)
    return ctx.fail("output_grad of type " + g->str() + " does not match the loss type " + loss.str());
  return *p;
}

/// dpred[.., c, ..] = -w[t] g / (total weight if mean) where c == t and t counts
StmtPtr nll_loss_backward_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(1).shape);
  DType dt = k.out()->dtype;
  const std::string &reduction = k.attrs().get_str("reduction");
  LExprPtr zero_f = constant_of(0, dt), zero = int_imm(0);
  DType at = dtype_info(dt).accumulator; // the total weight sums in the accumulator dtype
  BufferPtr wsum = k.local("weight", at);
  std::vector<StmtPtr> stmts{store(wsum, zero, constant_of(1, at))};
  if (reduction == "mean") {
    stmts = {store(wsum, zero, constant_of(0, at)),
             loop_nest(
                 s.target,
                 [&](const Index &tidx) {
                   auto [cls, counted] = nll_target(k, 2, s, tidx);
                   LExprPtr w = select(counted, nll_weight(k, 3, cls, dt), zero_f);
                   return store(wsum, zero, add(load(wsum, zero), cast(at, w)));
                 },
                 ForKind::Reduce, "r")};
  }
  stmts.push_back(loop_nest(s.pred, [&](const Index &pidx) {
    Index tidx = pidx;
    LExprPtr c = tidx[s.class_axis];
    tidx.erase(tidx.begin() + s.class_axis);
    auto [cls, counted] = nll_target(k, 2, s, tidx);
    LExprPtr hit = binary(BinaryOp::And, counted, compare(CompareOp::EQ, cls, c));
    LExprPtr g = k.in(0, reduction == "none" ? tidx : Index{});
    LExprPtr value =
        cast(dt, binary(BinaryOp::Div, cast(at, unary(UnaryOp::Neg, mul(nll_weight(k, 3, cls, dt), g))), load(wsum, zero)));
    return store(k.out(), flat_index(s.pred, pidx), select(hit, value, zero_f));
  }));
  return alloc(wsum, seq(std::move(stmts)));
}

//===--- grad.nll_loss_weights_backward -----------------------------------===//
// With S = sum_i -w[t_i] p_i and W = sum_i w[t_i] over counted targets:
//   none/sum: dw[c] = sum_{i: t_i = c} g_i (-p_i)
//   mean (L = S / W): dw[c] = g / W * sum_{i: t_i = c} (-p_i - L)

Type nll_loss_weights_backward_rel(RelationCtx &ctx) {
  if (ctx.args.size() != 4)
    return ctx.fail("expects the weights of the loss");
  Type pred = nll_loss_backward_rel(ctx);
  if (pred.is_unknown() || !ctx.error.empty())
    return pred;
  return ctx.args[3];
}

/// dw[c] = sum over targets of class c of -g p[n, c] (sum; g per target for
/// "none"), and for "mean" (g / W) (-p[n, c] - L) with W the total weight and
/// L the loss. Every sum (W, S = W L, each class's) is compensated in the
/// dtype's accumulator, as reductions are: a plain float32 scatter over
/// 10^5 rows was off by 2e-4 relative, float16 by 1%.
StmtPtr nll_loss_weights_backward_kernel(KernelCtx &k) {
  NllShape s(k.arg_type(1).shape);
  DType dt = k.out()->dtype, acc = dtype_info(dt).accumulator;
  const std::string &reduction = k.attrs().get_str("reduction");
  LExprPtr zero_a = constant_of(0, acc), zero = int_imm(0);
  auto in_acc = [&](int i, const Index &idx) { return cast(acc, k.in(i, idx)); };
  BufferPtr sums = k.scratch("class_sums", acc, s.C), carries = k.scratch("class_carries", acc, s.C);
  BufferPtr scale = k.local("scale", acc), shift = k.local("shift", acc);
  BufferPtr scale_carry = k.local("scale_carry", acc), shift_carry = k.local("shift_carry", acc);
  std::vector<StmtPtr> stmts{loop_nest({s.C}, [&](const Index &c) {
    return seq({store(sums, c[0], zero_a), store(carries, c[0], zero_a)});
  })};
  if (reduction == "mean") { // W into scale and S into shift, then scale = g / W, shift = L
    for (const BufferPtr &b : {scale, shift, scale_carry, shift_carry})
      stmts.push_back(store(b, zero, zero_a));
    stmts.push_back(loop_nest(
        s.target,
        [&](const Index &tidx) {
          auto [cls, counted] = nll_target(k, 2, s, tidx);
          LExprPtr w = in_acc(3, {cls});
          LExprPtr l = unary(UnaryOp::Neg, mul(w, in_acc(1, s.pred_index(tidx, cls))));
          return if_then(counted, seq({neumaier(scale, scale_carry, zero, w), neumaier(shift, shift_carry, zero, l)}));
        },
        ForKind::Reduce, "r"));
    LExprPtr W = neumaier_total(scale, scale_carry, zero), S = neumaier_total(shift, shift_carry, zero);
    stmts.push_back(store(shift, zero, binary(BinaryOp::Div, S, W)));
    stmts.push_back(store(scale, zero, binary(BinaryOp::Div, in_acc(0, {}), W)));
  }
  stmts.push_back(loop_nest(
      s.target,
      [&](const Index &tidx) {
        auto [cls, counted] = nll_target(k, 2, s, tidx);
        LExprPtr neg_p = unary(UnaryOp::Neg, in_acc(1, s.pred_index(tidx, cls)));
        LExprPtr term = reduction == "mean" ? mul(load(scale, zero), binary(BinaryOp::Sub, neg_p, load(shift, zero)))
                                            : mul(in_acc(0, reduction == "none" ? tidx : Index{}), neg_p);
        return if_then(counted, neumaier(sums, carries, cls, term));
      },
      ForKind::Reduce));
  stmts.push_back(loop_nest({s.C}, [&](const Index &c) {
    return store(k.out(), c[0], cast(dt, neumaier_total(sums, carries, c[0])));
  }));
  return alloc(scale, alloc(shift, alloc(scale_carry, alloc(shift_carry, seq(std::move(stmts))))));
}

constexpr const char *kNllWeighted =
    "%p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], %w: Tensor[(3,), float64]";
constexpr const char *kNllBackward =
    "%g: float64, %p: Tensor[(2, 3, 2), float64], %t: Tensor[(2, 2), int64], %w: Tensor[(3,), float64]";

OpBuilder &nll_attrs(OpBuilder &b) {
  return b.attr("reduction", AttrKind::String, AttrValue::of("mean"), "\"mean\", \"sum\" or \"none\".")
      .attr("ignore_index", AttrKind::Int, AttrValue::of(-100), "A target value that contributes nothing.");
}

/// The arguments and attributes the backward operators of nn.nll_loss share:
/// the loss's adjoint followed by the loss's own arguments.
OpBuilder &nll_backward(OpBuilder &b) {
  return nll_attrs(b.arg("output_grad", "Tensor", "The adjoint of the loss.")
                       .arg("predictions", "Tensor[(N, C, d...)]", "As for nn.nll_loss.")
                       .arg("targets", "Tensor[(N, d...), int]", "As for nn.nll_loss.")
                       .arg("weights", "Tensor[(C,)]", "As for nn.nll_loss.")
                       .support_level(10));
}

/// Two per multiply-add: 2 · (output elements) · K.
int64_t matrix_product_flops(const Expr &call) {
  const Shape &a = call.args[0]->type.shape;
  return 2 * num_elements(call.type.shape) * (a.empty() ? 1 : a.back());
}

} // namespace

void register_nn_ops(OpRegistry &reg) {
  reg.add("nn.dense")
      .describe("Fully connected layer: data · weightᵀ.")
      .arg("data", "Tensor[(d..., K)]", "The input.")
      .arg("weight", "Tensor[(N, K)]", "The weight matrix.")
      .attr("units", AttrKind::OptInt, AttrValue::none(), "N, checked against the weight if given.")
      .attr("out_dtype", AttrKind::String, AttrValue::of(""), "Must be empty or the input dtype.")
      .support_level(1)
      .relation("Dense", dense_rel)
      .gradient([](GradCtx &g) -> Grads {
        // d(x wᵀ) = dx wᵀ + x dwᵀ:  dx = g w,  dw = gᵀ x (batch axes flattened)
        ExprPtr x = g.arg(0), w = g.arg(1);
        int64_t K = x->type.shape.back(), N = w->type.shape[0];
        int64_t M = num_rows(x->type.shape);
        ExprPtr g2 = g.b.reshape(g.grad, {M, N});
        ExprPtr dx = g.b.call(ops::matmul, {g2, w});
        ExprPtr dw = g.b.call(ops::matmul, {transpose_last2(g.b, g2), g.b.reshape(x, {M, K})});
        return {g.b.reshape(dx, x->type.shape), dw};
      })
      .kernel(dense_kernel<gemm_nest>)
      .strategy(TargetKind::CPU, dense_kernel<gemm_cpu_packed>)
      .fuses_epilogue()
      .fuses_producers()
      .flops(matrix_product_flops)
      .example("%x: Tensor[(2, 3), float64], %w: Tensor[(4, 3), float64]", "nn.dense(%x, %w, units=4)")
      .example("%x: Tensor[(5, 11), float64], %w: Tensor[(6, 11), float64]", "nn.dense(%x, %w)"); // full tiles

  reg.add("matmul")
      .describe("numpy matmul: batched over leading axes with broadcasting; a 1-D operand is a row (left) or a column "
                "(right).")
      .arg("a", "Tensor[(..., M, K)] or Tensor[(K,)]", "The left operand.")
      .arg("b", "Tensor[(..., K, N)] or Tensor[(K,)]", "The right operand.")
      .support_level(1)
      .relation("Matmul", matmul_rel)
      .gradient(matmul_grad)
      .kernel(matmul_kernel<gemm_nest>)
      .strategy(TargetKind::CPU, matmul_kernel<gemm_cpu_packed>)
      .fuses_epilogue()
      .fuses_producers()
      .flops(matrix_product_flops)
      .example("%a: Tensor[(2, 2, 3), float64], %b: Tensor[(3, 4), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(5, 3), float64], %b: Tensor[(3, 35), float64]", "matmul(%a, %b)") // full tiles
      .example("%a: Tensor[(3,), float64], %b: Tensor[(2, 3, 4), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(2, 4, 3), float64], %b: Tensor[(3,), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(3,), float64], %b: Tensor[(3,), float64]", "matmul(%a, %b)");

  reg.add("nn.bias_add")
      .describe("Add a 1-D bias along `axis`.")
      .arg("data", "Tensor", "The input.")
      .arg("bias", "Tensor[(C,)]", "The bias, one value per index of `axis`.")
      .attr("axis", AttrKind::Int, AttrValue::of(1), "The axis the bias runs along.")
      .support_level(1)
      .relation("BiasAdd", bias_add_rel)
      .gradient([](GradCtx &g) -> Grads { // d(x + b) = dx + db summed over every other axis
        Attrs a;
        a.set("axis", AttrValue::ints({norm_axis(g.attrs(), g.arg(0)->type.rank())}));
        a.set("exclude", AttrValue::of(true));
        return {g.grad, g.b.call(ops::sum, {g.grad}, a)};
      })
      .element([](ElementCtx &c) {
        int64_t axis = norm_axis(c.attrs(), c.arg_type(0).rank());
        return add(c.in(0, c.index), c.in(1, {c.index[axis]}));
      })
      .example("%x: Tensor[(2, 3, 4), float64], %b: Tensor[(3,), float64]", "nn.bias_add(%x, %b)");

  reg.add("nn.softmax")
      .describe("exp(x - max) / sum(exp(x - max)) along `axis`.")
      .arg("data", "Tensor", "The input.")
      .attr("axis", AttrKind::Int, AttrValue::of(-1), "The axis to normalise.")
      .support_level(1)
      .relation("Softmax", softmax_rel)
      .gradient([](GradCtx &g) -> Grads { // dx = y (g - sum(g y))
        int64_t axis = norm_axis(g.attrs(), g.arg(0)->type.rank());
        ExprPtr gy = g.b.mul(g.grad, g.out);
        return {g.b.mul(g.out, g.b.sub(g.grad, sum_keep(g.b, gy, axis)))};
      })
      .kernel([](KernelCtx &k) { return softmax_kernel(k, false); })
      .example("%x: Tensor[(2, 5), float64]", "nn.softmax(%x)");

  reg.add("nn.log_softmax")
      .describe("x - max - log(sum(exp(x - max))) along `axis`.")
      .arg("data", "Tensor", "The input.")
      .attr("axis", AttrKind::Int, AttrValue::of(-1), "The axis to normalise.")
      .support_level(1)
      .relation("Softmax", softmax_rel)
      .gradient([](GradCtx &g) -> Grads { // dx = g - exp(y) sum(g)
        int64_t axis = norm_axis(g.attrs(), g.arg(0)->type.rank());
        ExprPtr soft = g.b.call(ops::exp, {g.out});
        return {g.b.sub(g.grad, g.b.mul(soft, sum_keep(g.b, g.grad, axis)))};
      })
      .kernel([](KernelCtx &k) { return softmax_kernel(k, true); })
      .example("%x: Tensor[(2, 3, 4), float64]", "nn.log_softmax(%x, axis=1)");

  nll_attrs(reg.add("nn.nll_loss")
                .describe("Negative log-likelihood loss (PyTorch semantics).")
                .arg("predictions", "Tensor[(N, C, d...)]", "Log-probabilities.")
                .arg("targets", "Tensor[(N, d...), int]", "Class indices.")
                .arg("weights", "Tensor[(C,)]", "Optional per-class weights.")
                .arity(2, 3)
                .support_level(10)
                .relation("NLLLoss", nll_loss_rel))
      .gradient([](GradCtx &g) -> Grads { // see grad.nll_loss_backward; targets are not differentiable
        std::vector<ExprPtr> args{g.grad};
        args.insert(args.end(), g.call.args.begin(), g.call.args.end());
        Grads out{g.b.call(ops::nll_loss_backward, args, g.attrs()), nullptr};
        if (args.size() == 4)
          out.push_back(g.b.call(ops::nll_loss_weights_backward, args, g.attrs()));
        return out;
      })
      .kernel(nll_loss_kernel)
      .example("%p: Tensor[(3, 4), float64], %t: Tensor[(3,), int64]", "nn.nll_loss(%p, %t)", false, 4)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w)", true, 3)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w, reduction=\"sum\", ignore_index=1)", true, 3)
      .example(kNllWeighted, "nn.nll_loss(%p, %t, %w, reduction=\"none\", ignore_index=0)", true, 3);

  nll_backward(
      reg.add("grad.nll_loss_backward").describe("The gradient of nn.nll_loss with respect to its predictions."))
      .arity(3, 4)
      .relation("NLLLossBackward", nll_loss_backward_rel)
      // dp = nll_loss_backward(g, p, t, w) is linear in g and free of p, and
      // sum(G * dp) = g · nll_loss(G, t, w) for every reduction (per element
      // for "none"), so for an adjoint G of dp:
      //   d/dg = nll_loss(G, t, w),  d/dp = 0,  d/dw = nll_loss_weights_backward(g, G, t, w)
      .gradient([](GradCtx &g) -> Grads {
        const auto &a = g.call.args;
        std::vector<ExprPtr> loss_args{g.grad, a[2]};
        if (a.size() == 4)
          loss_args.push_back(a[3]);
        Grads out{g.b.call(ops::nll_loss, loss_args, g.attrs()), nullptr, nullptr};
        if (a.size() == 4)
          out.push_back(g.b.call(ops::nll_loss_weights_backward, {a[0], g.grad, a[2], a[3]}, g.attrs()));
        return out;
      })
      .kernel(nll_loss_backward_kernel)
      .example(kNllBackward, "grad.nll_loss_backward(%g, %p, %t, %w)", true, 3)
      .example(kNllBackward, "grad.nll_loss_backward(%g, %p, %t, %w, reduction=\"sum\", ignore_index=1)", true, 3);

  nll_backward(reg.add("grad.nll_loss_weights_backward")
                   .describe("The gradient of nn.nll_loss with respect to its class weights."))
      .relation("NLLLossWeightsBackward", nll_loss_weights_backward_rel)
      .kernel(nll_loss_weights_backward_kernel);
}

} // namespace gradc
