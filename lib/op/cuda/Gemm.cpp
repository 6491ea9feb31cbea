//===- cuda/Gemm.cpp - matrix products tiled through shared memory --------===//
//
// See Cuda.h (gemm_cuda_tiled). A block of 256 threads computes a 64 x 64
// tile of C. For each step of 16 along K its threads first copy the step's
// 64 x 16 slice of A and 16 x 64 slice of B into shared memory (computing a
// fused producer once per element there), four elements each, adjacent
// threads reading adjacent elements of the operand's contiguous axis; a
// barrier; then each thread multiplies from shared memory into its 4 x 4
// register tile, rows ty + 16i and columns tx + 16j of the block's tile, so
// that a warp's stores of C are 16 adjacent columns; a barrier before the
// next step overwrites the slices. Elements past M, N or K are zeros in
// shared memory and never stored.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"

namespace gradc {
namespace {

constexpr int64_t kTileM = 64, kTileN = 64, kTileK = 16;
constexpr int64_t kThreads = 256, kThreadRows = 16, kThreadCols = 16; // 16 x 16 threads
constexpr int64_t kRegM = kTileM / kThreadRows, kRegN = kTileN / kThreadCols;

LExprPtr lt(LExprPtr a, int64_t b) { return compare(CompareOp::LT, std::move(a), int_imm(b)); }
LExprPtr clamp(LExprPtr a, int64_t extent) { return binary(BinaryOp::Min, std::move(a), int_imm(extent - 1)); }

} // namespace

bool gemm_cuda_tiles(const Gemm &g) { return g.M >= 32 && g.N >= 32 && g.K >= 1; }

StmtPtr gemm_cuda_tiled(KernelCtx &k, const Gemm &g) {
  if (!gemm_cuda_tiles(g))
    return gemm_nest(k, g);
  const DType acc = g.acc();
  const int64_t tiles_n = (g.N + kTileN - 1) / kTileN, tiles_m = (g.M + kTileM - 1) / kTileM;
  const int64_t steps = (g.K + kTileK - 1) / kTileK;
  static_assert(kTileM * kTileK == 4 * kThreads && kTileK * kTileN == 4 * kThreads);
  GRADC_CHECK(2 * kTileK * (kTileM + kTileN) * dtype_bytes(acc) <= k.target.shared_memory_bytes, "cuda gemm",
              "the product's tiles exceed the target's shared memory");

  auto a_tile = std::make_shared<Buffer>(Buffer{"a_tile", acc, {kTileK * kTileM}, BufferScope::Shared});
  auto b_tile = std::make_shared<Buffer>(Buffer{"b_tile", acc, {kTileK * kTileN}, BufferScope::Shared});
  BufferPtr c = k.local("c_tile", acc, kRegM * kRegN);
  LVarPtr block = k.var("block"), thread = k.var("thread"), step = k.var("step");
  LExprPtr b = var_ref(block), t = var_ref(thread), s = var_ref(step);
  LExprPtr m0 = mul(binary(BinaryOp::FloorDiv, b, int_imm(tiles_n)), int_imm(kTileM));
  LExprPtr n0 = mul(binary(BinaryOp::FloorMod, b, int_imm(tiles_n)), int_imm(kTileN));
  LExprPtr k0 = mul(s, int_imm(kTileK));
  LExprPtr ty = binary(BinaryOp::FloorDiv, t, int_imm(kThreadCols));
  LExprPtr tx = binary(BinaryOp::FloorMod, t, int_imm(kThreadCols));
  LExprPtr zero = constant_of(0, acc);

  // Copy one slice: element e = t + 256r of the (rows x cols) slice, whose
  // fastest axis is the operand's contiguous one; it lands at
  // [kk * width + i] in shared memory (width: the tile's M or N).
  auto copy = [&](const BufferPtr &tile, int64_t width, int64_t extent, const LExprPtr &origin, bool k_fastest,
                  const std::function<LExprPtr(const LExprPtr &i, const LExprPtr &kk)> &element) {
    std::vector<StmtPtr> out;
    for (int64_t r = 0; r < 4; ++r) {
      LExprPtr e = add(t, int_imm(r * kThreads));
      LExprPtr i = k_fastest ? binary(BinaryOp::FloorDiv, e, int_imm(kTileK)) : binary(BinaryOp::FloorMod, e, int_imm(width));
      LExprPtr kk = k_fastest ? binary(BinaryOp::FloorMod, e, int_imm(kTileK)) : binary(BinaryOp::FloorDiv, e, int_imm(width));
      LExprPtr gi = add(origin, i), gk = add(k0, kk);
      LExprPtr value = select(both(lt(gi, extent), lt(gk, g.K)), element(clamp(gi, extent), clamp(gk, g.K)), zero);
      out.push_back(store(tile, add(mul(kk, int_imm(width)), i), value));
    }
    return out;
  };
  std::vector<StmtPtr> body = copy(a_tile, kTileM, g.M, m0, g.a_contiguous_in_k,
                                   [&](const LExprPtr &m, const LExprPtr &kk) { return g.a_acc(m, kk); });
  for (StmtPtr &st : copy(b_tile, kTileN, g.N, n0, g.b_contiguous_in_k,
                          [&](const LExprPtr &n, const LExprPtr &kk) { return g.b_acc(kk, n); }))
    body.push_back(std::move(st));
  body.push_back(barrier());
  // The register tile's update from the slices.
  LVarPtr kk = k.var("kk"), i = k.var("i"), j = k.var("j");
  LExprPtr kv = var_ref(kk), iv = var_ref(i), jv = var_ref(j);
  LExprPtr a = load(a_tile, add(mul(kv, int_imm(kTileM)), add(ty, mul(iv, int_imm(kThreadRows)))));
  LExprPtr bb = load(b_tile, add(mul(kv, int_imm(kTileN)), add(tx, mul(jv, int_imm(kThreadCols)))));
  LExprPtr at = add(mul(iv, int_imm(kRegN)), jv);
  LExprPtr sum = is_float(acc) ? mul_add(a, bb, load(c, at)) : add(load(c, at), mul(a, bb));
  body.push_back(for_loop(kk, kTileK, ForKind::Serial,
                          for_loop(i, kRegM, ForKind::Unrolled, for_loop(j, kRegN, ForKind::Unrolled, store(c, at, sum)))));
  body.push_back(barrier());

  // Zero the register tile, the steps, then store what lies inside C.
  LVarPtr i0 = k.var("i"), i1 = k.var("i"), j1 = k.var("j");
  StmtPtr init = for_loop(i0, kRegM * kRegN, ForKind::Unrolled, store(c, var_ref(i0), zero));
  LExprPtr m = add(m0, add(ty, mul(var_ref(i1), int_imm(kThreadRows))));
  LExprPtr n = add(n0, add(tx, mul(var_ref(j1), int_imm(kThreadCols))));
  // The position clamped too (a no-op under the guard): in bounds by the
  // verifier's interval arithmetic, which knows no guard of a sum.
  StmtPtr put =
      if_then(both(lt(m, g.M), lt(n, g.N)),
              g.store(clamp(m, g.M), clamp(n, g.N),
                      cast(g.dtype, load(c, add(mul(var_ref(i1), int_imm(kRegN)), var_ref(j1))))));
  StmtPtr per_thread =
      alloc(c, seq({init, for_loop(step, steps, ForKind::Serial, seq(std::move(body))),
                    for_loop(i1, kRegM, ForKind::Unrolled, for_loop(j1, kRegN, ForKind::Unrolled, put))}));
  return for_loop(block, tiles_m * tiles_n, ForKind::BlockIdx,
                  alloc(a_tile, alloc(b_tile, for_loop(thread, kThreads, ForKind::ThreadIdx, per_thread))));
}

} // namespace gradc
