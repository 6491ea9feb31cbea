//===- cuda/Rows.cpp - a warp per row, reductions by shuffles -------------===//
//
// See Cuda.h (gpu_warp_rows, warp_all_reduce).
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"

#include <algorithm>

namespace gradc {

StmtPtr gpu_warp_rows(KernelCtx &k, int64_t rows, const WarpRowFn &body) {
  // 8 warps to a block, fewer where there are fewer rows.
  const int64_t per_block = std::clamp<int64_t>(rows, 1, kGpuRowThreads / kWarpSize);
  LVarPtr block = k.var("block"), thread = k.var("thread");
  LExprPtr t = var_ref(thread);
  LExprPtr row = add(mul(var_ref(block), int_imm(per_block)), binary(BinaryOp::FloorDiv, t, int_imm(kWarpSize)));
  LExprPtr lane = binary(BinaryOp::FloorMod, t, int_imm(kWarpSize));
  // A warp past the last row computes the last row again and stores nothing:
  // its shuffles must run (every lane of a warp takes part), its stores not.
  LExprPtr live = compare(CompareOp::LT, row, int_imm(rows));
  LExprPtr clamped = binary(BinaryOp::Min, row, int_imm(rows - 1));
  return for_loop(block, (rows + per_block - 1) / per_block, ForKind::BlockIdx,
                  for_loop(thread, per_block * kWarpSize, ForKind::ThreadIdx, body(clamped, lane, live)));
}

StmtPtr warp_all_reduce(const BufferPtr &acc, BinaryOp op, const LExprPtr &lane) {
  LExprPtr at = int_imm(0);
  std::vector<StmtPtr> steps;
  for (int64_t off = kWarpSize / 2; off >= 1; off /= 2) // lane l gathers l, l+1, ..., l+31 (mod 32)
    steps.push_back(store(acc, at, binary(op, load(acc, at), shuffle(load(acc, at), add(lane, int_imm(off))))));
  steps.push_back(store(acc, at, shuffle(load(acc, at), int_imm(0)))); // lane 0's total, on every lane
  return seq(std::move(steps));
}

StmtPtr warp_row_loop(KernelCtx &k, int64_t n, const LExprPtr &lane,
                      const std::function<StmtPtr(const LExprPtr &j)> &body) {
  LVarPtr c = k.var("c");
  LExprPtr j = add(lane, mul(var_ref(c), int_imm(kWarpSize)));
  // The position clamped too (a no-op under the guard): in bounds by the
  // verifier's interval arithmetic.
  LExprPtr at = binary(BinaryOp::Min, j, int_imm(std::max<int64_t>(n - 1, 0)));
  return for_loop(c, (n + kWarpSize - 1) / kWarpSize, ForKind::Serial,
                  if_then(compare(CompareOp::LT, j, int_imm(n)), body(at)));
}

StmtPtr warp_accumulate(KernelCtx &k, int64_t count, const LExprPtr &lane, const LExprPtr &live,
                        const std::vector<BufferPtr> &sums, const std::function<StmtPtr(const LExprPtr &j)> &add_terms,
                        const std::function<StmtPtr()> &then) {
  LExprPtr zero = int_imm(0);
  std::vector<StmtPtr> body;
  for (const BufferPtr &s : sums)
    body.push_back(store(s, zero, constant_of(0, s->dtype)));
  body.push_back(warp_row_loop(k, count, lane, add_terms));
  for (const BufferPtr &s : sums)
    body.push_back(warp_all_reduce(s, BinaryOp::Add, lane));
  body.push_back(if_then(both(live, compare(CompareOp::EQ, lane, zero)), then()));
  StmtPtr out = seq(std::move(body));
  for (auto it = sums.rbegin(); it != sums.rend(); ++it)
    out = alloc(*it, out);
  return out;
}

StmtPtr gpu_warp_sums(KernelCtx &k, int64_t outputs, int64_t count, DType acc, const OutputTermFn &term,
                      const std::function<StmtPtr(const LExprPtr &o, const LExprPtr &total)> &then) {
  return gpu_warp_rows(k, outputs, [&](const LExprPtr &o, const LExprPtr &lane, const LExprPtr &live) {
    BufferPtr s = k.local("row_sum", acc);
    LExprPtr zero = int_imm(0);
    return warp_accumulate(
        k, count, lane, live, {s},
        [&](const LExprPtr &r) { return store(s, zero, add(load(s, zero), cast(acc, term(o, r)))); },
        [&] { return then(o, load(s, zero)); });
  });
}

} // namespace gradc
