//===- Expr.cpp - tensor IR constructors, attributes, cloning -------------===//
#include "gradc/ir/Expr.h"

#include <cmath>
#include <cstdio>
#include <unordered_map>

namespace gradc {

AttrValue AttrValue::of(int64_t v) {
  AttrValue a;
  a.kind = Int;
  a.i = v;
  return a;
}
AttrValue AttrValue::of(double v) {
  AttrValue a;
  a.kind = Float;
  a.f = v;
  return a;
}
AttrValue AttrValue::of(bool v) {
  AttrValue a;
  a.kind = Bool;
  a.b = v;
  return a;
}
AttrValue AttrValue::of(const std::string &v) {
  AttrValue a;
  a.kind = String;
  a.s = v;
  return a;
}
AttrValue AttrValue::ints(const std::vector<int64_t> &v) {
  AttrValue a;
  a.kind = List;
  for (int64_t x : v)
    a.list.push_back(of(x));
  return a;
}

bool AttrValue::is_int_list() const {
  if (kind != List)
    return false;
  for (const AttrValue &e : list)
    if (e.kind != Int)
      return false;
  return true;
}

std::vector<int64_t> AttrValue::as_ints() const {
  if (kind == Int)
    return {i};
  std::vector<int64_t> out;
  for (const AttrValue &e : list)
    out.push_back(e.i);
  return out;
}

double AttrValue::as_number() const { return kind == Int ? double(i) : f; }

bool AttrValue::operator==(const AttrValue &o) const {
  if (kind != o.kind)
    return false;
  switch (kind) {
  case None:
    return true;
  case Int:
    return i == o.i;
  case Float:
    return f == o.f;
  case String:
    return s == o.s;
  case Bool:
    return b == o.b;
  case List:
    return list == o.list;
  }
  return false;
}

std::string format_float(double v, DType dt) {
  char buf[64];
  if (std::isinf(v))
    return v > 0 ? "inff" : "-inff";
  snprintf(buf, sizeof buf, dt == DType::Float64 ? "%.17g" : "%.9g", v);
  return buf;
}

std::string AttrValue::str() const {
  switch (kind) {
  case None:
    return "None";
  case Int:
    return std::to_string(i);
  case Float:
    return format_float(f, DType::Float64) + "f";
  case String: {
    std::string out = "\"";
    for (char c : s)
      out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  }
  case Bool:
    return b ? "True" : "False";
  case List: {
    std::string out = "[";
    for (size_t k = 0; k < list.size(); ++k)
      out += (k ? ", " : "") + list[k].str();
    return out + "]";
  }
  }
  return "?";
}

const AttrValue *Attrs::find(const std::string &name) const {
  for (const auto &[k, v] : items)
    if (k == name)
      return &v;
  return nullptr;
}

const AttrValue &Attrs::get(const std::string &name) const {
  const AttrValue *v = find(name);
  if (!v)
    internal_error("attributes", "missing attribute '" + name + "'");
  return *v;
}

void Attrs::set(const std::string &name, AttrValue value) {
  for (auto &[k, v] : items)
    if (k == name) {
      v = std::move(value);
      return;
    }
  items.emplace_back(name, std::move(value));
}

FunctionPtr Module::find(const std::string &name) const {
  for (const FunctionPtr &f : functions)
    if (f->name == name)
      return f;
  return nullptr;
}

static ExprPtr node(ExprKind kind, Span span) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->span = span;
  return e;
}

ExprPtr make_var(std::string name, Type annotation, Span span) {
  auto e = node(ExprKind::Var, span);
  e->name = std::move(name);
  e->annotation = annotation;
  e->type = annotation;
  return e;
}

ExprPtr make_constant(double value, DType dtype, Span span) {
  auto e = node(ExprKind::Constant, span);
  e->fvalue = value;
  e->ivalue = int64_t(value);
  e->dtype = dtype;
  e->type = Type::tensor({}, dtype);
  return e;
}

ExprPtr make_int_constant(int64_t value, DType dtype, Span span) {
  auto e = make_constant(double(value), dtype, span);
  e->ivalue = value;
  return e;
}

ExprPtr make_call(const OpDef *op, std::vector<ExprPtr> args, Attrs attrs, Span span) {
  auto e = node(ExprKind::Call, span);
  e->op = op;
  e->args = std::move(args);
  e->attrs = std::move(attrs);
  return e;
}

ExprPtr make_global_call(std::string callee, std::vector<ExprPtr> args, Span span) {
  auto e = node(ExprKind::GlobalCall, span);
  e->name = std::move(callee);
  e->args = std::move(args);
  return e;
}

ExprPtr make_tuple(std::vector<ExprPtr> fields, Span span) {
  auto e = node(ExprKind::Tuple, span);
  e->args = std::move(fields);
  return e;
}

ExprPtr make_tuple_get(ExprPtr tuple, int index, Span span) {
  auto e = node(ExprKind::TupleGet, span);
  e->args = {std::move(tuple)};
  e->index = index;
  return e;
}

ExprPtr make_func(FunctionPtr func, Span span) {
  auto e = node(ExprKind::Func, span);
  e->func = std::move(func);
  return e;
}

namespace {

/// Copies expressions, mapping every Var defined inside to a fresh Var.
class Cloner {
public:
  std::unordered_map<const Expr *, ExprPtr> vars;

  ExprPtr fresh(const ExprPtr &v) {
    auto nv = make_var(v->name, v->annotation, v->span);
    nv->type = v->type;
    vars[v.get()] = nv;
    return nv;
  }

  ExprPtr expr(const ExprPtr &e) {
    if (e->kind == ExprKind::Var) {
      auto it = vars.find(e.get());
      return it == vars.end() ? e : it->second;
    }
    if (e->kind == ExprKind::Constant)
      return e;
    auto c = std::make_shared<Expr>(*e);
    for (ExprPtr &a : c->args)
      a = expr(a);
    if (e->kind == ExprKind::Func)
      c->func = function(*e->func);
    return c;
  }

  FunctionPtr function(const Function &fn) {
    auto out = std::make_shared<Function>();
    out->name = fn.name;
    out->ret_type = fn.ret_type;
    out->span = fn.span;
    for (const ExprPtr &p : fn.params)
      out->params.push_back(fresh(p));
    for (const Binding &b : fn.body.bindings) {
      ExprPtr value = expr(b.value);
      out->body.bindings.push_back({fresh(b.var), value, b.is_let});
    }
    out->body.result = expr(fn.body.result);
    return out;
  }
};

} // namespace

FunctionPtr clone_function(const Function &fn) { return Cloner().function(fn); }

} // namespace gradc
