//===- cuda/Gemm.cpp - matrix products tiled through shared memory --------===//
//
// See Cuda.h (gemm_cuda_tiled). A block of 256 threads (16 x 16) computes one
// tile of C: 128 x 128 where both M and N reach it, else 64 x 64. Its
// threads walk K in slices (8 deep for the large tile, 16 for the small),
// each slice of A (tile rows x depth) and of B (depth x tile columns) copied
// into shared memory, four elements per thread and operand, adjacent threads
// reading adjacent elements of the operand's contiguous axis (a fused
// producer is computed once per element there); a barrier; then each thread
// multiplies from shared memory into its register tile (8 x 8 or 4 x 4):
// rows ty + 16i and columns tx + 16j of the block's tile, so that a warp's
// stores of C are 16 adjacent columns. The next slice's elements are loaded
// into registers before the current slice is multiplied, and stored into
// shared memory after the barrier that ends it: the global loads' latency
// overlaps the FMAs (double buffering through registers). Elements past M, N
// or K are zeros in shared memory and never stored.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"

namespace gradc {
namespace {

constexpr int64_t kThreads = 256, kThreadRows = 16, kThreadCols = 16; // 16 x 16 threads
constexpr int64_t kPerThread = 4; // elements of each operand's slice a thread copies

/// A tile configuration: the block's tile of C and the depth of a K slice.
struct Tiles {
  int64_t m, n, k;
  int64_t reg_m() const { return m / kThreadRows; }
  int64_t reg_n() const { return n / kThreadCols; }
};
constexpr Tiles kLarge{128, 128, 8}, kSmall{64, 64, 16};
static_assert(kLarge.m * kLarge.k == kPerThread * kThreads && kLarge.k * kLarge.n == kPerThread * kThreads);
static_assert(kSmall.m * kSmall.k == kPerThread * kThreads && kSmall.k * kSmall.n == kPerThread * kThreads);

LExprPtr lt(LExprPtr a, int64_t b) { return compare(CompareOp::LT, std::move(a), int_imm(b)); }
LExprPtr clamp(LExprPtr a, int64_t extent) { return binary(BinaryOp::Min, std::move(a), int_imm(extent - 1)); }
LExprPtr div(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorDiv, std::move(a), int_imm(b)); }
LExprPtr mod(LExprPtr a, int64_t b) { return binary(BinaryOp::FloorMod, std::move(a), int_imm(b)); }

/// Whether a product has enough outputs for a tile.
bool tiles(const Gemm &g) { return g.M >= 32 && g.N >= 32 && g.K >= 1; }

} // namespace

StmtPtr gemm_cuda_tiled(KernelCtx &k, const Gemm &g) {
  if (!tiles(g))
    return gemm_nest(k, g);
  const Tiles t = g.M >= kLarge.m && g.N >= kLarge.n ? kLarge : kSmall;
  const DType acc = g.acc();
  const int64_t tiles_n = (g.N + t.n - 1) / t.n, tiles_m = (g.M + t.m - 1) / t.m;
  const int64_t steps = (g.K + t.k - 1) / t.k;
  GRADC_CHECK(t.k * (t.m + t.n) * dtype_bytes(acc) <= k.target.shared_memory_bytes, "cuda gemm",
              "the product's tiles exceed the target's shared memory");

  auto a_tile = std::make_shared<Buffer>(Buffer{"a_tile", acc, {t.k * t.m}, BufferScope::Shared});
  auto b_tile = std::make_shared<Buffer>(Buffer{"b_tile", acc, {t.k * t.n}, BufferScope::Shared});
  BufferPtr c = k.local("c_tile", acc, t.reg_m() * t.reg_n());
  BufferPtr next = k.local("next_slices", acc, 2 * kPerThread); // A's four, then B's
  LVarPtr block = k.var("block"), thread = k.var("thread"), step = k.var("step");
  LExprPtr b = var_ref(block), th = var_ref(thread), s = var_ref(step);
  LExprPtr m0 = mul(div(b, tiles_n), int_imm(t.m)), n0 = mul(mod(b, tiles_n), int_imm(t.n));
  LExprPtr ty = div(th, kThreadCols), tx = mod(th, kThreadCols);
  LExprPtr zero = constant_of(0, acc);

  // Element r of a thread's share of one operand's slice: e = thread + 256r
  // of the (width x depth) slice, whose fastest axis is the operand's
  // contiguous one; at [kk * width + i] in shared memory.
  struct Place {
    LExprPtr i, kk;
  };
  auto place = [&](int64_t r, int64_t width, bool k_fastest) {
    LExprPtr e = add(th, int_imm(r * kThreads));
    return k_fastest ? Place{div(e, t.k), mod(e, t.k)} : Place{mod(e, width), div(e, width)};
  };
  // Loads the slice starting at k0 into the registers; stores them into shared memory.
  auto fetch = [&](const LExprPtr &k0) {
    std::vector<StmtPtr> out;
    for (int64_t r = 0; r < kPerThread; ++r) {
      Place pa = place(r, t.m, g.a_contiguous_in_k), pb = place(r, t.n, g.b_contiguous_in_k);
      LExprPtr am = add(m0, pa.i), ak = add(k0, pa.kk), bn = add(n0, pb.i), bk = add(k0, pb.kk);
      out.push_back(store(next, int_imm(r), select(both(lt(am, g.M), lt(ak, g.K)),
                                                   g.a_acc(clamp(am, g.M), clamp(ak, g.K)), zero)));
      out.push_back(store(next, int_imm(kPerThread + r),
                          select(both(lt(bn, g.N), lt(bk, g.K)), g.b_acc(clamp(bk, g.K), clamp(bn, g.N)), zero)));
    }
    return seq(std::move(out));
  };
  auto deposit = [&]() {
    std::vector<StmtPtr> out;
    for (int64_t r = 0; r < kPerThread; ++r) {
      Place pa = place(r, t.m, g.a_contiguous_in_k), pb = place(r, t.n, g.b_contiguous_in_k);
      out.push_back(store(a_tile, add(mul(pa.kk, int_imm(t.m)), pa.i), load(next, int_imm(r))));
      out.push_back(store(b_tile, add(mul(pb.kk, int_imm(t.n)), pb.i), load(next, int_imm(kPerThread + r))));
    }
    return seq(std::move(out));
  };

  // The register tile's update from the slices in shared memory.
  LVarPtr kk = k.var("kk"), i = k.var("i"), j = k.var("j");
  LExprPtr kv = var_ref(kk), iv = var_ref(i), jv = var_ref(j);
  LExprPtr a = load(a_tile, add(mul(kv, int_imm(t.m)), add(ty, mul(iv, int_imm(kThreadRows)))));
  LExprPtr bb = load(b_tile, add(mul(kv, int_imm(t.n)), add(tx, mul(jv, int_imm(kThreadCols)))));
  LExprPtr at = add(mul(iv, int_imm(t.reg_n())), jv);
  LExprPtr sum = is_float(acc) ? mul_add(a, bb, load(c, at)) : add(load(c, at), mul(a, bb));
  StmtPtr multiply = for_loop(
      kk, t.k, ForKind::Serial,
      for_loop(i, t.reg_m(), ForKind::Unrolled, for_loop(j, t.reg_n(), ForKind::Unrolled, store(c, at, sum))));
  // Step s: the next slice into registers (the branch is the same for every
  // thread), this one multiplied, a barrier, the next one into shared memory.
  LExprPtr more = lt(add(s, int_imm(1)), steps);
  StmtPtr body = seq({if_then(more, fetch(mul(add(s, int_imm(1)), int_imm(t.k)))), multiply, barrier(),
                      if_then(more, deposit()), barrier()});

  // Zero the register tile, the first slice, the steps, then store what lies inside C.
  LVarPtr i0 = k.var("i"), i1 = k.var("i"), j1 = k.var("j");
  StmtPtr init = for_loop(i0, t.reg_m() * t.reg_n(), ForKind::Unrolled, store(c, var_ref(i0), zero));
  LExprPtr m = add(m0, add(ty, mul(var_ref(i1), int_imm(kThreadRows))));
  LExprPtr n = add(n0, add(tx, mul(var_ref(j1), int_imm(kThreadCols))));
  // The position clamped too (a no-op under the guard): in bounds by the
  // verifier's interval arithmetic, which knows no guard of a sum.
  StmtPtr put = if_then(both(lt(m, g.M), lt(n, g.N)),
                        g.store(clamp(m, g.M), clamp(n, g.N),
                                cast(g.dtype, load(c, add(mul(var_ref(i1), int_imm(t.reg_n())), var_ref(j1))))));
  StmtPtr per_thread =
      alloc(c, alloc(next, seq({init, fetch(int_imm(0)), deposit(), barrier(), for_loop(step, steps, ForKind::Serial, body),
                                for_loop(i1, t.reg_m(), ForKind::Unrolled,
                                         for_loop(j1, t.reg_n(), ForKind::Unrolled, put))})));
  return for_loop(block, tiles_m * tiles_n, ForKind::BlockIdx,
                  alloc(a_tile, alloc(b_tile, for_loop(thread, kThreads, ForKind::ThreadIdx, per_thread))));
}

} // namespace gradc
