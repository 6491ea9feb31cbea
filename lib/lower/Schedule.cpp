//===- Schedule.cpp - the CPU schedule of the schedule-neutral nests ------===//
//
// Decides, from the Target and a static work estimate, which loop of each
// kernel runs on the thread pool and which is vectorized:
//
//  * Parallel: the outermost loop with independent iterations (Spatial, or a
//    strategy's Parallel) outside any Alloc (a local is shared by the
//    iterations), when it does at least kParallelWork operations: waking the
//    pool costs microseconds, so small loops stay serial. One per nest.
//  * Vectorized: an innermost Spatial loop (its body has no loop) that calls
//    no math function without a vector form (calls_math_function: sin, cos,
//    pow, float floor division; exp, log, tanh and erf in float64).
//  * A loop that is both, with at least 2 * kStrip iterations, is strip-mined:
//    a Parallel loop over strips of kStrip iterations, each a Vectorized loop,
//    and a Serial remainder (LLVM vectorizes it as it sees fit), there even
//    when empty: the nest's shape is the same for every extent, so kernels
//    that differ in it share a function (loops/Templates.h).
//  * Everything else (Reduce, the Spatial loops between) runs Serial.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Log.h"

#include <unordered_map>

namespace gradc {
namespace {

// 2^14: a scan's per-step elementwise kernels (32 x 256 states) gain from
// the pool on two cores (the LSTM step 40.4 -> 39.1 ms, the GPT step 8.1 ->
// 6.9 ms); 2^16 kept them serial.
constexpr double kParallelWork = 1 << 14;
constexpr int64_t kStrip = 1024;

class CpuSchedule : public LoopMutator {
public:
  CpuSchedule(const Target &target, const std::string &kernel) : target_(target), kernel_(kernel) {}

private:
  const Target &target_;
  const std::string &kernel_;
  bool parallel_taken_ = false; // inside (or after choosing) this nest's Parallel loop
  int allocs_open_ = 0;

  StmtPtr on_alloc(const StmtPtr &s) override {
    ++allocs_open_;
    StmtPtr out = LoopMutator::on_alloc(s);
    --allocs_open_;
    return out;
  }

  bool profitable(const Stmt &s) const {
    double work = estimated_work(s);
    bool ok = s.extent >= 2 && work >= kParallelWork && target_.cores != 1;
    if (!ok && log_enabled(LogLevel::Debug))
      log(LogLevel::Debug, "schedule",
          kernel_ + ": loop " + s.var->name + " stays serial (" + std::to_string(int64_t(work)) +
              " operations, the pool pays from " + std::to_string(int64_t(kParallelWork)) +
              (target_.cores == 1 ? "; one core" : "") + ")");
    return ok;
  }

  StmtPtr on_for(const StmtPtr &s) override {
    bool independent = s->for_kind == ForKind::Spatial || s->for_kind == ForKind::Parallel;
    if (independent && !parallel_taken_ && allocs_open_ == 0) {
      if (profitable(*s)) {
        parallel_taken_ = true;
        StmtPtr body = mutate(s->body);
        parallel_taken_ = false;
        if (s->for_kind == ForKind::Spatial && !contains_loop(body) && !calls_math_function(body) &&
            s->extent >= 2 * kStrip)
          return strips(*s, body);
        return with_for(*s, ForKind::Parallel, body);
      }
    }
    StmtPtr body = mutate(s->body);
    ForKind kind = s->for_kind;
    if (kind == ForKind::Parallel)
      kind = ForKind::Serial; // a strategy's Parallel loop that the cost rule keeps serial
    else if (kind == ForKind::Spatial)
      kind = contains_loop(body) || calls_math_function(body) ? ForKind::Serial : ForKind::Vectorized;
    else if (kind == ForKind::Reduce)
      kind = ForKind::Serial;
    return kind == s->for_kind && body == s->body ? s : with_for(*s, kind, body);
  }

  /// for o in [0, n / kStrip) parallel { for i in [0, kStrip) vectorized { body[o kStrip + i] } }
  /// for r in [0, n % kStrip) serial { body[n - n % kStrip + r] }
  StmtPtr strips(const Stmt &loop, const StmtPtr &body) {
    int64_t full = loop.extent / kStrip, rest = loop.extent % kStrip;
    auto outer = std::make_shared<LVar>(LVar{loop.var->name + ".o"});
    auto inner = std::make_shared<LVar>(LVar{loop.var->name + ".i"});
    LExprPtr index = binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(outer), int_imm(kStrip)), var_ref(inner));
    std::vector<StmtPtr> parts{for_loop(
        outer, full, ForKind::Parallel,
        for_loop(inner, kStrip, ForKind::Vectorized, substitute(body, {{loop.var.get(), index}})))};
    auto tail = std::make_shared<LVar>(LVar{loop.var->name + ".r"});
    LExprPtr at = binary(BinaryOp::Add, var_ref(tail), int_imm(full * kStrip));
    parts.push_back(for_loop(tail, rest, ForKind::Serial, substitute(body, {{loop.var.get(), at}})));
    return seq(std::move(parts));
  }
};

} // namespace

void schedule_cpu(LoweredFunction &fn, const Target &target) {
  for (Kernel &k : fn.kernels)
    k.body = CpuSchedule(target, k.name).mutate(k.body);
}

} // namespace gradc
