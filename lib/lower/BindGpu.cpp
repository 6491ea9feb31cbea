//===- BindGpu.cpp - map parallel loops onto CUDA blocks and threads ------===//
//
// Runs after lowering for --target=cuda. The data-parallel loops at the top
// of a kernel become one flat index over blockIdx/threadIdx; everything
// inside them (reductions, the serial loops of a kernel) runs per thread.
// A kernel that is a sequence of phases (batch norm's scale, then its
// normalisation; a scatter's zero fill, then its writes) runs each phase that
// starts with a data-parallel nest as a launch of its own: launches on one
// stream run in order, so the phases still see each other's writes, and none
// of them is left to a single thread because a sibling is not parallel.
// Consecutive phases that are not data parallel share one single-thread
// launch.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/op/Kernel.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <unordered_map>

namespace gradc {
namespace {

constexpr int64_t kThreadsPerBlock = 256;

bool data_parallel(const Stmt &s) {
  return s.kind == StmtKind::For &&
         (s.for_kind == ForKind::Spatial || s.for_kind == ForKind::Parallel || s.for_kind == ForKind::Vectorized ||
          s.for_kind == ForKind::BlockIdx); // a phase its strategy bound
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

/// The phases of a kernel body, each run as one launch: the statements of a
/// top-level sequence, consecutive ones that are not data parallel together.
std::vector<StmtPtr> phases(const StmtPtr &body) {
  if (!body || body->kind != StmtKind::Seq)
    return {body};
  std::vector<StmtPtr> out, serial;
  auto flush = [&] {
    if (!serial.empty())
      out.push_back(serial.size() == 1 ? serial[0] : seq(serial));
    serial.clear();
  };
  for (const StmtPtr &s : body->seq) {
    if (s && data_parallel(*s)) {
      flush();
      out.push_back(s);
    } else if (s) {
      serial.push_back(s);
    }
  }
  flush();
  return out;
}

/// The thread loop of a kernel a strategy bound: inside the block loop and
/// its Shared allocations.
const Stmt *thread_loop(const Stmt &block) {
  const Stmt *s = block.body.get();
  while (s->kind == StmtKind::Alloc)
    s = s->body.get();
  GRADC_CHECK(s->kind == StmtKind::For && s->for_kind == ForKind::ThreadIdx, "GPU binding",
              "a bound kernel's block loop holds no thread loop");
  return s;
}

/// Data-parallel loops around a nest its strategy bound (a batched
/// product's batch) become more blocks of it: block b of the new grid is
/// block b mod grid of the outer loops' element b div grid.
StmtPtr fold_into_grid(const StmtPtr &body) {
  Shape extents;
  std::vector<const Stmt *> outer;
  const Stmt *s = body.get();
  for (; s && s->kind == StmtKind::For && s->for_kind == ForKind::Spatial; s = s->body.get()) {
    outer.push_back(s);
    extents.push_back(s->extent);
  }
  if (outer.empty() || !s || s->kind != StmtKind::For || s->for_kind != ForKind::BlockIdx)
    return body;
  int64_t grid = s->extent, total = num_elements(extents) * grid;
  if (total == 0)
    return seq({});
  auto b = std::make_shared<LVar>(LVar{"blockIdx.x"});
  LExprPtr bv = var_ref(b);
  Index outer_index = unravel_index(grid == 1 ? bv : binary(BinaryOp::FloorDiv, bv, int_imm(grid)), extents);
  VarValues values{{s->var.get(), grid == 1 ? int_imm(0) : binary(BinaryOp::FloorMod, bv, int_imm(grid))}};
  for (size_t d = 0; d < outer.size(); ++d)
    values[outer[d]->var.get()] = outer_index[d];
  return for_loop(b, total, ForKind::BlockIdx, substitute(s->body, values));
}

void bind(Kernel &k, const Target &target) {
  k.body = fold_into_grid(k.body);
  if (k.body && k.body->kind == StmtKind::For && k.body->for_kind == ForKind::BlockIdx) { // bound by its strategy
    k.grid = k.body->extent;
    k.block = thread_loop(*k.body)->extent;
    GRADC_CHECK(shared_bytes(k) <= target.shared_memory_bytes && k.block <= target.max_threads_per_block,
                "GPU binding", "kernel " + k.name + " needs more shared memory or threads than a block has");
    return;
  }
  std::vector<const Stmt *> nest;
  for (const Stmt *s = k.body.get(); s && data_parallel(*s); s = s->body.get())
    nest.push_back(s);
  if (nest.empty()) {
    k.body = serialize_unscheduled(k.body); // a serial kernel: one thread
    return;
  }
  Shape extents;
  for (const Stmt *s : nest)
    extents.push_back(s->extent);
  int64_t total = num_elements(extents);
  if (total == 0) { // nothing to compute: one thread that does nothing (a grid of 0 cannot launch)
    k.body = seq({});
    return;
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

} // namespace

void bind_gpu_threads(LoweredFunction &fn, const Target &target) {
  std::vector<Kernel> launches;
  std::vector<size_t> first_launch; // of each kernel, and the end
  for (Kernel &k : fn.kernels) {
    first_launch.push_back(launches.size());
    std::vector<StmtPtr> parts = phases(k.body);
    if (parts.size() <= 1) {
      bind(k, target);
      launches.push_back(std::move(k));
      continue;
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      Kernel part;
      part.name = k.name + "_" + std::to_string(i);
      part.body = parts[i];
      part.buffers = touched_buffers(part.body);
      part.origin = k.origin;
      bind(part, target);
      launches.push_back(std::move(part));
    }
  }
  first_launch.push_back(launches.size());
  fn.kernels = std::move(launches);
  for (TimeLoop &l : fn.time_loops) { // the same kernels, now counted in launches (the trips kept)
    l.first = first_launch[l.first];
    l.last = first_launch[l.last];
  }
}

} // namespace gradc
