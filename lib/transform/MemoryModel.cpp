//===- MemoryModel.cpp - a fused function's planned workspace -------------===//
//
// A skeleton of the lowered function: buffers with their types and scopes,
// kernels with only the buffers they touch, time loops; what lowering
// (lower/Lower.cpp) would build, less the loop nests. plan_arena places it.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/MemoryModel.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Kernel.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

class Skeleton {
public:
  Skeleton(const Function &fn, const FootprintFn &footprint) : fn_(fn), footprint_(footprint) {}

  int64_t plan() {
    for (const ExprPtr &p : fn_.params)
      leaves_[p.get()] = {buffer(p->type, BufferScope::Input)};
    for (size_t i = 0; i < fn_.body.bindings.size(); ++i)
      binding(i);
    outputs();
    for (const BufferPtr &b : produced_)
      if (b->scope == BufferScope::Arena)
        out_.arena.push_back(b);
    return plan_arena(out_);
  }

private:
  const Function &fn_;
  const FootprintFn &footprint_;
  LoweredFunction out_;
  std::unordered_map<const Expr *, std::vector<BufferPtr>> leaves_;
  std::vector<BufferPtr> produced_;

  BufferPtr buffer(DType dtype, const Shape &shape, BufferScope scope) {
    auto b = std::make_shared<Buffer>(Buffer{"b" + std::to_string(produced_.size()), dtype, shape, scope});
    if (scope != BufferScope::Input)
      produced_.push_back(b);
    return b;
  }
  BufferPtr buffer(const Type &t, BufferScope scope) { return buffer(t.dtype, t.shape, scope); }
  void kernel(std::vector<BufferPtr> buffers, const std::vector<std::pair<size_t, size_t>> &overwrites = {}) {
    Kernel k;
    for (const auto &[buf, over] : overwrites)
      k.overwrites.emplace_back(buffers.at(buf), buffers.at(over));
    k.buffers = std::move(buffers);
    out_.kernels.push_back(std::move(k));
  }
  /// A constant where a buffer is needed (a tuple field, the result): filled by a kernel of its own.
  BufferPtr materialize(const ExprPtr &e) {
    BufferPtr b = buffer(e->type, BufferScope::Arena);
    kernel({b});
    return b;
  }

  void binding(size_t i) {
    const Binding &b = fn_.body.bindings[i];
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Tuple) {
      std::vector<BufferPtr> leaves;
      for (const ExprPtr &f : v.args) {
        if (f->kind == ExprKind::Var)
          leaves.insert(leaves.end(), leaves_.at(f.get()).begin(), leaves_.at(f.get()).end());
        else
          leaves.push_back(materialize(f));
      }
      leaves_[b.var.get()] = std::move(leaves);
      return;
    }
    if (v.kind == ExprKind::TupleGet) {
      const std::vector<BufferPtr> &all = leaves_.at(v.args[0].get());
      size_t start = 0;
      for (int f = 0; f < v.index; ++f)
        start += leaf_types(v.args[0]->type.fields[size_t(f)]).size();
      size_t n = leaf_types(b.var->type).size();
      leaves_[b.var.get()] = std::vector<BufferPtr>(all.begin() + long(start), all.begin() + long(start + n));
      return;
    }
    GRADC_CHECK(v.kind == ExprKind::Call, "memory", "a binding that is neither a call nor a tuple");
    const Footprint &fp = footprint_(i);
    std::vector<BufferPtr> result;
    for (const Type &t : leaf_types(b.var->type))
      result.push_back(buffer(t, BufferScope::Arena));
    for (const BufferPtr &r : result)
      r->origin.binding = int(i); // as lowering's: placement asks whose a buffer is
    leaves_[b.var.get()] = result;
    std::vector<BufferPtr> own;
    for (const Footprint::Created &c : fp.created) {
      if (!c.status) {
        own.push_back(buffer(c.dtype, c.shape, BufferScope::Arena));
        own.back()->origin.binding = int(i);
      } else if (!out_.status)
        own.push_back(out_.status = buffer(DType::Int64, {kStatusWords}, BufferScope::Arena));
      else
        own.push_back(out_.status);
    }
    std::vector<BufferPtr> inputs;
    for (const ExprPtr &var : free_vars(b.value)) {
      const std::vector<BufferPtr> &l = leaves_.at(var.get());
      inputs.insert(inputs.end(), l.begin(), l.end());
    }
    size_t base = out_.kernels.size();
    for (size_t k = 0; k < fp.kernels.size(); ++k) {
      const std::vector<Footprint::Touch> &touches = fp.kernels[k];
      std::vector<BufferPtr> buffers;
      for (const Footprint::Touch &t : touches) {
        switch (t.role) {
        case Footprint::Role::Input:
          buffers.push_back(inputs.at(t.index));
          break;
        case Footprint::Role::Result:
          buffers.push_back(result.at(t.index));
          break;
        case Footprint::Role::Own:
          buffers.push_back(own.at(t.index));
          break;
        case Footprint::Role::Param:
          buffers.push_back(leaves_.at(fn_.params.at(t.index).get()).at(0));
          break;
        case Footprint::Role::Status:
          GRADC_CHECK(out_.status, "memory", "a footprint reads a status word nobody made");
          buffers.push_back(out_.status);
          break;
        }
      }
      kernel(std::move(buffers),
             k < fp.overwrites.size() ? fp.overwrites[k] : std::vector<std::pair<size_t, size_t>>{});
    }
    for (TimeLoop l : fp.time_loops) {
      l.first += base;
      l.last += base;
      out_.time_loops.push_back(std::move(l));
    }
  }

  /// As lowering: a leaf a kernel made becomes an output where it is; a
  /// parameter, or a leaf already taken, is copied into one. A leaf written
  /// into a parameter: an updated parameter copied aside first; then where
  /// lowering wrote it in place, no kernel touches its buffer (its
  /// binding's footprint has the parameter instead), else it is copied.
  void outputs() {
    const ExprPtr &r = fn_.body.result;
    std::vector<BufferPtr> leaves = r->kind == ExprKind::Var ? leaves_.at(r.get()) : std::vector{materialize(r)};
    const std::vector<int64_t> &inplace = fn_.attrs.inplace;
    auto target = [&](size_t i) -> BufferPtr {
      return inplace.empty() || inplace[i] < 0 ? nullptr : leaves_.at(fn_.params.at(size_t(inplace[i])).get())[0];
    };
    std::unordered_set<const Buffer *> taken;
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (target(i))
        continue;
      BufferPtr leaf = leaves[i], out = leaf;
      if (leaf->scope != BufferScope::Arena || taken.count(leaf.get())) {
        out = buffer(leaf->dtype, leaf->shape, BufferScope::Output);
        kernel({out, leaf});
      }
      out->scope = BufferScope::Output;
      taken.insert(out.get());
    }
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i))
        p->scope = BufferScope::InOut;
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i); p && leaves[i] != p && leaves[i]->scope == BufferScope::InOut) {
        BufferPtr old = buffer(leaves[i]->dtype, leaves[i]->shape, BufferScope::Arena);
        kernel({old, leaves[i]});
        leaves[i] = old;
      }
    for (size_t i = 0; i < leaves.size(); ++i)
      if (BufferPtr p = target(i); p && std::count(leaves.begin(), leaves.end(), leaves[i]) > 1)
        taken.insert(leaves[i].get());
    for (size_t i = 0; i < leaves.size(); ++i) {
      BufferPtr p = target(i), leaf = leaves[i];
      if (!p || leaf == p)
        continue;
      if (leaf->scope == BufferScope::Arena && !taken.count(leaf.get()) && !touched(leaf))
        leaf->scope = BufferScope::InOut; // written in place: not in the arena
      else
        kernel({p, leaf});
      taken.insert(leaf.get());
    }
  }

  bool touched(const BufferPtr &b) const {
    for (const Kernel &k : out_.kernels)
      if (std::find(k.buffers.begin(), k.buffers.end(), b) != k.buffers.end())
        return true;
    return false;
  }
};

} // namespace

int64_t estimate_workspace(const Function &fn, const FootprintFn &footprint) { return Skeleton(fn, footprint).plan(); }

} // namespace gradc
