//===- Gemm.cpp - register-tiled matrix products in the loop IR -----------===//
//
// See Gemm.h for the three schedules. Tiles that do not divide M or N are
// emitted as separate, smaller tiles, so every loop has a constant extent.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Gemm.h"

namespace gradc {
namespace {

LExprPtr add(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
LExprPtr mul(LExprPtr a, LExprPtr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
LExprPtr imm(int64_t v) { return int_imm(v); }

/// A `for` that disappears when its extent is 0 and is a plain statement when 1.
StmtPtr loop(KernelCtx &k, const std::string &name, int64_t extent, ForKind kind,
             const std::function<StmtPtr(const LExprPtr &)> &body) {
  if (extent <= 0)
    return seq({});
  if (extent == 1)
    return body(imm(0));
  LVarPtr v = k.var(name);
  return for_loop(v, extent, kind, body(var_ref(v)));
}

constexpr int64_t kRows = 4; // MR: rows of a register tile

/// Splits [0, extent) into full tiles of `tile` and one partial tile; calls
/// emit(first index, tile size) inside a loop over the full tiles.
StmtPtr tiled(KernelCtx &k, const std::string &name, int64_t extent, int64_t tile, ForKind kind,
              const std::function<StmtPtr(const LExprPtr &, int64_t)> &emit) {
  std::vector<StmtPtr> parts;
  parts.push_back(loop(k, name, extent / tile, kind, [&](const LExprPtr &t) { return emit(mul(t, imm(tile)), tile); }));
  if (extent % tile)
    parts.push_back(emit(imm(extent / tile * tile), extent % tile));
  return seq(std::move(parts));
}

/// Columns [0, nv) as whole vectors (an unrolled loop of vectorized loops of
/// VL lanes) and a shorter vectorized loop for the rest, so every accumulator
/// access has a constant offset once vectorized and stays in a register.
StmtPtr columns(KernelCtx &k, int64_t nv, int64_t vl, const std::function<StmtPtr(const LExprPtr &)> &body) {
  StmtPtr full = loop(k, "jv", nv / vl, ForKind::Unrolled, [&](const LExprPtr &jv) {
    return loop(k, "j", vl, ForKind::Vectorized, [&](const LExprPtr &j) { return body(add(mul(jv, imm(vl)), j)); });
  });
  StmtPtr rest =
      loop(k, "j", nv % vl, ForKind::Vectorized, [&](const LExprPtr &j) { return body(add(j, imm(nv / vl * vl))); });
  return seq({full, rest});
}

/// B contiguous along n: acc[mi][j] += a(m0 + mi, k) b(k, n0 + j), k in order.
StmtPtr axpy_tile(KernelCtx &k, const Gemm &g, const LExprPtr &m0, int64_t mr, const LExprPtr &n0, int64_t nv) {
  const int64_t vl = k.target.vector_lanes(g.acc());
  BufferPtr acc = k.local("acc", g.acc(), mr * nv);
  LExprPtr zero = constant_of(0, g.acc());
  auto slot = [&](const LExprPtr &mi, const LExprPtr &j) { return add(mul(mi, imm(nv)), j); };
  StmtPtr init = loop(k, "j", mr * nv, ForKind::Vectorized, [&](const LExprPtr &j) { return store(acc, j, zero); });
  StmtPtr body = loop(k, "k", g.K, ForKind::Serial, [&](const LExprPtr &kk) {
    return loop(k, "mi", mr, ForKind::Unrolled, [&](const LExprPtr &mi) {
      return columns(k, nv, vl, [&](const LExprPtr &j) {
        LExprPtr prod = mul(g.a_acc(add(m0, mi), kk), g.b_acc(kk, add(n0, j)));
        return store(acc, slot(mi, j), add(load(acc, slot(mi, j)), prod));
      });
    });
  });
  StmtPtr out = loop(k, "mi", mr, ForKind::Serial, [&](const LExprPtr &mi) {
    return loop(k, "j", nv, ForKind::Vectorized,
                [&](const LExprPtr &j) { return g.store(add(m0, mi), add(n0, j), cast(g.dtype, load(acc, slot(mi, j)))); });
  });
  return alloc(acc, seq({init, body, out}));
}

/// A and B contiguous along k: mr × nr dot products, each with VL partial
/// sums acc[mi][ni][l] over k = VL kb + l, reduced in l order, then the
/// k tail in order.
StmtPtr dot_tile(KernelCtx &k, const Gemm &g, const LExprPtr &m0, int64_t mr, const LExprPtr &n0, int64_t nr) {
  const int64_t vl = k.target.vector_lanes(g.acc()), blocks = g.K / vl;
  BufferPtr acc = k.local("acc", g.acc(), mr * nr * vl), sum = k.local("sum", g.acc());
  LExprPtr zero = constant_of(0, g.acc()), z = imm(0);
  auto slot = [&](const LExprPtr &mi, const LExprPtr &ni, const LExprPtr &l) {
    return add(mul(add(mul(mi, imm(nr)), ni), imm(vl)), l);
  };
  auto product = [&](const LExprPtr &mi, const LExprPtr &ni, const LExprPtr &kk) {
    return mul(g.a_acc(add(m0, mi), kk), g.b_acc(kk, add(n0, ni)));
  };
  StmtPtr init =
      loop(k, "j", mr * nr * vl, ForKind::Vectorized, [&](const LExprPtr &j) { return store(acc, j, zero); });
  StmtPtr body = loop(k, "kb", blocks, ForKind::Serial, [&](const LExprPtr &kb) {
    return loop(k, "mi", mr, ForKind::Unrolled, [&](const LExprPtr &mi) {
      return loop(k, "ni", nr, ForKind::Unrolled, [&](const LExprPtr &ni) {
        return loop(k, "l", vl, ForKind::Vectorized, [&](const LExprPtr &l) {
          LExprPtr s = slot(mi, ni, l);
          return store(acc, s, add(load(acc, s), product(mi, ni, add(mul(kb, imm(vl)), l))));
        });
      });
    });
  });
  StmtPtr out = loop(k, "mi", mr, ForKind::Unrolled, [&](const LExprPtr &mi) {
    return loop(k, "ni", nr, ForKind::Unrolled, [&](const LExprPtr &ni) {
      auto accumulate = [&](const LExprPtr &v) { return store(sum, z, add(load(sum, z), v)); };
      return seq({store(sum, z, blocks ? load(acc, slot(mi, ni, z)) : zero),
                  loop(k, "l", blocks ? vl - 1 : 0, ForKind::Serial,
                       [&](const LExprPtr &l) { return accumulate(load(acc, slot(mi, ni, add(l, imm(1))))); }),
                  loop(k, "kt", g.K - blocks * vl, ForKind::Serial,
                       [&](const LExprPtr &kt) { return accumulate(product(mi, ni, add(kt, imm(blocks * vl)))); }),
                  g.store(add(m0, mi), add(n0, ni), cast(g.dtype, load(sum, z)))});
    });
  });
  return alloc(acc, alloc(sum, seq({init, body, out})));
}

} // namespace

StmtPtr gemm_nest(KernelCtx &k, const Gemm &g) {
  return loop_nest({g.M, g.N}, [&](const Index &mn) {
    BufferPtr acc = k.local("acc", g.acc());
    LExprPtr z = imm(0);
    StmtPtr red = loop(k, "k", g.K, ForKind::Reduce, [&](const LExprPtr &kk) {
      return store(acc, z, add(load(acc, z), mul(g.a_acc(mn[0], kk), g.b_acc(kk, mn[1]))));
    });
    return alloc(acc, seq({store(acc, z, constant_of(0, g.acc())), red, g.store(mn[0], mn[1], cast(g.dtype, load(acc, z)))}));
  });
}

StmtPtr gemm_cpu_tiles(KernelCtx &k, const Gemm &g) {
  const int64_t vl = k.target.vector_lanes(g.acc());
  // Register budget: 16 accumulator vectors per tile.
  const int64_t cols = g.b_contiguous_in_k ? 4 : 4 * vl;
  auto tile = [&](const LExprPtr &m0, int64_t mr, const LExprPtr &n0, int64_t nc) {
    return g.b_contiguous_in_k ? dot_tile(k, g, m0, mr, n0, nc) : axpy_tile(k, g, m0, mr, n0, nc);
  };
  return tiled(k, "mt", g.M, kRows, ForKind::Parallel, [&](const LExprPtr &m0, int64_t mr) {
    return tiled(k, "nt", g.N, cols, ForKind::Serial,
                 [&](const LExprPtr &n0, int64_t nc) { return tile(m0, mr, n0, nc); });
  });
}

} // namespace gradc
