//===- InPlace.cpp - the rule of a parameter updated in place -------------===//
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Functor.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace gradc {

namespace {

/// An integer index as a polynomial: each monomial (a sorted list of atom
/// keys) with its coefficient. Atoms are variables and what is not a sum,
/// difference or product (min, floor division, a load), keyed by their kind
/// and their operands' own normal forms. Two indices with equal forms are
/// equal for every value of their variables: a store's
/// `((o*512 + m)*4608 + c)` and a read's `(o*2359296 + m*4608 + c)` are one
/// element, which comparing the trees would miss. A remainder is written
/// through its quotient (x mod d = x - d (x div d)), so an index split into
/// taps and joined again, ((c div 9)·3 + (c mod 9) div 3)·3 + c mod 3, is c.
class IndexForm {
public:
  using Monomial = std::vector<std::string>;
  using Poly = std::map<Monomial, int64_t>;

  static std::string key(const LExprPtr &e) { return str(of(e)); }

private:
  static Poly of(const LExprPtr &e) {
    if (e->kind == LExprKind::IntImm)
      return e->ivalue ? Poly{{{}, e->ivalue}} : Poly{};
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Add)
      return sum(of(e->operands[0]), of(e->operands[1]), 1);
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Sub)
      return sum(of(e->operands[0]), of(e->operands[1]), -1);
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::Mul)
      return product(of(e->operands[0]), of(e->operands[1]));
    bool by_one =
        e->kind == LExprKind::Binary && e->operands[1]->kind == LExprKind::IntImm && e->operands[1]->ivalue == 1;
    if (by_one && e->bop == BinaryOp::FloorDiv)
      return of(e->operands[0]);
    if (by_one && e->bop == BinaryOp::FloorMod)
      return {};
    if (e->kind == LExprKind::Binary && e->bop == BinaryOp::FloorMod) { // x mod d = x - d * (x div d)
      const LExprPtr &x = e->operands[0], &d = e->operands[1];
      Poly quotient{{{atom(binary(BinaryOp::FloorDiv, x, d))}, 1}};
      return sum(of(x), product(of(d), quotient), -1);
    }
    return Poly{{{atom(e)}, 1}};
  }
  static std::string atom(const LExprPtr &e) {
    if (e->kind == LExprKind::Var)
      return "v" + std::to_string(reinterpret_cast<uintptr_t>(e->var.get()));
    std::string k = std::to_string(int(e->kind)) + "." + std::to_string(int(e->bop)) + "." +
                    std::to_string(int(e->uop)) + "." + std::to_string(int(e->cop)) + "." +
                    std::to_string(int(e->dtype)) + "." + std::to_string(reinterpret_cast<uintptr_t>(e->buffer.get())) +
                    "." + std::to_string(e->fvalue) + "(";
    for (const LExprPtr &o : e->operands)
      k += str(of(o)) + ",";
    return k + ")";
  }
  static Poly sum(Poly a, const Poly &b, int64_t sign) {
    for (const auto &[m, c] : b)
      if ((a[m] += sign * c) == 0)
        a.erase(m);
    return a;
  }
  static Poly product(const Poly &a, const Poly &b) {
    Poly out;
    for (const auto &[ma, ca] : a)
      for (const auto &[mb, cb] : b) {
        Monomial m = ma;
        m.insert(m.end(), mb.begin(), mb.end());
        std::sort(m.begin(), m.end());
        if ((out[m] += ca * cb) == 0)
          out.erase(m);
      }
    return out;
  }
  static std::string str(const Poly &p) {
    std::string s = "[";
    for (const auto &[m, c] : p) {
      s += std::to_string(c);
      for (const std::string &a : m)
        s += "*" + a;
      s += "+";
    }
    return s + "]";
  }
};

/// The loop variables `e` reads.
void collect_vars(const LExprPtr &e, std::vector<const LVar *> &out) {
  if (e->kind == LExprKind::Var)
    out.push_back(e->var.get());
  for (const LExprPtr &o : e->operands)
    collect_vars(o, out);
}

/// accesses()'s walk.
class AccessWalk : public LoopVisitor {
public:
  Accesses out;
  using LoopVisitor::visit;

protected:
  void on_store(const StmtPtr &s) override {
    add(out.stored, stored_, s->buffer);
    LoopVisitor::on_store(s);
  }
  void on_load(const LExprPtr &e) override {
    add(out.loaded, loaded_, e->buffer);
    LoopVisitor::on_load(e);
  }

private:
  std::unordered_set<const Buffer *> stored_, loaded_;
  static void add(std::vector<BufferPtr> &to, std::unordered_set<const Buffer *> &seen, const BufferPtr &b) {
    if (seen.insert(b.get()).second)
      to.push_back(b);
  }
};

/// The writer's rule: each store into `buf` under loops whose variables its
/// index reads (each element written in one iteration), and each read of
/// `buf` at the index of a store (the same element, in the same iteration:
/// before the store it reads the old value, after it the new one). Under
/// `if (v == last)` loop v runs once (a blocked product's last K block
/// writes its results; the earlier iterations read only old values). Indices are compared as polynomials (IndexForm).
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
    extents_[s->var.get()] = s->extent;
    LoopVisitor::on_for(s);
    loops_.pop_back();
  }
  void on_if(const StmtPtr &s) override {
    const LExprPtr &c = s->value;
    auto loop = loops_.end();
    if (c->kind == LExprKind::Compare && c->cop == CompareOp::EQ && c->operands[0]->kind == LExprKind::Var &&
        c->operands[1]->kind == LExprKind::IntImm) {
      loop = std::find(loops_.begin(), loops_.end(), c->operands[0]->var.get());
      if (loop != loops_.end() && c->operands[1]->ivalue != extents_.at(*loop) - 1)
        loop = loops_.end(); // an earlier iteration: later ones would read the new value
    }
    if (loop == loops_.end()) {
      LoopVisitor::on_if(s);
      return;
    }
    visit(c);
    std::vector<const LVar *> outer = loops_;
    loops_.erase(loop);
    visit(s->body);
    loops_ = outer;
    visit(s->else_body);
  }
  void on_store(const StmtPtr &s) override {
    if (s->buffer.get() == &buf_ && !reads_) {
      std::vector<const LVar *> read;
      collect_vars(s->index, read);
      for (const LVar *v : loops_)
        if (std::find(read.begin(), read.end(), v) == read.end() && why.empty())
          why = "a store into " + buf_.name + " repeats under loop " + v->name + ", which its index does not read";
      stores_.push_back(IndexForm::key(s->index));
    }
    LoopVisitor::on_store(s);
  }
  void on_load(const LExprPtr &e) override {
    if (reads_ && e->buffer.get() == &buf_ && why.empty() &&
        std::find(stores_.begin(), stores_.end(), IndexForm::key(e->operands[0])) == stores_.end())
      why = "a read of " + buf_.name + " that is not of the element its store writes";
    LoopVisitor::on_load(e);
  }

private:
  const Buffer &buf_;
  std::vector<const LVar *> loops_;
  std::unordered_map<const LVar *, int64_t> extents_;
  std::vector<std::string> stores_; // the indices `buf` is stored at (IndexForm keys)
  bool reads_ = false;
};

/// overwrite_violation's walk: the loops around each store into `buf`, and
/// every access to `buf` and `over` with where it is.
class Overwrite : public LoopVisitor {
public:
  Overwrite(const Buffer &buf, const Buffer &over) : buf_(buf), over_(over) {}
  std::string why;
  using LoopVisitor::visit;

protected:
  void on_for(const StmtPtr &s) override {
    if (s->extent > 1)
      loops_.push_back(s->var.get());
    LoopVisitor::on_for(s);
    if (s->extent > 1)
      loops_.pop_back();
  }
  void on_store(const StmtPtr &s) override {
    if (s->buffer.get() == &over_)
      fail("the kernel writes " + over_.name);
    if (s->buffer.get() != &buf_) {
      LoopVisitor::on_store(s);
      return;
    }
    std::vector<const LVar *> read;
    collect_vars(s->index, read);
    for (const LVar *v : loops_)
      if (std::find(read.begin(), read.end(), v) == read.end())
        fail("a store into " + buf_.name + " repeats under loop " + v->name + ", which its index does not read");
    visit(s->index);
    std::string outer = at_;
    at_ = IndexForm::key(s->index);
    // Two stores at one element: the first would overwrite the element of
    // over that the second reads (a kernel's zero fill, then its scatter,
    // where loops of extent 1 leave every index 0).
    if (!stored_at_.insert(at_).second)
      fail("two stores into " + buf_.name + " at one element");
    bool before = over_here_;
    over_here_ = false;
    visit(s->value);
    if (!over_here_)
      blind_store_ = true;
    over_here_ = before;
    at_ = outer;
  }
  void on_load(const LExprPtr &e) override {
    if (e->buffer.get() == &buf_)
      fail("the kernel reads " + buf_.name);
    if (e->buffer.get() == &over_) {
      over_read_ = over_here_ = true;
      if (at_.empty() || IndexForm::key(e->operands[0]) != at_)
        fail("a read of " + over_.name + " that is not of the element a store into " + buf_.name + " writes");
    }
    LoopVisitor::on_load(e);
  }

public:
  /// After the walk: a store into buf that does not read over, in a kernel
  /// that reads over, may write an element before its read (a fill, then
  /// the stores that read over).
  void finish() {
    if (blind_store_ && over_read_)
      fail("a store into " + buf_.name + " that does not read " + over_.name + " beside stores that do");
  }

private:
  std::set<std::string> stored_at_; // the index forms of the stores into buf
  bool over_here_ = false, over_read_ = false, blind_store_ = false;
  void fail(const std::string &what) {
    if (why.empty())
      why = what;
  }
  const Buffer &buf_, &over_;
  std::vector<const LVar *> loops_;
  std::string at_; // inside a store into buf: its index's form
};

} // namespace

Accesses accesses(const StmtPtr &body) {
  AccessWalk w;
  w.visit(body);
  return std::move(w.out);
}

std::string overwrite_violation(const Kernel &k, const Buffer &buf, const Buffer &over) {
  if (&buf == &over || buf.dtype != over.dtype || buf.numel() != over.numel())
    return buf.name + " and " + over.name + " differ in type or size";
  Overwrite o(buf, over);
  o.visit(k.body);
  o.finish();
  return o.why;
}

std::string in_place_violation(const LoweredFunction &fn, const Buffer &buf) {
  size_t writer = fn.kernels.size();
  for (size_t k = 0; k < fn.kernels.size(); ++k) {
    const Kernel &kernel = fn.kernels[k];
    if (std::none_of(kernel.buffers.begin(), kernel.buffers.end(), [&](const BufferPtr &b) { return b.get() == &buf; }))
      continue;
    std::vector<BufferPtr> stored = accesses(kernel.body).stored;
    if (std::none_of(stored.begin(), stored.end(), [&](const BufferPtr &b) { return b.get() == &buf; }))
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
