//===- Cpu.h - the CPU's strategies (internal to lib/op) ------------------===//
//
// The operator families' hand-scheduled CPU kernels live in this folder, one
// file per family, each registering its strategies with the registry
// (OpRegistry::strategy) from its register_cpu_* function; the definitions
// in lib/op never test the target. Their tuning (vector width and
// registers, FMA, cache sizes, cores) is the Target's CpuTuning record.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Gemm.h"

namespace gradc {

class OpRegistry;

/// The packed product (cpu/Gemm.cpp), sized from the Target's CpuTuning:
///
///  * One operand is read as vectors: per block of KC steps of k, each job
///    packs its panel of NR columns, laid out [k][NR], into a Local on its
///    thread's stack (sized to the L1; the packing absorbs any layout: x·wᵀ,
///    dyᵀ·x and dy·w alike, and pads the last panel with zeros). The other
///    operand is broadcast element by element where it lies, or, when many
///    panels reuse rows that lie a multiple of 4 KiB apart, from rows packed
///    once per K block into kernel scratch. B is packed unless packing A and
///    storing C transposed moves fewer elements (then Cᵀ = Bᵀ·Aᵀ is computed:
///    x·wᵀ with a small batch packs x, not w).
///  * The register micro-kernel holds MR × NR accumulators (NR one or two
///    vectors, MR filling the register file), adds one k step per iteration
///    with FMA where the target has it, and stores the tile; a later K block
///    reloads it. Every element is therefore summed in k order, each step
///    fused (or a multiply then an add without FMA): the order is fixed by the
///    shape and target, so a recomputed value is bitwise identical. The K
///    loop is emitted once per K block size: the tiles cover the rows (MR
///    balanced so that less than a row per tile is spare, the spare rows
///    reading the last real row and never stored) and the last panel's
///    zeros make its K loop the full one's.
///  * Panels run on the thread pool (Parallel), packing included. A batch of
///    products (Gemm::batch: Winograd's 16 positions) is one parallel loop
///    over every product's jobs, each product its slice of the scratch.
///  * With 32 vector registers (AVX-512), a small batch against a weight,
///    both contiguous along k (x·wᵀ with M <= 32), is instead 4 × 4 dot
///    products in VL lanes along k, the lanes added pairwise at the end
///    (gemm_dot): nothing packed, no broadcasts.
StmtPtr gemm_cpu_packed(KernelCtx &k, const Gemm &g);

/// Runs outside the data up to this long are unrolled: a padding's column or
/// two, which as loops of their own LLVM vectorized each (densenet121's
/// adjoint compiled 12% slower).
constexpr int64_t kMaxUnrolledEdge = 4;

/// body(position, inside) over positions [0, n) of a row in three loops
/// named `name`: [first, last) with `inside` true (a window or tap that
/// lies in the data: no guard, no clamp), Spatial, and the runs either side
/// with it false, unrolled where short; an empty run has no loop.
inline StmtPtr over_inside_run(int64_t first, int64_t last, int64_t n, const std::string &name,
                               const std::function<StmtPtr(const LExprPtr &at, bool inside)> &body) {
  auto run = [&](int64_t from, int64_t to, bool inside) -> StmtPtr {
    if (to <= from)
      return seq({});
    ForKind kind = !inside && to - from <= kMaxUnrolledEdge ? ForKind::Unrolled : ForKind::Spatial;
    return loop_nest(
        {to - from}, [&](const Index &i) { return body(add(i[0], imm(from)), inside); }, kind, name);
  };
  return seq({run(0, first, false), run(first, last, true), run(last, n, false)});
}

void register_cpu_conv(OpRegistry &reg);
void register_cpu_linear(OpRegistry &reg);
void register_cpu_pool(OpRegistry &reg);
void register_cpu_reduce(OpRegistry &reg);
void register_cpu_softmax(OpRegistry &reg);
void register_cpu_scan(OpRegistry &reg);

/// Every CPU strategy, in the registry being built.
inline void register_cpu_strategies(OpRegistry &reg) {
  register_cpu_conv(reg);
  register_cpu_linear(reg);
  register_cpu_pool(reg);
  register_cpu_reduce(reg);
  register_cpu_softmax(reg);
  register_cpu_scan(reg);
}

} // namespace gradc
