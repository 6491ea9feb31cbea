//===- CommonSubexpr.cpp - one binding per distinct computation -----------===//
//
// Values are immutable and operators pure, so two bindings that apply the
// same operator with the same attributes to the same operands hold the same
// value: the later one is replaced by the earlier. Models and expansions
// repeat themselves (a training-mode batch norm takes mean(x), and its
// variance computes mean(x) again; a gradient rule builds g·t twice), and
// each repeat would be a kernel and a buffer.
//
// A `fn` body (a scan's update) is its own scope: its bindings may be
// replaced by equal ones outside it, which it can read, but nothing outside
// it is ever replaced by one of its bindings, which do not exist there.
//
// Operands compare by identity (a Var is itself) or, for constants, by dtype
// and bits; attributes by kind and exact value. Runs in the `grad` stage,
// after the adjoint is built and before rematerialization, whose
// recomputations are duplicates on purpose. A function with checkpoint
// markers is left alone: merging a segment's value with an equal one
// outside would change what the segment keeps.
//
// A field of a tuple built in the same function is that field's value:
// `%t = (%a, %z, %z); %u = %t.0` makes %u %a. Gradient rules of tuple-result
// operators build such tuples (batch norm's adjoint pairs the data gradient
// with zeros for the unused statistics); without this the field would be a
// value of its own that fusion cannot see through, and a buffer.
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/Passes.h"

#include <cstring>
#include <unordered_map>

namespace gradc {
namespace {

void append_bits(std::string &key, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  key += std::to_string(bits);
}

void append_attr(std::string &key, const AttrValue &v) {
  key += char('0' + int(v.kind));
  switch (v.kind) {
  case AttrValue::None:
    break;
  case AttrValue::Int:
    key += std::to_string(v.i);
    break;
  case AttrValue::Float:
    append_bits(key, v.f);
    break;
  case AttrValue::String:
    key += std::to_string(v.s.size()) + ":" + v.s;
    break;
  case AttrValue::Bool:
    key += v.b ? "T" : "F";
    break;
  case AttrValue::List:
    key += "[";
    for (int64_t i : v.int_list)
      key += std::to_string(i) + ",";
    for (const AttrValue &e : v.list)
      append_attr(key, e), key += ",";
    key += "]";
    break;
  }
}

void append_operand(std::string &key, const ExprPtr &a) {
  if (a->kind == ExprKind::Constant) {
    key += "c" + std::to_string(int(a->dtype)) + ":";
    append_bits(key, a->fvalue);
    key += ":" + std::to_string(a->ivalue);
  } else {
    key += "v" + std::to_string(reinterpret_cast<uintptr_t>(a.get()));
  }
  key += ";";
}

/// What the value computes, or "" for a value never merged.
std::string value_key(const Expr &v) {
  std::string key;
  switch (v.kind) {
  case ExprKind::Call:
    key = "call " + v.op->name + "(";
    break;
  case ExprKind::Tuple:
    key = "tuple(";
    break;
  case ExprKind::TupleGet:
    key = "get " + std::to_string(v.index) + "(";
    break;
  default:
    return "";
  }
  for (const ExprPtr &a : v.args)
    append_operand(key, a);
  key += ")";
  for (const auto &[name, value] : v.attrs.items) {
    key += name + "=";
    append_attr(key, value);
    key += ";";
  }
  return key;
}

class Merger : public ExprMutator {
protected:
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value); // operands already merged
    if (value->kind == ExprKind::Tuple)
      tuples_[b.var.get()] = value;
    if (value->kind == ExprKind::TupleGet) {
      auto it = tuples_.find(value->args[0].get());
      if (it != tuples_.end() && it->second->args[value->index]->type == b.var->type) {
        remap(b.var, it->second->args[value->index]);
        return;
      }
    }
    std::string key = value_key(*value);
    if (!key.empty()) {
      auto [it, fresh] = seen_.emplace(key, b.var);
      if (!fresh && it->second->type == b.var->type) {
        remap(b.var, it->second);
        return;
      }
    }
    out.push_back({b.var, value, b.is_let});
  }

  ExprPtr on_func(const ExprPtr &e) override {
    auto seen = seen_;
    auto tuples = tuples_;
    ExprPtr out = ExprMutator::on_func(e);
    seen_ = std::move(seen);
    tuples_ = std::move(tuples);
    return out;
  }

private:
  std::unordered_map<std::string, ExprPtr> seen_;
  std::unordered_map<const Expr *, ExprPtr> tuples_; // var -> the tuple it is bound to
};

bool leave_alone(const Function &fn) {
  for (const Binding &b : fn.body.bindings) {
    const Expr &v = *b.value;
    if (v.kind == ExprKind::Func || (v.kind == ExprKind::Call && v.op->checkpoint != CheckpointMarker::None))
      return true;
  }
  return false;
}

} // namespace

FunctionPtr eliminate_common_subexpressions(const Function &fn) {
  if (leave_alone(fn))
    return std::make_shared<Function>(fn);
  return Merger().mutate_function(fn);
}

} // namespace gradc
