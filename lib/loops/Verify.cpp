//===- Verify.cpp - the loop-IR verifier ----------------------------------===//
#include "gradc/loops/Verify.h"
#include "gradc/loops/Functor.h"
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Memory.h"
#include "gradc/loops/Range.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

class KernelVerifier : public LoopVisitor {
public:
  KernelVerifier(const Kernel &k, const LoopVerifyOptions &opts, const std::string &where)
      : opts_(opts), where_(where) {
    for (const BufferPtr &b : k.buffers)
      buffers_.insert(b.get());
  }

private:
  const LoopVerifyOptions &opts_;
  const std::string &where_;
  std::unordered_set<const Buffer *> buffers_;
  std::unordered_set<const LVar *> bound_;
  RangeOf ranges_;
  int parallel_depth_ = 0, allocs_open_ = 0, empty_loops_ = 0;
  // GPU kernels (LoopIR.h): inside the block loop, inside the thread loop,
  // under how many conditions that depend on the thread.
  bool in_block_ = false, in_thread_ = false;
  int divergent_ = 0;
  std::unordered_set<const LVar *> thread_vars_; // of the thread loops (up to 3 dimensions)
  const Stmt *chain_next_ = nullptr; // the body of a block or thread loop: may be the next dimension

  /// Whether threads of one block may see different values of `e`: it reads
  /// the thread index, a thread's Local buffer, or memory at an index that
  /// does (a shuffle's value is another thread's).
  bool thread_dependent(const LExprPtr &e) const {
    if (e->kind == LExprKind::Var && thread_vars_.count(e->var.get()))
      return true;
    if (e->kind == LExprKind::Load && e->buffer->scope == BufferScope::Local)
      return true;
    if (e->kind == LExprKind::Shuffle)
      return true;
    for (const LExprPtr &o : e->operands)
      if (thread_dependent(o))
        return true;
    return false;
  }
  /// A barrier or a shuffle: every thread of the block reaches it alike.
  void synchronizing(const char *what) {
    if (!in_thread_)
      fail(std::string(what) + " outside a GPU thread loop");
    if (divergent_ > 0)
      fail(std::string(what) + " under a condition or loop that depends on the thread");
  }

  [[noreturn]] void fail(const std::string &what) { internal_error("verifier", where_ + ": " + what); }

  void on_for(const StmtPtr &s) override {
    if (s->extent < 0)
      fail("loop " + s->var->name + " has a negative extent");
    if (!bound_.insert(s->var.get()).second)
      fail("loop variable " + s->var->name + " is bound by two loops");
    if (opts_.scheduled) {
      if (unscheduled(s->for_kind))
        fail("loop " + s->var->name + " is still " + for_kind_name(s->for_kind) + " after scheduling");
      if (s->for_kind == ForKind::Parallel && (parallel_depth_ > 0 || allocs_open_ > 0))
        fail("parallel loop " + s->var->name + " inside another parallel loop or an allocation");
      if (s->for_kind == ForKind::Vectorized && contains_loop(s->body))
        fail("vectorized loop " + s->var->name + " is not innermost");
    }
    bool block = s->for_kind == ForKind::BlockIdx, thread = s->for_kind == ForKind::ThreadIdx;
    // The next dimension of the grid (of the block): the whole body of a
    // block (thread) loop.
    bool chained = s.get() == chain_next_ && (block ? in_block_ && !in_thread_ : thread && in_thread_);
    chain_next_ = nullptr;
    if (block && (in_block_ || in_thread_) && !chained)
      fail("block loop " + s->var->name + " inside another block or thread loop");
    if (thread && (!in_block_ || in_thread_) && !chained)
      fail("thread loop " + s->var->name + " outside a block loop, or inside another thread loop");
    if ((block || thread) && !chained && bound_dim(*s) >= kMaxLaunchDims)
      fail(std::string(block ? "block" : "thread") + " loop " + s->var->name + " binds more than 3 dimensions");
    if (in_block_ && !in_thread_ && !thread && !block)
      fail("loop " + s->var->name + " in a block loop, outside its thread loop");
    // Inside a thread, a loop that is not run in order by each thread (a
    // vectorized one) is not a place for a barrier.
    bool lanes = in_thread_ && !chained && s->for_kind != ForKind::Serial && s->for_kind != ForKind::Unrolled &&
                 !unscheduled(s->for_kind);
    const bool was_block = in_block_, was_thread = in_thread_;
    in_block_ |= block;
    in_thread_ |= thread;
    if (thread)
      thread_vars_.insert(s->var.get());
    if (block || thread)
      chain_next_ = s->body.get();
    divergent_ += lanes;
    parallel_depth_ += s->for_kind == ForKind::Parallel;
    empty_loops_ += s->extent == 0; // its body never runs: no index in it is out of bounds
    ranges_.vars[s->var.get()] = Range{0, std::max<int64_t>(0, s->extent - 1)};
    visit(s->body);
    empty_loops_ -= s->extent == 0;
    ranges_.vars.erase(s->var.get());
    parallel_depth_ -= s->for_kind == ForKind::Parallel;
    divergent_ -= lanes;
    if (thread)
      thread_vars_.erase(s->var.get());
    in_block_ = was_block;
    in_thread_ = was_thread;
  }

  void on_barrier(const StmtPtr &) override { synchronizing("barrier"); }
  void on_shuffle(const LExprPtr &e) override {
    synchronizing("shuffle");
    LoopVisitor::on_shuffle(e);
  }

  void on_alloc(const StmtPtr &s) override {
    if (s->buffer->scope == BufferScope::Shared && (!in_block_ || in_thread_))
      fail("shared buffer " + s->buffer->name + " allocated outside a block loop, or inside its thread loop");
    else if (s->buffer->scope == BufferScope::Local && in_block_ && !in_thread_)
      fail("local buffer " + s->buffer->name + " allocated in a block loop, outside its thread loop");
    else if (s->buffer->scope != BufferScope::Local && s->buffer->scope != BufferScope::Shared)
      fail("allocation of buffer " + s->buffer->name + ", which is neither local nor shared");
    buffers_.insert(s->buffer.get());
    ++allocs_open_;
    visit(s->body);
    --allocs_open_;
    buffers_.erase(s->buffer.get());
  }

  void on_if(const StmtPtr &s) override {
    if (synchronizes(s->value))
      fail("a shuffle in a condition");
    bool divergent = in_thread_ && thread_dependent(s->value);
    divergent_ += divergent;
    visit(s->value);
    // `if (e < c)`: inside the branch, e <= c - 1 (for a loop variable, every use of it).
    const LExpr &c = *s->value;
    const LExpr *guarded = nullptr;
    std::optional<int64_t> outer_bound; // a guard of the same expression around this one
    std::optional<std::pair<const LVar *, Range>> narrowed;
    bool dead = false;
    if (c.kind == LExprKind::Compare && c.cop == CompareOp::LT && c.operands[1]->kind == LExprKind::IntImm) {
      const LExpr &e = *c.operands[0];
      int64_t bound = c.operands[1]->ivalue - 1;
      auto var = e.kind == LExprKind::Var ? ranges_.vars.find(e.var.get()) : ranges_.vars.end();
      if (var != ranges_.vars.end()) {
        narrowed = {var->first, var->second};
        var->second.hi = std::min(var->second.hi, bound);
        // No value of the variable passes: the branch never runs (a serial
        // loop that runs once, over the full panels of a product that has none).
        dead = var->second.hi < var->second.lo;
      } else {
        guarded = &e;
        if (auto it = ranges_.upper.find(guarded); it != ranges_.upper.end()) {
          outer_bound = it->second;
          bound = std::min(bound, it->second);
        }
        ranges_.upper[guarded] = bound;
      }
    }
    empty_loops_ += dead;
    visit(s->body);
    empty_loops_ -= dead;
    if (guarded && outer_bound) // the else branch is still inside the outer guard
      ranges_.upper[guarded] = *outer_bound;
    else if (guarded)
      ranges_.upper.erase(guarded);
    if (narrowed)
      ranges_.vars[narrowed->first] = narrowed->second;
    visit(s->else_body);
    divergent_ -= divergent;
  }

  void access(const Buffer &buf, const LExprPtr &index, const char *what) {
    if (!buffers_.count(&buf))
      fail(std::string(what) + " of " + buf.name + ", which is neither a kernel buffer nor allocated here");
    if (index->dtype != DType::Int64)
      fail(std::string(what) + " of " + buf.name + " with a non-int64 index");
    if (synchronizes(index))
      fail(std::string(what) + " of " + buf.name + " at an index with a shuffle");
    MaybeRange r = ranges_.of(index);
    if (r && empty_loops_ == 0 && (r->lo < 0 || r->hi >= buf.numel()))
      fail(std::string(what) + " of " + buf.name + " (" + std::to_string(buf.numel()) + " elements) at indices " +
           std::to_string(r->lo) + ".." + std::to_string(r->hi));
  }

  void on_store(const StmtPtr &s) override {
    if (in_block_ && !in_thread_)
      fail("store into " + s->buffer->name + " in a block loop, outside its thread loop");
    if (s->buffer->scope == BufferScope::Input)
      fail("store into input buffer " + s->buffer->name);
    if (s->value->dtype != s->buffer->dtype)
      fail("store of a " + std::string(dtype_name(s->value->dtype)) + " into " + s->buffer->name);
    access(*s->buffer, s->index, "store");
    LoopVisitor::on_store(s);
  }

  void on_mma(const StmtPtr &s) override {
    synchronizing("tensor-core product");
    if (s->buffer->scope != BufferScope::Local || s->buffer->dtype != DType::Float32)
      fail("a tensor-core product into " + s->buffer->name + ", which is not a float32 local buffer");
    for (const LExprPtr &e : s->inputs)
      if (synchronizes(e))
        fail("a shuffle in a tensor-core product's input");
    for (int64_t j = 0; j < 4; ++j)
      access(*s->buffer, binary(BinaryOp::Add, s->index, int_imm(j)), "tensor-core product");
    LoopVisitor::on_mma(s);
  }

  void on_load(const LExprPtr &e) override {
    access(*e->buffer, e->operands[0], "load");
    LoopVisitor::on_load(e);
  }

  void on_var(const LExprPtr &e) override {
    if (!ranges_.vars.count(e->var.get()))
      fail("loop variable " + e->var->name + " used outside its loop");
  }
};

void verify_arena(const LoweredFunction &fn, const std::string &where) {
  if (fn.workspace_bytes > kMaxWorkspaceBytes)
    return; // a saturated plan, which the pipeline reports as a user error
  auto fail = [&](const std::string &what) { internal_error("verifier", where + ": " + what); };
  auto life = buffer_lifetimes(fn);
  // `to` written over `from` by the kernel that reads `from` last, which
  // hands it `from`'s bytes (Kernel::overwrites, loops/Memory.h: hands_over).
  auto handed = [&](const BufferPtr &from, const BufferPtr &to) {
    auto lt = life.find(to.get());
    if (lt == life.end() || !hands_over(life, lt->second.first, *from, *to))
      return false;
    const auto &pairs = fn.kernels[lt->second.first].overwrites;
    return std::any_of(pairs.begin(), pairs.end(), [&](const auto &p) { return p.first == to && p.second == from; });
  };
  for (const BufferPtr &b : fn.arena) {
    if (b->scope != BufferScope::Arena)
      fail(b->name + " is listed in the arena but is not an arena buffer");
    if (b->offset < 0 || b->offset % 64 != 0 || b->offset + b->bytes() > fn.workspace_bytes)
      fail("arena buffer " + b->name + " at offset " + std::to_string(b->offset) + " (" + std::to_string(b->bytes()) +
           " bytes) is misaligned or outside the " + std::to_string(fn.workspace_bytes) + "-byte workspace");
  }
  for (size_t i = 0; i < fn.arena.size(); ++i)
    for (size_t j = i + 1; j < fn.arena.size(); ++j) {
      const Buffer &a = *fn.arena[i], &b = *fn.arena[j];
      bool bytes_overlap = a.offset < b.offset + b.bytes() && b.offset < a.offset + a.bytes();
      if (!bytes_overlap || !life.count(&a) || !life.count(&b))
        continue;
      auto la = life[&a], lb = life[&b];
      if (!(la.second < lb.first || lb.second < la.first) && !handed(fn.arena[i], fn.arena[j]) &&
          !handed(fn.arena[j], fn.arena[i]))
        fail("arena buffers " + a.name + " and " + b.name + " share bytes while both are live (kernels " +
             std::to_string(la.first) + ".." + std::to_string(la.second) + " and " + std::to_string(lb.first) + ".." +
             std::to_string(lb.second) + ")");
    }
  // A buffer in a result's bytes is dead before the result is written, or
  // the kernel that writes the result writes it over that buffer; buffers in
  // one result follow one another the same way.
  for (const BufferPtr &b : fn.hosted) {
    if (!b->host || std::find(fn.outputs.begin(), fn.outputs.end(), b->host) == fn.outputs.end() ||
        b->host->bytes() != b->bytes() || !life.count(b.get()) || !life.count(b->host.get()))
      fail(b->name + " is placed in no result of its size");
    for (const BufferPtr &c : fn.hosted) {
      auto lb = life[b.get()], lc = life[c.get()];
      if (c != b && c->host == b->host && !(lb.second < lc.first || lc.second < lb.first) && !handed(b, c) &&
          !handed(c, b))
        fail(b->name + " and " + c->name + " share the bytes of " + b->host->name + " while both are live");
    }
    if (life[b.get()].second >= life[b->host.get()].first && !handed(b, b->host))
      fail(b->name + " is in " + b->host->name + "'s bytes while " + b->host->name + " is written");
  }
}

/// Each time loop holds at least one kernel of the function and runs at
/// least once, or has trip counts (>= 0) whose table it is entered a whole
/// number of times over (TimeLoop: one pass per run of its operator); two
/// loops are disjoint or one holds the other.
void verify_time_loops(const LoweredFunction &fn, const std::string &where) {
  auto range = [](const TimeLoop &l) { return "[" + std::to_string(l.first) + ", " + std::to_string(l.last) + ")"; };
  for (const TimeLoop &l : fn.time_loops) {
    if (l.first >= l.last || l.last > fn.kernels.size())
      internal_error("verifier", where + ": time loop over kernels " + range(l) + " of " +
                                     std::to_string(fn.kernels.size()) + " is empty or out of range");
    if (l.extent < 1 && !l.streamed())
      internal_error("verifier",
                     where + ": time loop over kernels " + range(l) + " runs " + std::to_string(l.extent) + " times");
    for (int64_t n : l.trips)
      if (n < 0 || n > l.extent)
        internal_error("verifier", where + ": time loop over kernels " + range(l) + " has trip count " +
                                       std::to_string(n) + " outside [0, " + std::to_string(l.extent) + "]");
  }
  for (const TimeLoop &a : fn.time_loops)
    for (const TimeLoop &b : fn.time_loops) {
      bool overlap = a.first < b.last && b.first < a.last;
      bool a_holds_b = a.first <= b.first && b.last <= a.last;
      if (&a != &b && overlap && !a_holds_b && !(b.first <= a.first && a.last <= b.last))
        internal_error("verifier", where + ": time loops over kernels " + range(a) + " and " + range(b) +
                                       " overlap without one holding the other");
    }
  // How many times each loop is entered: once per iteration of the loop
  // around it (walk_schedule opens outer loops first).
  std::map<const TimeLoop *, int64_t> iterations;
  std::vector<const TimeLoop *> open;
  walk_schedule(
      fn,
      [&](const TimeLoop &l) {
        int64_t n = open.empty() ? 1 : iterations[open.back()];
        int64_t table = int64_t(l.trips.size());
        if (l.streamed() && n % table != 0)
          internal_error("verifier", where + ": time loop over kernels " + range(l) + " is entered " +
                                         std::to_string(n) + " times but has " + std::to_string(table) +
                                         " trip counts, which do not divide it");
        int64_t total = 0;
        if (l.streamed())
          for (int64_t t : l.trips)
            total += n / table * t;
        else
          total = n * l.extent;
        iterations[&l] = total;
        open.push_back(&l);
      },
      [](size_t) {}, [&](const TimeLoop &) { open.pop_back(); });
}

/// Whether each block loop of `s` is a whole kernel: `s` itself, or before
/// scheduling a phase of a sequence (GPU binding launches each) or inside
/// data-parallel loops (which it makes more blocks).
bool whole_block_loops(const StmtPtr &s, bool scheduled) {
  if (!contains_loop(s, ForKind::BlockIdx))
    return true;
  if (s->kind == StmtKind::For && s->for_kind == ForKind::BlockIdx)
    return true;
  if (scheduled)
    return false;
  if (s->kind == StmtKind::Seq)
    return std::all_of(s->seq.begin(), s->seq.end(), [](const StmtPtr &c) { return whole_block_loops(c, false); });
  return s->kind == StmtKind::For && s->for_kind == ForKind::Spatial && whole_block_loops(s->body, false);
}

} // namespace

void verify(const LoweredFunction &fn, const LoopVerifyOptions &opts, const std::string &after_pass) {
  for (const Kernel &k : fn.kernels) {
    std::string where = "after " + after_pass + ", in kernel " + k.name + " of @" + fn.name;
    if (!k.body)
      internal_error("verifier", where + ": no body");
    if (!whole_block_loops(k.body, opts.scheduled))
      internal_error("verifier", where + ": a block loop that is not the whole kernel");
    KernelVerifier(k, opts, where).visit(k.body);
    for (int d = 0; d < kMaxLaunchDims; ++d)
      if (k.grid[d] < 1 || k.block[d] < 1)
        internal_error("verifier", where + ": launch shape below 1");
    for (const auto &[buf, over] : k.overwrites)
      if (std::string why = overwrite_violation(k, *buf, *over); !why.empty())
        internal_error("verifier", where + ": it may not write " + buf->name + " over " + over->name + ": " + why);
  }
  verify_time_loops(fn, "after " + after_pass + ", in @" + fn.name);
  // A parameter updated in place: no read of its old value follows its update.
  for (const BufferPtr &in : fn.inputs)
    if (in->scope == BufferScope::InOut)
      if (std::string why = in_place_violation(fn, *in); !why.empty())
        internal_error("verifier", "after " + after_pass + ", in @" + fn.name + ": parameter " + in->name +
                                       " is updated in place, but " + why);
  if (opts.planned)
    verify_arena(fn, "after " + after_pass + ", in @" + fn.name);
}

} // namespace gradc
