//===- linear.cpp - nn.dense, matmul, nn.bias_add ---------------------------===//
//
// The linear-algebra operators. nn.dense and matmul describe their product
// as a Gemm (op/Gemm.h): the generic kernels emit it as gemm_nest, the
// CPU's strategies (cpu/linear.cpp) as the packed product, accumulating in
// a fixed order so that a recomputed value is bitwise identical; nn.bias_add
// is injective and fuses into the product's epilogue.
//
//===----------------------------------------------------------------------===//
#include "linear.h"
#include "gradc/op/attrs/linear.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"
#include "gradc/loops/Functor.h"

#include <functional>

namespace gradc {
namespace {

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
  auto attrs = ctx.attrs_as<DenseAttrs>();
  if (attrs.units && *attrs.units != w->shape[0])
    return ctx.fail_attr("units", "units=" + std::to_string(*attrs.units) + " but the weight has " +
                                      std::to_string(w->shape[0]) + " rows");
  const std::string &od = attrs.out_dtype;
  if (!od.empty() && od != dtype_name(x->dtype))
    return ctx.fail_attr("out_dtype", "out_dtype \"" + od + "\" differs from the input dtype " + dtype_name(x->dtype));
  Shape out = x->shape;
  out.back() = w->shape[0];
  return Type::tensor(out, x->dtype);
}

} // namespace

StmtPtr dense_as_gemm(KernelCtx &k, GemmStrategy strategy) {
  const Shape &xs = k.arg_type(0).shape;
  Gemm g;
  g.K = xs.back();
  g.N = k.arg_type(1).shape[0];
  g.M = num_rows(xs); // not elements / K: K may be 0
  g.dtype = k.call.type.dtype;
  g.b_contiguous_in_k = true;
  g.epilogue = k.has_epilogue();
  g.alone = true;
  const Shape &os = k.call.type.shape;
  g.a = [&](const LExprPtr &m, const LExprPtr &kk) {
    return xs.size() == 2 ? k.in(0, {m, kk}) : k.in(0, unravel_index(add(mul(m, int_imm(g.K)), kk), xs));
  };
  g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return k.in(1, {n, kk}); };
  Shape batch(os.begin(), os.end() - 1);
  g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
    Index idx = batch.size() == 1 ? Index{m} : unravel_index(m, batch);
    idx.push_back(n);
    return k.put(idx, add(mul(m, int_imm(g.N)), n), v);
  };
  if (k.output_holds_partials(g.dtype))
    g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
      return store(k.out(), add(mul(m, int_imm(g.N)), n), v);
    };
  g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), add(mul(m, int_imm(g.N)), n)); };
  return strategy(k, g);
}

namespace {

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

/// nn.batch_matmul: (B, M, K) × (B, N, K) -> (B, M, N) by default (b
/// transposed), either batch 1 broadcast.
Type batch_matmul_rel(RelationCtx &ctx) {
  const Type *a = ctx.tensor(0), *b = a ? ctx.tensor(1) : nullptr;
  if (!b)
    return Type::unknown();
  if (a->rank() != 3 || b->rank() != 3)
    return ctx.fail("expects two tensors of rank 3, found " + a->str() + " and " + b->str());
  if (a->dtype != b->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(a->dtype) + " and " + dtype_name(b->dtype) + " differ");
  auto at = ctx.attrs_as<BatchMatmulAttrs>();
  if (!at.out_dtype.empty() && at.out_dtype != dtype_name(a->dtype))
    return ctx.fail_attr("out_dtype", "out_dtype \"" + at.out_dtype + "\" differs from the input dtype " +
                                          dtype_name(a->dtype));
  int64_t batch = a->shape[0], other = b->shape[0];
  if (batch != other && batch != 1 && other != 1)
    return ctx.fail("batch sizes " + std::to_string(batch) + " and " + std::to_string(other) + " differ");
  int64_t m = a->shape[at.transpose_a ? 2 : 1], ka = a->shape[at.transpose_a ? 1 : 2];
  int64_t n = b->shape[at.transpose_b ? 1 : 2], kb = b->shape[at.transpose_b ? 2 : 1];
  if (ka != kb)
    return ctx.fail("inner dimensions differ (" + std::to_string(ka) + " vs " + std::to_string(kb) + ")");
  return Type::tensor({std::max(batch, other), m, n}, a->dtype);
}

/// a (..., M, K) times a b without batch axes (K, N) (a linear layer over
/// (B, T, K)): one product over a's rows flattened, (B·…·M) × N, as
/// nn.dense's, not one small product per batch index.
StmtPtr matmul_flat_rows(KernelCtx &k, GemmStrategy strategy, const MatmulShapes &s) {
  Gemm g;
  g.K = s.a.back();
  g.N = s.out.back();
  Shape rows(s.out.begin(), s.out.end() - 1); // (batch..., M)
  g.M = num_elements(rows);
  g.dtype = k.call.type.dtype;
  g.epilogue = k.has_epilogue();
  g.a = [&](const LExprPtr &m, const LExprPtr &kk) {
    return k.in(0, unravel_index(add(mul(m, int_imm(g.K)), kk), k.arg_type(0).shape));
  };
  g.b = [&](const LExprPtr &kk, const LExprPtr &n) { return k.in(1, s.b_vec ? Index{kk} : Index{kk, n}); };
  auto flat = [&](const LExprPtr &m, const LExprPtr &n) { return add(mul(m, int_imm(g.N)), n); };
  g.store = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
    Index idx = unravel_index(m, rows);
    if (!s.b_vec)
      idx.push_back(n);
    return k.put(idx, flat(m, n), v);
  };
  if (k.output_holds_partials(g.dtype))
    g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) { return store(k.out(), flat(m, n), v); };
  g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), flat(m, n)); };
  return strategy(k, g);
}

} // namespace

StmtPtr matmul_as_gemms(KernelCtx &k, GemmStrategy strategy) {
  const Shape &os = k.call.type.shape;
  MatmulShapes s(k.arg_type(0).shape, k.arg_type(1).shape);
  Shape a_batch(s.a.begin(), s.a.end() - 2), b_batch(s.b.begin(), s.b.end() - 2);
  if (b_batch.empty() && num_elements(s.batch) > 1)
    return matmul_flat_rows(k, strategy, s);
  bool shared = false; // a product that uses kernel scratch (shared by its jobs)
  auto scratch = k.scratch;
  k.scratch = [&](const std::string &name, DType dtype, int64_t size) {
    shared = true;
    return scratch(name, dtype, size);
  };
  StmtPtr nest = loop_nest(
      s.batch,
      [&](const Index &batch) {
        Gemm g;
        g.M = s.out[s.out.size() - 2];
        g.N = s.out.back();
        g.K = s.a.back();
        g.dtype = k.call.type.dtype;
        g.epilogue = k.has_epilogue();
        g.alone = s.batch.empty();
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
          return k.put(idx, flat_index(os, idx), v);
        };
        g.load = [&](const LExprPtr &m, const LExprPtr &n) { return load(k.out(), flat_index(os, out_index(m, n))); };
        if (k.output_holds_partials(g.dtype))
          g.store_raw = [&](const LExprPtr &m, const LExprPtr &n, const LExprPtr &v) {
            return store(k.out(), flat_index(os, out_index(m, n)), v);
          };
        return strategy(k, g);
      },
      ForKind::Spatial);
  k.scratch = scratch;
  // A packed product big enough for jobs of its own runs them as Parallel
  // loops (which may not nest) sharing its packed rows and partial sums
  // (kernel scratch): its batch iterations then run one after another. A
  // batch of small products (attention's heads) has neither, and the batch
  // loop is the one the schedule may run on the pool, each iteration with
  // its own local panels.
  if (!shared && !contains_loop(nest, ForKind::Parallel))
    return nest;
  std::function<StmtPtr(const StmtPtr &, size_t)> serial = [&](const StmtPtr &st, size_t depth) -> StmtPtr {
    if (depth == 0 || st->kind != StmtKind::For)
      return st;
    return with_for(*st, ForKind::Serial, serial(st->body, depth - 1));
  };
  return serial(nest, s.batch.size());
}

namespace {

/// da = g bᵀ, db = aᵀ g on the promoted operands; the pass sums the
/// adjoints over broadcast batch axes. Where b has no batch axes and a has
/// (x · W over (B, T, K)), db = Σ over the batch of aᵀ g is one product over
/// the flattened rows, (B·…·M, K)ᵀ · (B·…·M, N): no (B, …, K, N) product per
/// position summed afterwards (ViT-B/16: a 1.39 GB buffer per layer).
Grads matmul_grad(GradCtx &g) {
  ExprPtr a = g.arg(0), b = g.arg(1);
  MatmulShapes s(a->type.shape, b->type.shape);
  ExprPtr A = g.b.reshape(a, s.a), B = g.b.reshape(b, s.b), G = g.b.reshape(g.grad, s.out);
  ExprPtr da = g.b.call(ops::matmul, {G, g.b.transpose_last2(B)});
  ExprPtr db;
  if (s.b.size() == 2 && !s.batch.empty()) {
    int64_t K = s.a.back(), N = s.out.back(), rows = num_elements(s.batch) * s.out[s.out.size() - 2];
    db = g.b.call(ops::matmul, {g.b.transpose_last2(g.b.reshape(a, {rows, K})), g.b.reshape(g.grad, {rows, N})});
  } else {
    db = g.b.call(ops::matmul, {g.b.transpose_last2(A), G});
  }
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
  auto axis = ctx.attrs_as<BiasAddAttrs>().axis;
  if (x->dtype != b->dtype)
    return ctx.fail(std::string("dtypes ") + dtype_name(x->dtype) + " and " + dtype_name(b->dtype) + " differ");
  if (b->rank() != 1 || b->shape[0] != x->shape[axis])
    return ctx.fail("bias of type " + b->str() + " does not match axis " + std::to_string(axis) + " of size " +
                    std::to_string(x->shape[axis]));
  return *x;
}

/// Two per multiply-add: 2 · (output elements) · K.
int64_t matrix_product_flops(const Expr &call) {
  const Shape &a = call.args[0]->type.shape;
  return 2 * num_elements(call.type.shape) * (a.empty() ? 1 : a.back());
}

} // namespace

void register_linear_ops(OpRegistry &reg) {
  reg.add("nn.dense")
      .describe("Fully connected layer: data · weightᵀ.")
      .arg("data", "Tensor[(d..., K)]", "The input.")
      .arg("weight", "Tensor[(N, K)]", "The weight matrix.")
      .attrs<DenseAttrs>()
      .support_level(1)
      .relation("Dense", dense_rel)
      .gradient([](GradCtx &g) -> Grads {
        // d(x wᵀ) = dx wᵀ + x dwᵀ:  dx = g w,  dw = gᵀ x (batch axes flattened)
        ExprPtr x = g.arg(0), w = g.arg(1);
        int64_t K = x->type.shape.back(), N = w->type.shape[0];
        int64_t M = num_rows(x->type.shape);
        ExprPtr g2 = g.b.reshape(g.grad, {M, N});
        ExprPtr dx = g.b.call(ops::matmul, {g2, w});
        ExprPtr dw = g.b.call(ops::matmul, {g.b.transpose_last2(g2), g.b.reshape(x, {M, K})});
        return {g.b.reshape(dx, x->type.shape), dw};
      })
      .kernel([](KernelCtx &k) { return dense_as_gemm(k, gemm_nest); })
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
      .kernel([](KernelCtx &k) { return matmul_as_gemms(k, gemm_nest); })
      .fuses_epilogue()
      .fuses_producers()
      .flops(matrix_product_flops)
      .example("%a: Tensor[(2, 2, 3), float64], %b: Tensor[(3, 4), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(5, 3), float64], %b: Tensor[(3, 35), float64]", "matmul(%a, %b)") // full tiles
      .example("%a: Tensor[(3,), float64], %b: Tensor[(2, 3, 4), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(2, 4, 3), float64], %b: Tensor[(3,), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(3,), float64], %b: Tensor[(3,), float64]", "matmul(%a, %b)")
      // TVM's numeric-gradient matrix for matmul
      .example("%a: Tensor[(2, 3), float64], %b: Tensor[(3, 4), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(4,), float64], %b: Tensor[(4,), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(4,), float64], %b: Tensor[(2, 3, 4, 5), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(2, 3, 4, 5), float64], %b: Tensor[(5,), float64]", "matmul(%a, %b)")
      .example("%a: Tensor[(2, 3, 1, 4, 5), float64], %b: Tensor[(3, 2, 5, 4), float64]", "matmul(%a, %b)");

  reg.add("nn.batch_matmul")
      .describe("A batch of matrix products, (B, M, K) · (B, N, K)ᵀ by default; a batch of 1 broadcasts.")
      .arg("a", "Tensor[(B, M, K)]", "The left operand ((B, K, M) with transpose_a).")
      .arg("b", "Tensor[(B, N, K)]", "The right operand ((B, K, N) without transpose_b).")
      .attrs<BatchMatmulAttrs>()
      .support_level(10)
      .relation("BatchMatmul", batch_matmul_rel)
      .decompose([](Builder &b, const std::vector<ExprPtr> &a, const Attrs &attrs) {
        auto at = composite_attrs<BatchMatmulAttrs>(a, attrs);
        // the transposes fuse into the product as producers (read where packed)
        ExprPtr x = at.transpose_a ? b.transpose_last2(a[0]) : a[0];
        ExprPtr y = at.transpose_b ? b.transpose_last2(a[1]) : a[1];
        return b.call(ops::matmul, {x, y});
      })
      .example("%a: Tensor[(2, 3, 4), float64], %b: Tensor[(2, 5, 4), float64]", "nn.batch_matmul(%a, %b)")
      .example("%a: Tensor[(1, 4, 3), float64], %b: Tensor[(2, 4, 5), float64]",
               "nn.batch_matmul(%a, %b, transpose_a=True, transpose_b=False)");

  reg.add("nn.bias_add")
      .describe("Add a 1-D bias along `axis`.")
      .arg("data", "Tensor", "The input.")
      .arg("bias", "Tensor[(C,)]", "The bias, one value per index of `axis`.")
      .attrs<BiasAddAttrs>()
      .support_level(1)
      .relation("BiasAdd", bias_add_rel)
      .gradient([](GradCtx &g) -> Grads { // d(x + b) = dx + db summed over every other axis
        return {g.grad, g.b.sum(g.grad, {g.attrs_as<BiasAddAttrs>().axis}, false, true)};
      })
      .element([](ElementCtx &c) {
        int64_t axis = c.attrs_as<BiasAddAttrs>().axis;
        return add(c.in(0, c.index), c.in(1, {c.index[axis]}));
      })
      .example("%x: Tensor[(2, 3, 4), float64], %b: Tensor[(3,), float64]", "nn.bias_add(%x, %b)");
}

} // namespace gradc
