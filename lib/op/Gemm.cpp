//===- Gemm.cpp - the schedule-neutral matrix product ---------------------===//
//
// gemm_nest: what the generic kernels of the products emit (op/Gemm.h). The
// targets' schedules of a Gemm are their strategies' (cpu/Gemm.cpp).
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Gemm.h"

namespace gradc {

StmtPtr gemm_nest(KernelCtx &k, const Gemm &g) {
  StmtPtr one = loop_nest({g.M, g.N}, [&](const Index &mn) {
    BufferPtr acc = k.local("acc", g.acc());
    LExprPtr z = imm(0);
    LVarPtr kk = k.var("k");
    StmtPtr step = store(acc, z, add(load(acc, z), mul(g.a_acc(mn[0], var_ref(kk)), g.b_acc(var_ref(kk), mn[1]))));
    StmtPtr red = g.K > 0 ? for_loop(kk, g.K, ForKind::Reduce, step) : seq({});
    LExprPtr start = g.accumulate ? cast(g.acc(), g.load(mn[0], mn[1])) : constant_of(0, g.acc());
    return alloc(acc, seq({store(acc, z, start), red, g.store(mn[0], mn[1], cast(g.dtype, load(acc, z)))}));
  });
  return g.batch_index ? for_loop(g.batch_index, g.batch, ForKind::Spatial, one) : one;
}

} // namespace gradc
