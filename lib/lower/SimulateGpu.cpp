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
// its source lane's.
//
// The result runs on the CPU target's code generator and must give the CPU
// target's results; it is how the test suite checks GPU schedules without a
// GPU.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Functor.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"

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
};

/// The statements of one block's threads, cut at their barriers and
/// shuffles. `thread` is the thread loop's variable; each piece binds a
/// fresh one in its place.
class ThreadSplitter {
public:
  ThreadSplitter(const Stmt &thread_loop, int64_t warp)
      : var_(thread_loop.var), threads_(thread_loop.extent), warp_(warp) {}

  /// `s` run by every thread, in pieces that each finish for all threads
  /// before the next begins.
  StmtPtr split(const StmtPtr &s) {
    if (!s)
      return s;
    if (!synchronizes(s))
      return for_threads(s);
    switch (s->kind) {
    case StmtKind::Barrier:
      return seq({});
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
    }
    internal_error(kPass, "a statement kind it does not handle");
  }

private:
  LVarPtr var_;
  int64_t threads_, warp_;
  int pieces_ = 0;

  /// A loop over every thread running `body`, with a variable of its own.
  StmtPtr for_threads(const StmtPtr &body) {
    auto t = std::make_shared<LVar>(LVar{var_->name + "." + std::to_string(pieces_++)});
    return for_loop(t, threads_, ForKind::Serial, substitute(body, {{var_.get(), var_ref(t)}}));
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
/// iteration), then the thread loop, split.
StmtPtr simulate_block(const StmtPtr &s, int64_t warp) {
  if (s->kind == StmtKind::Alloc && s->buffer->scope == BufferScope::Shared) {
    auto local = std::make_shared<Buffer>(*s->buffer);
    local->scope = BufferScope::Local;
    return alloc(local, simulate_block(Rebuffer(*s->buffer, local, nullptr).mutate(s->body), warp));
  }
  GRADC_CHECK(s->kind == StmtKind::For && s->for_kind == ForKind::ThreadIdx, kPass,
              "a block loop's body is not shared allocations around a thread loop");
  GRADC_CHECK(s->extent % warp == 0 || !synchronizes(s->body), kPass,
              "a block of " + std::to_string(s->extent) + " threads, not whole warps, shuffles");
  return ThreadSplitter(*s, warp).split(s->body);
}

} // namespace

void simulate_gpu(LoweredFunction &fn, const Target &target) {
  for (Kernel &k : fn.kernels) {
    const StmtPtr &b = k.body;
    if (b->kind == StmtKind::For && b->for_kind == ForKind::BlockIdx)
      k.body = for_loop(b->var, b->extent, b->extent > 1 ? ForKind::Parallel : ForKind::Serial,
                        simulate_block(b->body, target.warp_size));
    else // a kernel left to one thread: its serial loops as they are
      GRADC_CHECK(!contains_loop(b, ForKind::ThreadIdx) && !synchronizes(b), kPass,
                  "kernel " + k.name + " has threads but no block loop");
    k.grid = k.block = 1;
  }
}

} // namespace gradc
