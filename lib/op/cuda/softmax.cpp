//===- cuda/softmax.cpp - the GPU's nn.softmax and nn.log_softmax ---------===//
//
// A warp per row (cuda/Rows.cpp): each lane takes every 32nd element of the
// row for the maximum and for the sum of exponentials, the warp combines the
// lanes' values by shuffles, and the lanes write the row's outputs; the same
// arithmetic as the CPU's (softmax.h: SoftmaxMath), summed in another order.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../softmax.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

StmtPtr cuda_softmax(KernelCtx &k, bool log) {
  SoftmaxMath math(k, log);
  if (math.rows == 0)
    return softmax_kernel(k, log);
  DType dt = math.dt, at = math.at;
  const Shape &shape = math.shape;
  const int64_t n = math.n;
  return gpu_warp_rows(k, math.rows, [&](const LExprPtr &row, const LExprPtr &lane, const LExprPtr &live) {
    auto idx = [&](const LExprPtr &j) { return math.at_row(row, j); };
    auto x = [&](const LExprPtr &j) { return cast(at, k.in(0, idx(j))); };
    auto out_at = [&](const LExprPtr &j) { return flat_index(shape, idx(j)); };
    BufferPtr m = k.local("row_max", at), s = k.local("row_sum", at);
    LExprPtr zero = int_imm(0), max = load(m, zero);
    auto shifted = [&](const LExprPtr &j) { return binary(BinaryOp::Sub, x(j), max); };
    auto put = [&](const LExprPtr &j, const LExprPtr &v) { return if_then(live, store(k.out(), out_at(j), v)); };
    std::vector<StmtPtr> body = {
        store(m, zero, lowest_of(at)),
        warp_row_loop(k, n, lane, [&](const LExprPtr &j) { return store(m, zero, binary(BinaryOp::Max, max, x(j))); }),
        warp_all_reduce(m, BinaryOp::Max, lane), store(s, zero, constant_of(0, at)),
        warp_row_loop(k, n, lane, [&](const LExprPtr &j) {
          LExprPtr e = unary(UnaryOp::Exp, shifted(j));
          StmtPtr add_it = store(s, zero, add(load(s, zero), e));
          return math.write_exp ? seq({put(j, e), add_it}) : add_it;
        }),
        warp_all_reduce(s, BinaryOp::Add, lane), store(s, zero, math.finish_sum(load(s, zero))),
        warp_row_loop(k, n, lane, [&](const LExprPtr &j) {
          return put(j, cast(dt, math.finalize(shifted(j), load(k.out(), out_at(j)), load(s, zero))));
        })};
    return alloc(m, alloc(s, seq(std::move(body))));
  });
}

} // namespace

void register_cuda_softmax(OpRegistry &reg) {
  reg.strategy("nn.softmax", TargetKind::CUDA, [](KernelCtx &k) { return cuda_softmax(k, false); });
  reg.strategy("nn.log_softmax", TargetKind::CUDA, [](KernelCtx &k) { return cuda_softmax(k, true); });
}

} // namespace gradc
