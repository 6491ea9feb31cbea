//===- cuda/SplitSums.cpp - sums with few outputs, split across threads ---===//
//
// See Cuda.h (gpu_split_sums).
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"

#include <algorithm>

namespace gradc {

StmtPtr gpu_split_sums(KernelCtx &k, int64_t outputs, int64_t count, DType acc, const OutputTermFn &term,
                       const std::function<StmtPtr(const LExprPtr &o, const LExprPtr &total)> &then) {
  // Enough threads to cover the device's multiprocessors a few times over,
  // each summing at least kMinChunk terms (fewer and the second phase costs
  // more than it saves).
  constexpr int64_t kThreads = 1 << 16, kMinChunk = 256;
  if (outputs < 1 || outputs * 2 > kThreads || count < 4 * kMinChunk)
    return nullptr;
  int64_t parts = std::min((count + kMinChunk - 1) / kMinChunk, (kThreads + outputs - 1) / outputs);
  const int64_t chunk = (count + parts - 1) / parts;
  parts = (count + chunk - 1) / chunk;
  BufferPtr partial = k.scratch("partial_sums", acc, outputs * parts);
  // Phase 1: chunk p of output o; the last chunk reads its final term again
  // past the end and adds zero for it.
  StmtPtr first = loop_nest({outputs, parts}, [&](const Index &op) {
    const LExprPtr &o = op[0], &p = op[1];
    return compensated_sum(
        k, chunk, acc,
        [&](const LExprPtr &i) {
          LExprPtr r = add(mul(p, int_imm(chunk)), i);
          LExprPtr t = cast(acc, term(o, binary(BinaryOp::Min, r, int_imm(count - 1))));
          return select(compare(CompareOp::LT, r, int_imm(count)), t, constant_of(0, acc));
        },
        [&](const LExprPtr &total) { return store(partial, add(mul(o, int_imm(parts)), p), total); });
  });
  // Phase 2: the partials of each output, in order.
  StmtPtr second = loop_nest({outputs}, [&](const Index &o) {
    return compensated_sum(
        k, parts, acc, [&](const LExprPtr &p) { return load(partial, add(mul(o[0], int_imm(parts)), p)); },
        [&](const LExprPtr &total) { return then(o[0], total); });
  });
  return seq({first, second});
}

} // namespace gradc
