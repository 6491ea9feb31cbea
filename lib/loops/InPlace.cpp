//===- InPlace.cpp - the rule of a parameter updated in place -------------===//
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Functor.h"

#include <algorithm>

namespace gradc {

namespace {

/// Whether a kernel stores into or loads from `buf`.
class Touches : public LoopVisitor {
public:
  explicit Touches(const Buffer &buf) : buf_(buf) {}
  bool stores = false, loads = false;
  using LoopVisitor::visit;

protected:
  void on_store(const StmtPtr &s) override {
    stores |= s->buffer.get() == &buf_;
    LoopVisitor::on_store(s);
  }
  void on_load(const LExprPtr &e) override {
    loads |= e->buffer.get() == &buf_;
    LoopVisitor::on_load(e);
  }

private:
  const Buffer &buf_;
};

/// The writer's rule: each store into `buf` under loops whose variables its
/// index reads (each element written in one iteration), and each read of
/// `buf` at the index of a store (the same element, in the same iteration:
/// before the store it reads the old value, after it the new one).
/// Visited twice: the stores, then the reads.
class Pointwise : public LoopVisitor {
public:
  explicit Pointwise(const Buffer &buf) : buf_(buf) {}
  std::string why;
  using LoopVisitor::visit;
  void check(const StmtPtr &body) {
    visit(body);
    reads_ = true;
    visit(body);
  }

protected:
  void on_for(const StmtPtr &s) override {
    if (s->extent <= 1) { // runs once: its variable is 0, folded out of indices
      LoopVisitor::on_for(s);
      return;
    }
    loops_.push_back(s->var.get());
    LoopVisitor::on_for(s);
    loops_.pop_back();
  }
  void on_store(const StmtPtr &s) override {
    if (s->buffer.get() == &buf_ && !reads_) {
      std::vector<const LVar *> read;
      collect_vars(s->index, read);
      for (const LVar *v : loops_)
        if (std::find(read.begin(), read.end(), v) == read.end() && why.empty())
          why = "a store into " + buf_.name + " repeats under loop " + v->name + ", which its index does not read";
      stores_.push_back(s->index);
    }
    LoopVisitor::on_store(s);
  }
  void on_load(const LExprPtr &e) override {
    if (reads_ && e->buffer.get() == &buf_ && why.empty() &&
        std::none_of(stores_.begin(), stores_.end(), [&](const LExprPtr &i) { return same_expr(i, e->operands[0]); }))
      why = "a read of " + buf_.name + " that is not of the element its store writes";
    LoopVisitor::on_load(e);
  }

private:
  static void collect_vars(const LExprPtr &e, std::vector<const LVar *> &out) {
    if (e->kind == LExprKind::Var)
      out.push_back(e->var.get());
    for (const LExprPtr &o : e->operands)
      collect_vars(o, out);
  }
  const Buffer &buf_;
  std::vector<const LVar *> loops_;
  std::vector<LExprPtr> stores_; // the indices `buf` is stored at
  bool reads_ = false;
};

} // namespace

std::string in_place_violation(const LoweredFunction &fn, const Buffer &buf) {
  size_t writer = fn.kernels.size();
  for (size_t k = 0; k < fn.kernels.size(); ++k) {
    const Kernel &kernel = fn.kernels[k];
    if (std::none_of(kernel.buffers.begin(), kernel.buffers.end(), [&](const BufferPtr &b) { return b.get() == &buf; }))
      continue;
    Touches t(buf);
    t.visit(kernel.body);
    if (!t.stores)
      continue;
    if (writer < k)
      return "kernel " + kernel.name + " writes " + buf.name + " after kernel " + fn.kernels[writer].name +
             " updated it";
    writer = k;
    for (const TimeLoop &l : fn.time_loops)
      if (l.first <= k && k < l.last)
        return "kernel " + kernel.name + " updates " + buf.name + " inside a time loop";
    Pointwise p(buf);
    p.check(kernel.body);
    if (!p.why.empty())
      return "kernel " + kernel.name + ": " + p.why;
  }
  return "";
}

} // namespace gradc
