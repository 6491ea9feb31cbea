//===- cuda/SplitSums.cpp - sums with few outputs, split across blocks ----===//
//
// See Cuda.h (gpu_split_sums). Phase 1: block (o, p) of 256 threads sums
// chunk p of output o's terms, thread t taking terms t, t + 256, ... of the
// chunk (adjacent threads read adjacent terms), then the block's 256 sums as
// a tree: five shuffles in each warp, the 8 warps' totals through shared
// memory, and every warp summing those alike (thread 0 stores). Phase 2: a warp per output sums its
// chunks' partial sums (cuda/Rows.cpp); where each output is one chunk (many
// outputs), phase 1 finishes it. Every sum is in a fixed order: the
// result does not depend on timing.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"

#include <algorithm>

namespace gradc {

StmtPtr gpu_split_sums(KernelCtx &k, int64_t outputs, int64_t count, DType acc, const OutputTermFn &term,
                       const std::function<StmtPtr(const LExprPtr &o, const LExprPtr &total)> &then) {
  // Enough blocks to cover the device's multiprocessors a few times over,
  // each summing at least kMinChunk terms (8 per thread: fewer and the
  // second phase costs more than it saves).
  constexpr int64_t kThreads = 256, kWarps = kThreads / kWarpSize, kBlocks = 1024, kMinChunk = 8 * kThreads;
  if (outputs < 1 || outputs * 2 > (int64_t(1) << 16) || count < 2 * kMinChunk)
    return nullptr;
  int64_t parts = std::clamp<int64_t>((count + kMinChunk - 1) / kMinChunk, 1, std::max<int64_t>(1, kBlocks / outputs));
  const int64_t chunk = (count + parts - 1) / parts;
  parts = (count + chunk - 1) / chunk;
  BufferPtr partial = parts > 1 ? k.scratch("partial_sums", acc, outputs * parts) : nullptr;

  // Phase 1: block (o, p).
  LVarPtr block = k.var("block"), thread = k.var("thread"), i = k.var("i");
  LExprPtr b = var_ref(block), t = var_ref(thread), zero = int_imm(0);
  LExprPtr o = binary(BinaryOp::FloorDiv, b, int_imm(parts)), p = binary(BinaryOp::FloorMod, b, int_imm(parts));
  LExprPtr lane = binary(BinaryOp::FloorMod, t, int_imm(kWarpSize)), warp = binary(BinaryOp::FloorDiv, t, int_imm(kWarpSize));
  BufferPtr s = k.local("block_sum", acc);
  auto warps = std::make_shared<Buffer>(Buffer{"warp_sums", acc, {kWarps}, BufferScope::Shared});
  // Term r of the chunk, zero past the chunk's end or the count (the index clamped: read, not used).
  LExprPtr within = add(t, mul(var_ref(i), int_imm(kThreads)));
  LExprPtr r = add(mul(p, int_imm(chunk)), within);
  LExprPtr inside = both(compare(CompareOp::LT, within, int_imm(chunk)), compare(CompareOp::LT, r, int_imm(count)));
  LExprPtr value = select(inside, cast(acc, term(o, binary(BinaryOp::Min, r, int_imm(count - 1)))), constant_of(0, acc));
  LExprPtr first_lane = compare(CompareOp::EQ, lane, zero);
  StmtPtr per_thread = alloc(
      s, seq({store(s, zero, constant_of(0, acc)),
              for_loop(i, (chunk + kThreads - 1) / kThreads, ForKind::Serial, store(s, zero, add(load(s, zero), value))),
              warp_all_reduce(s, BinaryOp::Add, lane), if_then(first_lane, store(warps, warp, load(s, zero))), barrier(),
              // each warp sums the 8 warps' totals alike (lanes past 8 add zeros); thread 0 stores
              store(s, zero,
                    select(compare(CompareOp::LT, lane, int_imm(kWarps)),
                           load(warps, binary(BinaryOp::Min, lane, int_imm(kWarps - 1))), constant_of(0, acc))),
              warp_all_reduce(s, BinaryOp::Add, lane),
              if_then(compare(CompareOp::EQ, t, zero), parts == 1 ? then(o, load(s, zero)) : store(partial, b, load(s, zero)))}));
  StmtPtr first = for_loop(block, outputs * parts, ForKind::BlockIdx,
                           alloc(warps, for_loop(thread, kThreads, ForKind::ThreadIdx, per_thread)));
  if (parts == 1)
    return first;

  // Phase 2: the partials of each output, a warp each.
  StmtPtr second = gpu_warp_sums(
      k, outputs, parts, acc, [&](const LExprPtr &out, const LExprPtr &q) { return load(partial, add(mul(out, int_imm(parts)), q)); },
      then);
  return seq({first, second});
}

} // namespace gradc
