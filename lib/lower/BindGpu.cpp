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
// launch. A kernel its strategy bound (tiles through shared memory) keeps
// its grid and block of up to three dimensions each; loops around it (a
// batch) become the grid's next dimension where one is spare and CUDA's
// limits allow (y and z at most 65535), else one flat grid.
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

/// The outermost thread loop of a kernel a strategy bound: inside its block
/// loops and their Shared allocations.
const Stmt *thread_loop(const Stmt &block) {
  const Stmt *s = innermost_bound(block).body.get();
  while (s->kind == StmtKind::Alloc)
    s = s->body.get();
  GRADC_CHECK(s->kind == StmtKind::For && s->for_kind == ForKind::ThreadIdx, "GPU binding",
              "a bound kernel's block loop holds no thread loop");
  return s;
}

/// CUDA's limits on a grid: x below 2^31, y and z at most 65535.
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1, kMaxGridYZ = 65535;

/// Data-parallel loops around a nest its strategy bound (a batched
/// product's batch) become more blocks of it: one more dimension of the grid
/// (their row-major index) where the grid has one to spare and they fit in
/// it, else one flat grid. A grid past CUDA's limits is made flat too.
StmtPtr fold_into_grid(const StmtPtr &body) {
  std::vector<const Stmt *> outer;
  const Stmt *s = body.get();
  for (; s && s->kind == StmtKind::For && s->for_kind == ForKind::Spatial; s = s->body.get())
    outer.push_back(s);
  if (!s || s->kind != StmtKind::For || s->for_kind != ForKind::BlockIdx)
    return body;
  Shape extents;
  for (const Stmt *o : outer)
    extents.push_back(o->extent);
  const int64_t batch = num_elements(extents);
  const Dim3 grid = bound_extents(*s);
  const int dims = bound_dim(*s) + 1;
  if (batch * grid.count() == 0)
    return seq({});
  const bool fits = grid.x <= kMaxGridX && grid.y <= kMaxGridYZ && grid.z <= kMaxGridYZ;
  if (fits && !outer.empty() && dims < kMaxLaunchDims && batch <= kMaxGridYZ) {
    return collapse_nest(outer, ForKind::BlockIdx, std::make_shared<LVar>(LVar{"batch"}));
  }
  if (fits && outer.empty())
    return body;
  GRADC_CHECK(batch * grid.count() <= kMaxGridX, "GPU binding", "a kernel needs more blocks than a grid has");
  for (const Stmt *c = s;; c = c->body.get()) {
    outer.push_back(c);
    if (c == &innermost_bound(*s))
      break;
  }
  return collapse_nest(outer, ForKind::BlockIdx, std::make_shared<LVar>(LVar{"block"}));
}

/// CUDA's limits on a block: x and y at most 1024, z at most 64, the
/// threads at most the target's.
bool block_fits(const Dim3 &b, const Target &target) {
  return b.x <= 1024 && b.y <= 1024 && b.z <= 64 && b.count() <= target.max_threads_per_block;
}

void bind(Kernel &k, const Target &target) {
  k.body = fold_into_grid(k.body);
  if (k.body && k.body->kind == StmtKind::For && k.body->for_kind == ForKind::BlockIdx) { // bound by its strategy
    k.grid = bound_extents(*k.body);
    k.block = bound_extents(*thread_loop(*k.body));
    GRADC_CHECK(shared_bytes(k) <= target.shared_memory_bytes && block_fits(k.block, target),
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
  const int64_t threads = std::min({total, kThreadsPerBlock, int64_t(target.max_threads_per_block)});
  k.block = Dim3{threads};
  k.grid = Dim3{(total + threads - 1) / threads};
  GRADC_CHECK(k.grid.x <= kMaxGridX, "GPU binding", "kernel " + k.name + " needs more blocks than a grid has");
  auto bx = std::make_shared<LVar>(LVar{"blockIdx.x"});
  auto tx = std::make_shared<LVar>(LVar{"threadIdx.x"});
  LExprPtr flat = binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(bx), int_imm(threads)), var_ref(tx));
  Index idx = unravel_index(flat, extents);
  VarValues values;
  for (size_t d = 0; d < nest.size(); ++d)
    values[nest[d]->var.get()] = idx[d];
  StmtPtr inner = serialize_unscheduled(substitute(nest.back()->body, values));
  StmtPtr guarded = if_then(compare(CompareOp::LT, flat, int_imm(total)), inner);
  k.body = for_loop(bx, k.grid.x, ForKind::BlockIdx, for_loop(tx, threads, ForKind::ThreadIdx, guarded));
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
