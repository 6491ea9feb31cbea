//===- SimulateGpu.cpp - run a bound GPU kernel on the CPU ----------------===//
//
// `gradc run --target=cuda --simulate` executes the loop program that CUDA
// binding produced, by LoopIR.h's rules for GPU kernels, as an ordinary CPU
// program: each block is one iteration of a Parallel loop (blocks never wait
// for each other), its Shared buffers are locals of that iteration, and its
// threads run one after another. A thread body without a Barrier or Shuffle
// is a loop over the threads. Where it has one, the body is cut there (the
// way CPU runtimes of CUDA run a block): each piece between two cuts runs for
// every thread before the next piece starts, so every thread has reached a
// barrier before any goes past it. A loop or branch that holds a cut is
// uniform across the block (the verifier checks), so it stays around its
// pieces, run once for the block. A thread's Local buffer that lives across a
// cut gets one copy per thread. A Shuffle is a cut too: every thread of the
// warp writes the value it offers into an exchange buffer, then each reads
// its source lane's. So is a warp's tensor-core product (Mma): every lane
// puts its fragments into its warp's matrices, then each computes its part.
//
// Cutting at every barrier orders more than a GPU does: a block whose threads
// race (one writes a shared element that another reads or writes with no
// barrier between) could still give the right numbers here. So every access
// to shared memory is checked as it runs: each element remembers which thread
// last wrote it and which (one, or several) read it, and in which interval
// between two barriers; an access that meets another thread's in the same
// interval sets the function's status word (kStatusGpuRace) with the site,
// element and thread, and `gradc run` reports it as a bug.
//
// The result runs on the CPU target's code generator and must give the CPU
// target's results; it is how the test suite checks GPU schedules without a
// GPU.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"

#include <optional>

namespace gradc {
namespace {

const char *const kPass = "GPU simulation";

/// Every access to buffer `from` made to `to` instead: element i of thread t
/// at t * numel + i (a thread's Local given one copy per thread), or at i
/// where `thread` is null (a block's Shared buffer made a Local).
class Rebuffer : public LoopMutator {
public:
  Rebuffer(const Buffer &from, BufferPtr to, LExprPtr thread)
      : from_(from), to_(std::move(to)), thread_(std::move(thread)) {}
  using LoopMutator::mutate;

private:
  const Buffer &from_;
  BufferPtr to_;
  LExprPtr thread_;
  LExprPtr at(const LExprPtr &index) {
    if (!thread_)
      return index;
    return binary(BinaryOp::Add, binary(BinaryOp::Mul, thread_, int_imm(from_.numel())), index);
  }
  StmtPtr on_store(const StmtPtr &s) override {
    StmtPtr st = LoopMutator::on_store(s);
    return st->buffer.get() == &from_ ? store(to_, at(st->index), st->value) : st;
  }
  LExprPtr on_load(const LExprPtr &e) override {
    LExprPtr l = LoopMutator::on_load(e);
    return l->buffer.get() == &from_ ? load(to_, at(l->operands[0])) : l;
  }
  StmtPtr on_mma(const StmtPtr &s) override {
    StmtPtr m = LoopMutator::on_mma(s);
    return m->buffer.get() == &from_ ? mma_tf32(to_, at(m->index), m->inputs) : m;
  }
};

/// The race check of one block's shared memory (see the file comment): for
/// each Shared buffer (made a Local), the interval and thread of each
/// element's last write and of its readers (-2: several threads); the block's
/// interval count, which each barrier advances.
class RaceCheck : public LoopMutator {
public:
  RaceCheck(const LVarPtr &thread, BufferPtr status, int64_t site)
      : thread_(var_ref(thread)), status_(std::move(status)), site_(site) {
    epoch_ = scratch("epoch", 1);
  }
  /// Watches buffer `shared` (a block's Shared buffer, made a Local).
  void watch(const BufferPtr &shared) {
    int64_t n = shared->numel();
    shadows_[shared.get()] = {scratch(shared->name + ".write_epoch", n), scratch(shared->name + ".write_thread", n),
                              scratch(shared->name + ".read_epoch", n), scratch(shared->name + ".read_thread", n),
                              int64_t(shadows_.size())};
  }
  bool watching() const { return !shadows_.empty(); }
  /// `block` (run once per block, around its thread pieces) with the check's
  /// buffers allocated and cleared first.
  StmtPtr around(const StmtPtr &block) const {
    std::vector<StmtPtr> init = {store(epoch_, int_imm(0), int_imm(0))};
    for (const auto &[buf, s] : shadows_) {
      auto e = std::make_shared<LVar>(LVar{"e"});
      init.push_back(for_loop(e, buf->numel(), ForKind::Serial,
                              seq({store(s.write_epoch, var_ref(e), int_imm(-1)),
                                   store(s.read_epoch, var_ref(e), int_imm(-1))})));
    }
    init.push_back(block);
    StmtPtr out = seq(std::move(init));
    for (const BufferPtr &b : allocated_)
      out = alloc(b, out);
    return out;
  }
  /// What a barrier does to the check: the next interval.
  StmtPtr next_interval() const {
    return store(epoch_, int_imm(0), binary(BinaryOp::Add, load(epoch_, int_imm(0)), int_imm(1)));
  }
  /// Sites: which watched buffer a status word names (site + ordinal).
  std::vector<std::string> names() const {
    std::vector<std::string> out(shadows_.size());
    for (const auto &[buf, s] : shadows_)
      out[size_t(s.ordinal)] = buf->name;
    return out;
  }
  using LoopMutator::mutate;

private:
  struct Shadow {
    BufferPtr write_epoch, write_thread, read_epoch, read_thread;
    int64_t ordinal;
  };
  LExprPtr thread_;
  BufferPtr status_, epoch_;
  int64_t site_;
  std::unordered_map<const Buffer *, Shadow> shadows_;
  std::vector<BufferPtr> allocated_;

  BufferPtr scratch(const std::string &name, int64_t n) {
    auto b = std::make_shared<Buffer>(Buffer{"race." + name, DType::Int64, {n}, BufferScope::Local});
    allocated_.push_back(b);
    return b;
  }
  LExprPtr now() const { return load(epoch_, int_imm(0)); }
  LExprPtr eq(LExprPtr a, LExprPtr b) const { return compare(CompareOp::EQ, std::move(a), std::move(b)); }
  LExprPtr ne(LExprPtr a, LExprPtr b) const { return compare(CompareOp::NE, std::move(a), std::move(b)); }
  LExprPtr both(LExprPtr a, LExprPtr b) const { return binary(BinaryOp::And, std::move(a), std::move(b)); }
  /// Another thread's access of element i in this interval, per the shadows.
  LExprPtr other(const BufferPtr &epoch, const BufferPtr &thread, const LExprPtr &i) const {
    return both(eq(load(epoch, i), now()), ne(load(thread, i), thread_));
  }
  /// The first race a function meets is its status: {code, site, element, thread}.
  StmtPtr report(const LExprPtr &race, const Shadow &s, const LExprPtr &i) const {
    LExprPtr z = int_imm(0);
    return if_then(both(race, eq(load(status_, z), z)),
                   seq({store(status_, z, int_imm(kStatusGpuRace)), store(status_, int_imm(1), int_imm(site_ + s.ordinal)),
                        store(status_, int_imm(2), i), store(status_, int_imm(3), thread_)}));
  }
  /// Checks and records the watched loads in `e` (before the statement that makes them).
  void reads(const LExprPtr &e, std::vector<StmtPtr> &out) const {
    for (const LExprPtr &o : e->operands)
      reads(o, out);
    if (e->kind != LExprKind::Load)
      return;
    auto it = shadows_.find(e->buffer.get());
    if (it == shadows_.end())
      return;
    const Shadow &s = it->second;
    const LExprPtr &i = e->operands[0];
    out.push_back(report(other(s.write_epoch, s.write_thread, i), s, i));
    out.push_back(store(s.read_thread, i, select(other(s.read_epoch, s.read_thread, i), int_imm(-2), thread_)));
    out.push_back(store(s.read_epoch, i, now()));
  }
  StmtPtr on_mma(const StmtPtr &st) override { // its destination is a thread's Local
    std::vector<StmtPtr> out;
    reads(st->index, out);
    for (const LExprPtr &e : st->inputs)
      reads(e, out);
    out.push_back(st);
    return seq(std::move(out));
  }
  StmtPtr on_store(const StmtPtr &st) override {
    std::vector<StmtPtr> out;
    reads(st->index, out);
    reads(st->value, out);
    auto it = shadows_.find(st->buffer.get());
    if (it == shadows_.end()) {
      out.push_back(st);
      return seq(std::move(out));
    }
    const Shadow &s = it->second;
    const LExprPtr &i = st->index;
    out.push_back(report(binary(BinaryOp::Or, other(s.write_epoch, s.write_thread, i),
                                other(s.read_epoch, s.read_thread, i)),
                         s, i));
    out.push_back(st);
    out.push_back(store(s.write_epoch, i, now()));
    out.push_back(store(s.write_thread, i, thread_));
    return seq(std::move(out));
  }
  StmtPtr on_if(const StmtPtr &st) override {
    std::vector<StmtPtr> out;
    reads(st->value, out);
    out.push_back(if_then(st->value, mutate(st->body), mutate(st->else_body)));
    return seq(std::move(out));
  }
};

/// The statements of one block's threads, cut at their barriers and
/// shuffles. `thread` is the thread loop's variable; each piece binds a
/// fresh one in its place.
class ThreadSplitter {
public:
  ThreadSplitter(const Stmt &thread_loop, int64_t warp, const RaceCheck *race)
      : var_(thread_loop.var), threads_(thread_loop.extent), warp_(warp), race_(race) {}

  /// `s` run by every thread, in pieces that each finish for all threads
  /// before the next begins.
  StmtPtr split(const StmtPtr &s) {
    if (!s)
      return s;
    if (!synchronizes(s))
      return for_threads(s);
    switch (s->kind) {
    case StmtKind::Barrier:
      return race_ ? race_->next_interval() : seq({});
    case StmtKind::Seq: {
      std::vector<StmtPtr> out, run;
      auto flush = [&] {
        if (!run.empty())
          out.push_back(for_threads(seq(run)));
        run.clear();
      };
      for (const StmtPtr &c : s->seq) {
        if (synchronizes(c)) {
          flush();
          out.push_back(split(c));
        } else {
          run.push_back(c);
        }
      }
      flush();
      return seq(std::move(out));
    }
    case StmtKind::For: // uniform: the same trips for every thread
      return for_loop(s->var, s->extent, ForKind::Serial, split(s->body));
    case StmtKind::If: // uniform condition
      return if_then(s->value, split(s->body), split(s->else_body));
    case StmtKind::Alloc: {
      const Buffer &local = *s->buffer;
      GRADC_CHECK(local.scope == BufferScope::Local, kPass, "shared buffer " + local.name + " inside a thread loop");
      auto copies = std::make_shared<Buffer>(local);
      copies->shape = {threads_ * local.numel()};
      StmtPtr body = Rebuffer(local, copies, var_ref(var_)).mutate(s->body);
      return alloc(copies, split(body));
    }
    case StmtKind::Store:
      return split_shuffles(s);
    case StmtKind::Mma:
      return split_mma(*s);
    }
    internal_error(kPass, "a statement kind it does not handle");
  }

private:
  LVarPtr var_;
  int64_t threads_, warp_;
  const RaceCheck *race_;
  int pieces_ = 0;

  /// A loop over every thread running `body`, with a variable of its own.
  StmtPtr for_threads(const StmtPtr &body) {
    auto t = std::make_shared<LVar>(LVar{var_->name + "." + std::to_string(pieces_++)});
    return for_loop(t, threads_, ForKind::Serial, substitute(body, {{var_.get(), var_ref(t)}}));
  }

  /// A warp's tensor-core product (LoopIR.h: StmtKind::Mma): a piece in
  /// which each lane puts its fragments of A, B and C where they belong in
  /// its warp's matrices (exchange buffers of 16 x 8, 8 x 8 and 16 x 8 per
  /// warp), then one in which each computes its four elements of D, the
  /// products summed in k order with fused multiply-adds onto C.
  StmtPtr split_mma(const Stmt &s) {
    GRADC_CHECK(!synchronizes(s.index), kPass, "a shuffle in a tensor-core product's index");
    const int64_t warps = threads_ / warp_;
    GRADC_CHECK(warp_ == 32, kPass, "a tensor-core product on warps of " + std::to_string(warp_));
    auto matrix = [&](const char *name, int64_t elements) {
      return std::make_shared<Buffer>(Buffer{name, DType::Float32, Shape{warps * elements}, BufferScope::Local});
    };
    BufferPtr a = matrix("mma_a", 16 * 8), b = matrix("mma_b", 8 * 8), c = matrix("mma_c", 16 * 8);
    LExprPtr t = var_ref(var_);
    auto imm = [](int64_t v) { return int_imm(v); };
    auto add = [](LExprPtr x, LExprPtr y) { return binary(BinaryOp::Add, std::move(x), std::move(y)); };
    auto mul = [](LExprPtr x, int64_t y) { return binary(BinaryOp::Mul, std::move(x), int_imm(y)); };
    LExprPtr w = binary(BinaryOp::FloorDiv, t, imm(32)), lane = binary(BinaryOp::FloorMod, t, imm(32));
    LExprPtr g = binary(BinaryOp::FloorDiv, lane, imm(4)), q = binary(BinaryOp::FloorMod, lane, imm(4));
    // Element (row, col) of a warp's matrix of `size` elements, `cols` columns.
    auto at = [&](int64_t size, int64_t cols, LExprPtr row, LExprPtr col) {
      return add(mul(w, size), add(mul(std::move(row), cols), std::move(col)));
    };
    LExprPtr g8 = add(g, imm(8)), q4 = add(q, imm(4)), q2 = mul(q, 2), q21 = add(mul(q, 2), imm(1));
    // Where input i of the lane goes: a0..a3, b0, b1, c0..c3 (LoopIR.h).
    std::vector<std::pair<BufferPtr, LExprPtr>> places = {
        {a, at(128, 8, g, q)},  {a, at(128, 8, g8, q)},  {a, at(128, 8, g, q4)}, {a, at(128, 8, g8, q4)},
        {b, at(64, 8, q, g)},   {b, at(64, 8, q4, g)},
        {c, at(128, 8, g, q2)}, {c, at(128, 8, g, q21)}, {c, at(128, 8, g8, q2)}, {c, at(128, 8, g8, q21)}};
    std::vector<StmtPtr> offer;
    for (size_t i = 0; i < kMmaInputs; ++i)
      offer.push_back(store(places[i].first, places[i].second, s.inputs[i]));
    // The lane's element j of D: where its c_j is.
    auto acc = std::make_shared<Buffer>(Buffer{"mma_acc", DType::Float32, Shape{1}, BufferScope::Local});
    std::vector<StmtPtr> compute;
    for (int64_t j = 0; j < 4; ++j) {
      LExprPtr row = j < 2 ? g : g8, col = j % 2 ? q21 : q2;
      auto k = std::make_shared<LVar>(LVar{"k"});
      LExprPtr kv = var_ref(k);
      LExprPtr product = mul_add(load(a, at(128, 8, row, kv)), load(b, at(64, 8, kv, col)), load(acc, imm(0)));
      compute.push_back(alloc(acc, seq({store(acc, imm(0), load(c, at(128, 8, row, col))),
                                        for_loop(k, 8, ForKind::Serial, store(acc, imm(0), product)),
                                        store(s.buffer, add(s.index, imm(j)), load(acc, imm(0)))})));
    }
    return alloc(a, alloc(b, alloc(c, seq({for_threads(seq(offer)), for_threads(seq(compute))}))));
  }

  /// A store whose value has shuffles: per shuffle, innermost first, a piece
  /// in which each thread stores the value it offers into an exchange buffer
  /// (one element per thread), the shuffle then a load of its source lane's
  /// element; the store itself in the last piece.
  StmtPtr split_shuffles(const StmtPtr &s) {
    GRADC_CHECK(!synchronizes(s->index), kPass, "a shuffle in a store's index");
    std::vector<StmtPtr> pieces;
    std::vector<BufferPtr> exchanges;
    struct Replace : LoopMutator {
      ThreadSplitter *self;
      std::vector<StmtPtr> *pieces;
      std::vector<BufferPtr> *exchanges;
      using LoopMutator::mutate;
      LExprPtr on_shuffle(const LExprPtr &e) override {
        LExprPtr value = mutate(e->operands[0]), lane = mutate(e->operands[1]);
        auto xchg = std::make_shared<Buffer>(Buffer{"shuffle" + std::to_string(exchanges->size()), value->dtype,
                                                    Shape{self->threads_}, BufferScope::Local});
        exchanges->push_back(xchg);
        LExprPtr t = var_ref(self->var_);
        pieces->push_back(self->for_threads(store(xchg, t, value)));
        LExprPtr w = int_imm(self->warp_);
        LExprPtr first = binary(BinaryOp::Mul, binary(BinaryOp::FloorDiv, t, w), w);
        return load(xchg, binary(BinaryOp::Add, first, binary(BinaryOp::FloorMod, lane, w)));
      }
    } replace;
    replace.self = this;
    replace.pieces = &pieces;
    replace.exchanges = &exchanges;
    LExprPtr value = replace.mutate(s->value);
    pieces.push_back(for_threads(store(s->buffer, s->index, value)));
    StmtPtr out = seq(std::move(pieces));
    for (auto it = exchanges.rbegin(); it != exchanges.rend(); ++it)
      out = alloc(*it, out);
    return out;
  }
};

/// The block loop's body: its Shared allocations (Locals of the block's
/// iteration, watched by `race`), then the thread loop, split.
StmtPtr simulate_block(const StmtPtr &s, int64_t warp, const std::function<RaceCheck &(const Stmt &)> &race,
                       std::vector<BufferPtr> shared = {}) {
  if (s->kind == StmtKind::Alloc && s->buffer->scope == BufferScope::Shared) {
    auto local = std::make_shared<Buffer>(*s->buffer);
    local->scope = BufferScope::Local;
    shared.push_back(local);
    return alloc(local, simulate_block(Rebuffer(*s->buffer, local, nullptr).mutate(s->body), warp, race, shared));
  }
  GRADC_CHECK(s->kind == StmtKind::For && s->for_kind == ForKind::ThreadIdx, kPass,
              "a block loop's body is not shared allocations around a thread loop");
  GRADC_CHECK(s->extent % warp == 0 || !synchronizes(s->body), kPass,
              "a block of " + std::to_string(s->extent) + " threads, not whole warps, shuffles");
  if (shared.empty())
    return ThreadSplitter(*s, warp, nullptr).split(s->body);
  RaceCheck &check = race(*s);
  for (const BufferPtr &b : shared)
    check.watch(b);
  return check.around(ThreadSplitter(*s, warp, &check).split(check.mutate(s->body)));
}

/// The function's status word, made where it has none: 4 int64 after the
/// planned workspace.
BufferPtr status_word(LoweredFunction &fn) {
  if (!fn.status) {
    auto b = std::make_shared<Buffer>(Buffer{"status", DType::Int64, {kStatusWords}, BufferScope::Arena});
    b->offset = (fn.workspace_bytes + 63) / 64 * 64;
    fn.workspace_bytes = b->offset + b->bytes();
    fn.arena.push_back(b);
    fn.status = b;
  }
  return fn.status;
}

} // namespace

/// A chain of block (or thread) loops, one per dimension, as one loop over
/// the linear index, x fastest (what decides a thread's warp and lane).
StmtPtr one_dimension(const StmtPtr &loop) {
  if (bound_dim(*loop) == 0)
    return loop;
  std::vector<const Stmt *> chain;
  for (const Stmt *c = loop.get(); !chain.size() || chain.back() != &innermost_bound(*loop); c = c->body.get())
    chain.push_back(c);
  return collapse_nest(chain, loop->for_kind, std::make_shared<LVar>(*loop->var));
}

/// A bound kernel's grid and block, each made one dimension.
StmtPtr linear_launch(const StmtPtr &body) {
  struct Linear : LoopMutator {
    StmtPtr on_for(const StmtPtr &s) override {
      if (s->for_kind != ForKind::BlockIdx && s->for_kind != ForKind::ThreadIdx)
        return LoopMutator::on_for(s);
      StmtPtr one = one_dimension(s);
      return with_for(*one, one->for_kind, mutate(one->body));
    }
  };
  return Linear().mutate(body);
}

std::vector<std::string> simulate_gpu(LoweredFunction &fn, const Target &target) {
  std::vector<std::string> sites;
  for (Kernel &k : fn.kernels) {
    const StmtPtr b = linear_launch(k.body);
    std::optional<RaceCheck> check;
    auto race = [&](const Stmt &threads) -> RaceCheck & {
      check.emplace(threads.var, status_word(fn), int64_t(sites.size()));
      return *check;
    };
    if (b && b->kind == StmtKind::For && b->for_kind == ForKind::BlockIdx)
      k.body = for_loop(b->var, b->extent, b->extent > 1 ? ForKind::Parallel : ForKind::Serial,
                        simulate_block(b->body, target.warp_size, race));
    else // a kernel left to one thread: its serial loops as they are
      GRADC_CHECK(!contains_loop(b, ForKind::ThreadIdx) && !synchronizes(b), kPass,
                  "kernel " + k.name + " has threads but no block loop");
    if (check) {
      for (const std::string &name : check->names())
        sites.push_back("shared buffer " + name + " of kernel " + k.name);
      k.buffers = touched_buffers(k.body);
    }
    k.grid = k.block = Dim3{};
  }
  return sites;
}

} // namespace gradc
