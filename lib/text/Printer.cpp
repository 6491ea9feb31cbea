//===- Printer.cpp - tensor IR to Relay text ------------------------------===//
//
// Used by `gradc check` and every text dump (parse, typed, grad, remat,
// fused). The output parses back to the same module: calls are printed in
// prefix form with all attributes, literals with their dtype suffix.
//
//===----------------------------------------------------------------------===//
#include "gradc/text/Printer.h"
#include "gradc/text/Lexer.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Registry.h"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <unordered_map>

namespace gradc {
namespace {

/// A constant literal as written in the text format (`0.5f`, `3i64`, ...).
std::string format_constant(const Expr &c) {
  const DTypeInfo &info = dtype_info(c.dtype);
  if (c.dtype == DType::Bool)
    return c.ivalue ? "True" : "False";
  if (!info.is_float)
    return std::to_string(c.ivalue) + info.literal_suffix;
  return format_float(c.fvalue, c.dtype) + info.literal_suffix;
}

/// Whether `value` is what operator `op` gives attribute `name` by default.
bool is_default(const OpDef &op, const std::string &name, const AttrValue &value) {
  for (const AttrSpec &spec : op.attrs)
    if (spec.name == name)
      return !spec.required && spec.default_value.str() == value.str();
  return false;
}

class Printer : ExprFunctor<std::string(int)> {
public:
  explicit Printer(const PrintOptions &opts) : opts_(opts) {}

  /// A definition's own attributes (FunctionAttrs), after its parameters.
  void attributes(const FunctionAttrs &a, bool after_params) {
    std::vector<std::string> items;
    if (a.role != FunctionRole::Primal)
      items.push_back(std::string("role=\"") + role_name(a.role) + "\"");
    if (!a.primal.empty())
      items.push_back("primal=\"" + a.primal + "\"");
    if (!a.optimizer.empty())
      items.push_back("optimizer=\"" + a.optimizer + "\"");
    if (!a.inplace.empty()) {
      std::string list;
      for (int64_t i : a.inplace)
        list += (list.empty() ? "" : ", ") + std::to_string(i);
      items.push_back("inplace_indices=[" + list + "]");
    }
    for (size_t i = 0; i < items.size(); ++i)
      os_ << (i || after_params ? ", " : "") << items[i];
  }

  void function(const Function &fn, int indent) {
    std::string pad(indent, ' ');
    if (!fn.name.empty())
      os_ << "def @" << fn.name;
    else
      os_ << "fn ";
    os_ << "(";
    for (size_t i = 0; i < fn.params.size(); ++i) {
      const ExprPtr &p = fn.params[i];
      // A scan body's parameter may have no annotation: its inferred type, if any.
      const Type &t = p->annotation.is_unknown() ? p->type : p->annotation;
      os_ << (i ? ", " : "") << "%" << name(p) << (t.is_unknown() ? "" : ": " + t.str());
    }
    attributes(fn.attrs, !fn.params.empty());
    os_ << ")";
    Type ret = fn.ret_type;
    if (opts_.show_types && fn.body.result && !fn.body.result->type.is_unknown())
      ret = fn.body.result->type;
    if (!ret.is_unknown())
      os_ << " -> " << ret.str();
    os_ << " {\n";
    for (const Binding &b : fn.body.bindings) {
      os_ << pad << "  ";
      if (b.is_let) {
        os_ << "let %" << name(b.var);
        if (!b.var->annotation.is_unknown())
          os_ << ": " << b.var->annotation.str();
        os_ << " = ";
      } else {
        os_ << "%" << name(b.var) << " = ";
      }
      os_ << expr(b.value, indent + 2);
      if (opts_.show_types && !b.var->type.is_unknown())
        os_ << " /* ty=" << b.var->type.str() << " */";
      os_ << ";\n";
    }
    os_ << pad << "  " << expr(fn.body.result, indent + 2) << "\n" << pad << "}";
  }

  std::string str() const { return os_.str(); }

private:
  const PrintOptions &opts_;
  std::ostringstream os_;
  std::unordered_map<const Expr *, std::string> names_;
  std::set<std::string> taken_;
  std::unordered_map<std::string, int> next_suffix_;

  const std::string &name(const ExprPtr &var) {
    auto it = names_.find(var.get());
    if (it != names_.end())
      return it->second;
    std::string n = var->name.empty() ? "v" : var->name;
    if (taken_.count(n)) {
      // The first free n_k; names are never released, so the search resumes
      // where the last one for this base stopped (linear, not quadratic).
      int &k = next_suffix_[n];
      k = std::max(k, 1);
      while (taken_.count(n + "_" + std::to_string(k)))
        ++k;
      n += "_" + std::to_string(k++);
    }
    taken_.insert(n);
    return names_[var.get()] = n;
  }

  std::string expr(const ExprPtr &e, int indent) { return dispatch(e, indent); }

  std::string on_var(const ExprPtr &e, int) override { return "%" + name(e); }
  std::string on_constant(const ExprPtr &e, int) override { return format_constant(*e); }
  std::string on_call(const ExprPtr &e, int indent) override { return call(e->op->name, *e, indent); }
  std::string on_global_call(const ExprPtr &e, int indent) override { return call("@" + e->name, *e, indent); }
  std::string on_tuple(const ExprPtr &e, int indent) override {
    std::string s = "(";
    for (size_t i = 0; i < e->args.size(); ++i)
      s += (i ? ", " : "") + expr(e->args[i], indent);
    if (e->args.size() == 1)
      s += ",";
    return s + ")";
  }
  std::string on_tuple_get(const ExprPtr &e, int indent) override {
    // `%t.0.1` would read as `%t` `.` `0.1` (a float, as in TVM): parenthesize.
    std::string tuple = expr(e->args[0], indent);
    if (e->args[0]->kind == ExprKind::TupleGet)
      tuple = "(" + tuple + ")";
    return tuple + "." + std::to_string(e->index);
  }
  std::string on_func(const ExprPtr &e, int indent) override {
    Printer inner(opts_);
    inner.names_ = names_;
    inner.taken_ = taken_;
    inner.next_suffix_ = next_suffix_;
    inner.function(*e->func, indent);
    names_ = inner.names_;
    taken_ = inner.taken_;
    next_suffix_ = inner.next_suffix_;
    return inner.str();
  }

  std::string call(const std::string &callee, const Expr &e, int indent) {
    std::string s = callee + "(";
    bool first = true;
    for (const ExprPtr &a : e.args) {
      s += (first ? "" : ", ") + expr(a, indent);
      first = false;
    }
    for (const auto &[k, v] : e.attrs.items) {
      if (opts_.omit_default_attrs && e.op && is_default(*e.op, k, v))
        continue;
      s += (first ? "" : ", ") + k + "=" + v.str();
      first = false;
    }
    return s + ")";
  }
};

std::string print_function(const Function &fn, const PrintOptions &opts) {
  Printer p(opts);
  p.function(fn, 0);
  return p.str() + "\n";
}

} // namespace

std::string print_module(const Module &module, const PrintOptions &opts) {
  std::string out = relay_version_header() + "\n";
  for (const FunctionPtr &fn : module.functions)
    out += print_function(*fn, opts);
  return out;
}

} // namespace gradc
