//===- BindGpu.cpp - map parallel loops onto CUDA blocks and threads ------===//
//
// Runs after lowering for --target=cuda. The data-parallel loops at the top
// of a kernel become one flat index over blockIdx/threadIdx; everything
// inside them (reductions, the serial loops of a kernel) runs per thread.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/op/Kernel.h"
#include "gradc/lower/Passes.h"

#include <algorithm>
#include <unordered_map>

namespace gradc {
namespace {

constexpr int64_t kThreadsPerBlock = 256;

bool data_parallel(const Stmt &s) {
  return s.kind == StmtKind::For &&
         (s.for_kind == ForKind::Spatial || s.for_kind == ForKind::Parallel || s.for_kind == ForKind::Vectorized);
}

/// What runs in one thread: loops still unscheduled become Serial.
StmtPtr serialize_unscheduled(const StmtPtr &body) {
  struct Serialize : LoopMutator {
    StmtPtr on_for(const StmtPtr &s) override {
      StmtPtr b = mutate(s->body);
      return unscheduled(s->for_kind) ? with_for(*s, ForKind::Serial, b) : b == s->body ? s : with_for(*s, s->for_kind, b);
    }
  };
  return Serialize().mutate(body);
}

} // namespace

void bind_gpu_threads(LoweredFunction &fn, const Target &target) {
  for (Kernel &k : fn.kernels) {
    std::vector<const Stmt *> nest;
    for (const Stmt *s = k.body.get(); s && data_parallel(*s); s = s->body.get())
      nest.push_back(s);
    if (nest.empty()) {
      k.body = serialize_unscheduled(k.body); // a serial kernel: one thread
      continue;
    }
    Shape extents;
    for (const Stmt *s : nest)
      extents.push_back(s->extent);
    int64_t total = num_elements(extents);
    if (total == 0) { // nothing to compute: one thread that does nothing (a grid of 0 cannot launch)
      k.body = seq({});
      continue;
    }
    k.block = std::min({total, kThreadsPerBlock, int64_t(target.max_threads_per_block)});
    k.grid = (total + k.block - 1) / k.block;
    auto bx = std::make_shared<LVar>(LVar{"blockIdx.x"});
    auto tx = std::make_shared<LVar>(LVar{"threadIdx.x"});
    LExprPtr flat = binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(bx), int_imm(k.block)), var_ref(tx));
    Index idx = unravel_index(flat, extents);
    VarValues values;
    for (size_t d = 0; d < nest.size(); ++d)
      values[nest[d]->var.get()] = idx[d];
    StmtPtr inner = serialize_unscheduled(substitute(nest.back()->body, values));
    StmtPtr guarded = if_then(compare(CompareOp::LT, flat, int_imm(total)), inner);
    k.body = for_loop(bx, k.grid, ForKind::BlockIdx, for_loop(tx, k.block, ForKind::ThreadIdx, guarded));
  }
}

} // namespace gradc
