//===- Lower.cpp - fused tensor IR to loop IR -----------------------------===//
//
// One kernel per top-level binding. Injective roots become one loop nest over
// the output whose element expression is built by calling each fused
// operator's ElementFn; other operators emit their own nest through KernelFn,
// writing one buffer per leaf of their result (a tuple-result operator writes
// several from one kernel).
// Tuples and projections only alias buffers (a constant among their fields is
// materialized by a one-element fill kernel).
//
//===----------------------------------------------------------------------===//
#include "gradc/lower/Lower.h"
#include "gradc/ir/Functor.h"
#include "gradc/loops/Functor.h"
#include "gradc/loops/InPlace.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"
#include "gradc/support/Log.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <functional>
#include <unordered_map>
#include <unordered_set>

namespace gradc {

namespace {

/// Kernels [first, last) access `to` (at `offset` + the index, where given)
/// wherever they accessed `from`.
void redirect(std::vector<Kernel> &kernels, size_t first, size_t last, const BufferPtr &from, const BufferPtr &to,
              const LExprPtr &offset = nullptr) {
  class Redirect : public LoopMutator {
  public:
    const BufferPtr &from, &to;
    const LExprPtr &offset;
    Redirect(const BufferPtr &f, const BufferPtr &t, const LExprPtr &o) : from(f), to(t), offset(o) {}

  protected:
    LExprPtr at(const LExprPtr &index) { return offset ? binary(BinaryOp::Add, offset, index) : index; }
    LExprPtr on_load(const LExprPtr &e) override {
      return e->buffer == from ? load(to, at(mutate(e->operands[0]))) : LoopMutator::on_load(e);
    }
    StmtPtr on_store(const StmtPtr &s) override {
      return s->buffer == from ? store(to, at(mutate(s->index)), mutate(s->value)) : LoopMutator::on_store(s);
    }
  } redirect(from, to, offset);
  for (size_t k = first; k < last; ++k) {
    kernels[k].body = redirect.mutate(kernels[k].body);
    kernels[k].buffers = touched_buffers(kernels[k].body);
  }
}

class FunctionLowering : ExprFunctor<LExprPtr(const Index &)> {
  friend class TimeLoopLowering;

public:
  /// An operator that lowers to a time loop (scan): see TimeLoopLowering.
  void lower_time_loop(const Expr &call, const std::vector<BufferPtr> &outputs);

  FunctionLowering(const Function &fn, const LowerOptions &opts) : fn_(fn), opts_(opts) {}

  LoweredFunction run() {
    out_.name = fn_.name;
    in_place_values_ = in_place_values();
    for (size_t i = 0; i < fn_.params.size(); ++i) {
      const ExprPtr &p = fn_.params[i];
      GRADC_CHECK(p->type.is_tensor(), "lowering", "tuple parameters are not supported");
      auto buf = make_buffer(p->name, p->type, BufferScope::Input);
      buf->io_index = int(i);
      out_.inputs.push_back(buf);
      leaves_[p.get()] = {buf};
    }
    for (size_t i = 0; i < fn_.body.bindings.size(); ++i) {
      const Binding &b = fn_.body.bindings[i];
      origin_ = {int(i), b.var->name};
      binding(b);
      out_.binding_leaves.push_back(leaves_.at(b.var.get()));
    }
    origin_ = {};
    outputs();
    for (const BufferPtr &buf : produced_)
      if (buf->scope == BufferScope::Arena)
        out_.arena.push_back(buf);
    return std::move(out_);
  }

private:
  const Function &fn_;
  const LowerOptions &opts_;
  LoweredFunction out_;
  std::unordered_set<const Expr *> in_place_values_; // see in_place_values()

  /// The bindings (vars) whose value, or a leaf of it, the function returns
  /// written into a parameter (FunctionAttrs::inplace), through tuples and
  /// their fields. Their kernels keep partial sums out of the result
  /// (KernelCtx::partials_in_output); where that was not needed, outputs()
  /// still checks the rule and copies.
  std::unordered_set<const Expr *> in_place_values() const {
    std::unordered_set<const Expr *> out;
    const std::vector<int64_t> &inplace = fn_.attrs.inplace;
    if (inplace.empty())
      return out;
    std::unordered_map<const Expr *, const Expr *> bound;
    for (const Binding &b : fn_.body.bindings)
      bound[b.var.get()] = b.value.get();
    size_t leaf = 0;
    std::function<void(const Expr &)> walk = [&](const Expr &e) {
      auto it = bound.find(&e);
      const Expr *tuple = e.kind == ExprKind::Tuple                                  ? &e
                          : it != bound.end() && it->second->kind == ExprKind::Tuple ? it->second
                                                                                     : nullptr;
      if (tuple) {
        for (const ExprPtr &f : tuple->args)
          walk(*f);
        return;
      }
      bool written = false;
      for (size_t n = count_leaves(e.type); n > 0; --n, ++leaf)
        written |= leaf < inplace.size() && inplace[leaf] >= 0;
      for (const Expr *var = &e; written;) { // the var, and through tuple gets the call's
        auto b = bound.find(var);
        if (b == bound.end())
          break;
        out.insert(var);
        if (b->second->kind != ExprKind::TupleGet)
          break;
        var = b->second->args[0].get();
      }
    };
    walk(*fn_.body.result);
    return out;
  }
  std::unordered_map<const Expr *, std::vector<BufferPtr>> leaves_; // var -> buffers (tuples: several)
  // A leaf that is a view: a step of a time loop's stacked buffer (a scan
  // body's state or sequence step, read in place), at this element offset
  // (null: the whole buffer). Absent: no leaf of the var is a view.
  std::unordered_map<const Expr *, std::vector<LExprPtr>> offsets_;

  /// Leaf `leaf` (of type shape `shape`) of Var `var` at element `idx`.
  LExprPtr leaf_load(const Expr *var, size_t leaf, const Shape &shape, const Index &idx) {
    const BufferPtr &buf = leaves_.at(var).at(leaf);
    auto it = offsets_.find(var);
    if (it == offsets_.end() || !it->second.at(leaf))
      return load(buf, flat_index(buf->shape, idx));
    return load(buf, binary(BinaryOp::Add, it->second[leaf], flat_index(shape, idx)));
  }
  /// The views of `e`'s leaves (nulls where a leaf is a whole buffer).
  std::vector<LExprPtr> leaf_offsets(const ExprPtr &e) {
    auto it = offsets_.find(e.get());
    return it == offsets_.end() ? std::vector<LExprPtr>(count_leaves(e->type)) : it->second;
  }
  std::vector<BufferPtr> produced_;                                 // every buffer a kernel writes
  std::unordered_set<std::string> names_;
  std::pair<const Expr *, LExprPtr> anchor_; // the anchor of the epilogue being built, and its value
  std::unordered_map<std::string, int> next_suffix_;
  Origin origin_; // the top-level binding being lowered: what its kernels and buffers come from

  BufferPtr make_buffer(const std::string &hint, const Type &t, BufferScope scope) {
    // %0 names a buffer t0: a bare number reads like a constant in the dump
    std::string base = hint.empty() || isdigit(static_cast<unsigned char>(hint[0])) ? "t" + hint : hint;
    std::string name = base;
    if (names_.count(name)) { // the first free base_k, resuming where the last search stopped
      int &k = next_suffix_[base];
      k = std::max(k, 1);
      while (names_.count(base + "_" + std::to_string(k)))
        ++k;
      name = base + "_" + std::to_string(k++);
    }
    names_.insert(name);
    auto buf = std::make_shared<Buffer>(Buffer{name, t.dtype, t.shape, scope});
    buf->origin = origin_;
    return buf;
  }

  /// The value of `e` at element `idx` (e is an atom or a fused injective call).
  LExprPtr element(const ExprPtr &e, const Index &idx) { return dispatch(e, idx); }
  LExprPtr on_constant(const ExprPtr &e, const Index &) override {
    return is_float(e->dtype) ? constant_of(e->fvalue, e->dtype) : int_imm(e->ivalue, e->dtype);
  }
  LExprPtr on_var(const ExprPtr &e, const Index &idx) override { return leaf_load(e.get(), 0, e->type.shape, idx); }
  LExprPtr on_call(const ExprPtr &e, const Index &idx) override {
    if (e.get() == anchor_.first) // inside the epilogue of the anchor's kernel
      return anchor_.second;
    GRADC_CHECK(e->op->injective(*e), "lowering", "fused non-injective operator " + e->op->name);
    ElementCtx ctx{*e, idx, [this, e](size_t leaf, const Index &i) { return input(*e, leaf, i); }};
    return e->op->element(ctx);
  }

  BufferPtr status_buffer() {
    if (!out_.status) {
      out_.status = make_buffer("status", Type::tensor({kStatusWords}, DType::Int64), BufferScope::Arena);
      // every kernel's; its origin is the binding that asked first (where
      // it lies in the arena's order)
      produced_.push_back(out_.status);
    }
    return out_.status;
  }

  void add_kernel(const std::string &name, StmtPtr body) {
    Kernel k;
    k.name = name;
    k.body = std::move(body);
    k.buffers = touched_buffers(k.body);
    k.origin = origin_;
    out_.kernels.push_back(std::move(k));
  }

  void binding(const Binding &b) {
    const Expr &v = *b.value;
    switch (v.kind) {
    case ExprKind::Tuple: { // (views stay views)
      std::vector<BufferPtr> leaves;
      std::vector<LExprPtr> offsets;
      for (const ExprPtr &f : v.args) {
        std::vector<BufferPtr> l = f->kind == ExprKind::Var ? leaves_.at(f.get()) : atom_leaves(f);
        std::vector<LExprPtr> o = f->kind == ExprKind::Var ? leaf_offsets(f) : std::vector<LExprPtr>(l.size());
        leaves.insert(leaves.end(), l.begin(), l.end());
        offsets.insert(offsets.end(), o.begin(), o.end());
      }
      leaves_[b.var.get()] = leaves;
      if (std::any_of(offsets.begin(), offsets.end(), [](const LExprPtr &o) { return o != nullptr; }))
        offsets_[b.var.get()] = offsets;
      return;
    }
    case ExprKind::TupleGet: {
      const auto &all = leaves_.at(v.args[0].get());
      size_t start = 0;
      for (int i = 0; i < v.index; ++i)
        start += count_leaves(v.args[0]->type.fields[i]);
      size_t n = count_leaves(b.var->type);
      leaves_[b.var.get()] = std::vector<BufferPtr>(all.begin() + start, all.begin() + start + n);
      if (auto it = offsets_.find(v.args[0].get()); it != offsets_.end())
        offsets_[b.var.get()] = std::vector<LExprPtr>(it->second.begin() + start, it->second.begin() + start + n);
      return;
    }
    case ExprKind::Call:
      break;
    default:
      internal_error("lowering", "unexpected binding kind");
    }
    // One buffer per leaf of the result: a tuple-result operator (batch_norm's
    // output and statistics) writes them all from one kernel.
    std::vector<BufferPtr> bufs;
    if (b.var->type.is_tensor()) {
      bufs.push_back(make_buffer(b.var->name, b.var->type, BufferScope::Arena));
    } else {
      GRADC_CHECK(!v.op->injective(v), "lowering", "injective operator " + v.op->name + " with a tuple result");
      std::vector<Type> leaves = leaf_types(b.var->type);
      for (size_t i = 0; i < leaves.size(); ++i)
        bufs.push_back(make_buffer(b.var->name + "_" + std::to_string(i), leaves[i], BufferScope::Arena));
    }
    leaves_[b.var.get()] = bufs;
    produced_.insert(produced_.end(), bufs.begin(), bufs.end());
    if (v.op->lower_loop)
      return lower_time_loop(v, bufs);
    const BufferPtr &buf = bufs[0];
    std::string kname = buf->name + "_" + kernel_suffix(v);
    const Expr *anchor = v.op->injective(v) || v.op->pointwise ? find_anchor(v) : nullptr;
    if (anchor)
      kname = buf->name + "_" + kernel_suffix(*anchor) + "_" + kernel_suffix(v);
    if (v.op->injective(v) && !anchor) {
      add_kernel(kname, loop_nest(buf->shape, [&](const Index &idx) {
                   return store(buf, flat_index(buf->shape, idx), element(b.value, idx));
                 }));
      return;
    }
    // A kernel of its own, or the anchor's kernel with the injective calls
    // around it as its epilogue (transform/Fuse.h).
    const Expr &call = anchor ? *anchor : v;
    KernelFn kernel = call.op->kernel_for(opts_.target.kind);
    GRADC_CHECK(kernel, "lowering", "operator " + call.op->name + " has no lowering");
    KernelCtx ctx{call,
                  bufs,
                  [this, &call](size_t leaf, const Index &i) { return input(call, leaf, i); },
                  opts_.target,
                  [this] { return status_buffer(); },
                  [this, &kname](const std::string &name, DType dtype, int64_t size) {
                    BufferPtr s = make_buffer(kname + "_" + name, Type::tensor({size}, dtype), BufferScope::Arena);
                    produced_.push_back(s);
                    return s;
                  },
                  {}};
    if (anchor && v.op->injective(v))
      ctx.epilogue = [this, &b, anchor](const Index &idx, const LExprPtr &value) {
        anchor_ = {anchor, value};
        LExprPtr result = element(b.value, idx);
        anchor_ = {};
        return result;
      };
    if (anchor && v.op->pointwise) // the consumer's stores of every result, reading the anchor's value
      ctx.epilogue_stores = [this, &v, &bufs, &ctx, anchor](const Index &idx, const LExprPtr &at,
                                                            const LExprPtr &value) {
        KernelCtx consumer{v, bufs, [this, &v](size_t leaf, const Index &i) { return input(v, leaf, i); },
                           ctx.target, ctx.status_buffer, ctx.scratch, {}};
        anchor_ = {anchor, value};
        StmtPtr stores = v.op->pointwise(consumer, idx, at);
        anchor_ = {};
        return stores;
      };
    // Partial sums stay out of a result the epilogue stores several of, or
    // that is written into a parameter: the old values are read at the end.
    ctx.partials_in_output = !ctx.epilogue_stores && !in_place_values_.count(b.var.get());
    StmtPtr body = kernel(ctx);
    if (ctx.separate_parts && body->kind == StmtKind::Seq && body->seq.size() > 1) {
      for (size_t i = 0; i < body->seq.size(); ++i)
        add_kernel(kname + "_" + std::to_string(i), body->seq[i]);
      return;
    }
    add_kernel(kname, std::move(body));
  }

  /// Input `leaf` of `call` at element `idx` (op/Kernel.h: InputFn): its
  /// arguments in order, a tuple-typed one contributing each of its leaves.
  LExprPtr input(const Expr &call, size_t leaf, const Index &idx) {
    for (const ExprPtr &a : call.args) {
      size_t n = count_leaves(a->type);
      if (leaf >= n) {
        leaf -= n;
        continue;
      }
      if (a->type.is_tensor())
        return element(a, idx);
      return tuple_leaf(a, leaf, idx);
    }
    internal_error("lowering", call.op->name + " read input " + std::to_string(leaf) + " past its arguments");
  }
  /// Leaf `leaf` of tuple-typed atom `t` (a Var, or a Tuple of atoms).
  LExprPtr tuple_leaf(const ExprPtr &t, size_t leaf, const Index &idx) {
    if (t->kind == ExprKind::Var)
      return leaf_load(t.get(), leaf, leaf_types(t->type).at(leaf).shape, idx);
    GRADC_CHECK(t->kind == ExprKind::Tuple, "lowering", "a tuple argument that is neither a variable nor a tuple");
    for (const ExprPtr &f : t->args) {
      size_t n = count_leaves(f->type);
      if (leaf < n)
        return f->type.is_tensor() ? element(f, idx) : tuple_leaf(f, leaf, idx);
      leaf -= n;
    }
    internal_error("lowering", "a tuple leaf past the tuple's fields");
  }

  /// The non-injective call fused under injective `v`, if any (one at most).
  static const Expr *find_anchor(const Expr &v) {
    for (const ExprPtr &a : v.args) {
      if (a->kind != ExprKind::Call)
        continue;
      if (!a->op->injective(*a))
        return a.get();
      if (const Expr *found = find_anchor(*a))
        return found;
    }
    return nullptr;
  }

  static std::string kernel_suffix(const Expr &v) {
    std::string s = v.op->name;
    for (char &c : s)
      if (c == '.')
        c = '_';
    return s;
  }

  static size_t count_leaves(const Type &t) { return leaf_types(t).size(); }

  /// The buffers of `e`'s leaves, each a whole buffer: a view (a body that
  /// returns its parameter as it is) is copied out.
  std::vector<BufferPtr> atom_leaves(const ExprPtr &e) {
    if (e->kind == ExprKind::Var) {
      std::vector<BufferPtr> leaves = leaves_.at(e.get());
      std::vector<LExprPtr> offsets = leaf_offsets(e);
      std::vector<Type> types = leaf_types(e->type);
      for (size_t l = 0; l < leaves.size(); ++l)
        if (offsets[l]) {
          BufferPtr copy = make_buffer(e->name, types[l], BufferScope::Arena);
          produced_.push_back(copy);
          add_kernel(copy->name + "_copy", loop_nest(types[l].shape, [&](const Index &idx) {
                       return store(copy, flat_index(copy->shape, idx), leaf_load(e.get(), l, types[l].shape, idx));
                     }));
          leaves[l] = copy;
        }
      return leaves;
    }
    // A constant used as a tuple field or a result: materialize it.
    BufferPtr buf = make_buffer("const", e->type, BufferScope::Arena);
    produced_.push_back(buf);
    add_kernel(buf->name + "_fill", store(buf, int_imm(0), element(e, {})));
    return {buf};
  }

  /// Results. A leaf of the function's own becomes an Output buffer: a
  /// kernel-made buffer retargeted where it is, a parameter or a repeated
  /// leaf copied into one. A leaf written into a parameter
  /// (FunctionAttrs::inplace) is written there by the kernels that make it
  /// where InPlace.h's rule holds, and copied there last otherwise, after
  /// every read of the old values (a leaf that is itself an updated
  /// parameter is first copied aside). The memory model (transform/
  /// MemoryModel.cpp) mirrors this.
  void outputs() {
    std::vector<BufferPtr> leaves = atom_leaves(fn_.body.result);
    const std::vector<int64_t> &inplace = fn_.attrs.inplace;
    auto target = [&](size_t i) -> BufferPtr {
      return inplace.empty() || inplace[i] < 0 ? nullptr : out_.inputs.at(size_t(inplace[i]));
    };
    std::unordered_set<const Buffer *> taken;
    out_.results.assign(leaves.size(), nullptr);
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (target(i))
        continue;
      BufferPtr leaf = leaves[i], out = leaf;
      if (leaf->scope != BufferScope::Arena || taken.count(leaf.get()))
        out = copy_of(leaf, make_buffer("out", Type::tensor(leaf->shape, leaf->dtype), BufferScope::Output));
      out->scope = BufferScope::Output;
      out->io_index = int(out_.outputs.size());
      taken.insert(out.get());
      out_.outputs.push_back(out);
      out_.results[i] = out;
    }
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i))
        p->scope = BufferScope::InOut;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i); p && leaves[i] != p && leaves[i]->scope == BufferScope::InOut)
        leaves[i] = copy_of(leaves[i], arena_buffer("old_" + leaves[i]->name, leaves[i]));
    // A leaf that is several results is copied into each: written in place, it would be gone.
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i); p && std::count(leaves.begin(), leaves.end(), leaves[i]) > 1)
        taken.insert(leaves[i].get());
    for (size_t i = 0; i < leaves.size(); ++i) {
      BufferPtr p = target(i);
      if (!p)
        continue;
      out_.results[i] = p;
      if (leaves[i] != p && !write_in_place(leaves[i], p, taken))
        copy_of(leaves[i], p);
      taken.insert(leaves[i].get());
    }
  }

  BufferPtr arena_buffer(const std::string &name, const BufferPtr &like) {
    BufferPtr buf = make_buffer(name, Type::tensor(like->shape, like->dtype), BufferScope::Arena);
    produced_.push_back(buf);
    return buf;
  }
  /// A kernel copying `from` into `to`; returns `to`.
  BufferPtr copy_of(const BufferPtr &from, const BufferPtr &to) {
    add_kernel(to->name + "_copy", loop_nest(from->shape, [&](const Index &idx) {
                 return store(to, flat_index(to->shape, idx), load(from, flat_index(from->shape, idx)));
               }));
    return to;
  }

  /// Makes the kernels that compute `leaf` write it into parameter `p`
  /// instead, where they may: `leaf` is an arena buffer no other result
  /// takes, made by the kernels of one binding that also read `p`; no later
  /// kernel reads `p`'s old value; and with the binding's writes redirected
  /// InPlace.h's rule holds for `p`. The later readers of `leaf` then read
  /// `p`, which holds the new value (an optimizer's state, read again by the
  /// parameter's own update).
  bool write_in_place(const BufferPtr &leaf, const BufferPtr &p, const std::unordered_set<const Buffer *> &taken) {
    auto made = std::find(produced_.begin(), produced_.end(), leaf);
    if (leaf->scope != BufferScope::Arena || made == produced_.end() || taken.count(leaf.get()) || !leaf->origin.set())
      return false;
    std::vector<Kernel> &kernels = out_.kernels;
    auto touches = [](const Kernel &k, const BufferPtr &b) {
      return std::find(k.buffers.begin(), k.buffers.end(), b) != k.buffers.end();
    };
    size_t first = kernels.size(), last = 0;
    bool reads_p = false;
    for (size_t k = 0; k < kernels.size(); ++k)
      if (kernels[k].origin.binding == leaf->origin.binding) {
        first = std::min(first, k);
        last = k + 1;
        reads_p |= touches(kernels[k], p);
      }
    if (!reads_p)
      return false;
    for (size_t k = 0; k < kernels.size(); ++k) {
      bool mine = first <= k && k < last && kernels[k].origin.binding == leaf->origin.binding;
      if ((k < last && !mine && touches(kernels[k], leaf)) || (k >= last && touches(kernels[k], p)))
        return false;
    }
    std::vector<Kernel> before(kernels.begin() + long(first), kernels.end());
    redirect(kernels, first, kernels.size(), leaf, p);
    if (std::string why = in_place_violation(out_, *p); !why.empty()) {
      log(LogLevel::Debug, "lower", "@" + fn_.name + ": " + leaf->name + " is copied into " + p->name + ": " + why);
      std::copy(before.begin(), before.end(), kernels.begin() + long(first));
      return false;
    }
    produced_.erase(made);
    return true;
  }
};

/// What a time-loop operator (scan) builds with: buffers, kernels and its
/// body's kernels, all in the function being lowered.
class TimeLoopLowering : public LoopLowerCtx {
public:
  TimeLoopLowering(FunctionLowering &fl, const Expr &call, std::vector<BufferPtr> outputs)
      : LoopLowerCtx(call, std::move(outputs)), fl_(fl), prefix_(this->outputs.at(0)->name) {}

  std::vector<BufferPtr> input(size_t arg) override { return fl_.atom_leaves(call.args.at(arg)); }
  BufferPtr buffer(const std::string &name, const Type &type) override {
    BufferPtr buf = fl_.make_buffer(prefix_ + "_" + name, type, BufferScope::Arena);
    fl_.produced_.push_back(buf);
    return buf;
  }
  void kernel(const std::string &name, StmtPtr body) override {
    fl_.add_kernel(prefix_ + "_" + name, std::move(body));
  }
  std::vector<BufferPtr> body(const Function &fn, const std::vector<std::vector<BufferPtr>> &params,
                              const std::vector<std::vector<LExprPtr>> &offsets) override {
    GRADC_CHECK(params.size() == fn.params.size() && (offsets.empty() || offsets.size() == params.size()), "lowering",
                "a body lowered with the wrong number of parameters");
    for (size_t i = 0; i < params.size(); ++i) {
      fl_.leaves_[fn.params[i].get()] = params[i];
      if (!offsets.empty() && std::any_of(offsets[i].begin(), offsets[i].end(), [](const LExprPtr &o) { return o; }))
        fl_.offsets_[fn.params[i].get()] = offsets[i];
      else
        fl_.offsets_.erase(fn.params[i].get());
    }
    for (const Binding &b : fn.body.bindings)
      fl_.binding(b);
    return fl_.atom_leaves(fn.body.result);
  }
  size_t next_kernel() const override { return fl_.out_.kernels.size(); }
  void time_loop(size_t first, int64_t extent) override {
    GRADC_CHECK(first < next_kernel() && extent >= 1, "lowering", "an empty time loop");
    fl_.out_.time_loops.push_back({first, next_kernel(), extent, {}});
  }
  bool write_into(size_t first, const BufferPtr &from, const BufferPtr &to, const LExprPtr &offset) override {
    std::vector<Kernel> &kernels = fl_.out_.kernels;
    auto made = std::find(fl_.produced_.begin(), fl_.produced_.end(), from);
    if (from == to || from->scope != BufferScope::Arena || made == fl_.produced_.end() || from->dtype != to->dtype)
      return false;
    for (size_t k = 0; k < first; ++k)
      if (std::find(kernels[k].buffers.begin(), kernels[k].buffers.end(), from) != kernels[k].buffers.end())
        return false;
    redirect(kernels, first, kernels.size(), from, to, offset);
    fl_.produced_.erase(made);
    return true;
  }
  void time_loop(size_t first, std::vector<int64_t> trips) override {
    GRADC_CHECK(first < next_kernel() && !trips.empty(), "lowering", "an empty time loop");
    int64_t most = *std::max_element(trips.begin(), trips.end());
    fl_.out_.time_loops.push_back({first, next_kernel(), most, std::move(trips)});
  }

private:
  FunctionLowering &fl_;
  std::string prefix_;
};

void FunctionLowering::lower_time_loop(const Expr &call, const std::vector<BufferPtr> &outputs) {
  TimeLoopLowering ctx(*this, call, outputs);
  call.op->lower_loop(ctx);
}

} // namespace

LoweredModule lower_module(const Module &module, const LowerOptions &opts) {
  LoweredModule out;
  for (const FunctionPtr &fn : module.functions)
    out.functions.push_back(FunctionLowering(*fn, opts).run());
  return out;
}

} // namespace gradc
