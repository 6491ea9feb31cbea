//===- Expr.cpp - tensor IR constructors, attributes, cloning -------------===//
#include "gradc/ir/Expr.h"
#include "gradc/ir/Functor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
AttrValue AttrValue::ints(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = List;
  a.int_list = std::move(v);
  return a;
}

AttrValue AttrValue::of_list(std::vector<AttrValue> elements) {
  for (const AttrValue &e : elements)
    if (e.kind != Int) {
      AttrValue a;
      a.kind = List;
      a.list = std::move(elements);
      return a;
    }
  std::vector<int64_t> v;
  v.reserve(elements.size());
  for (const AttrValue &e : elements)
    v.push_back(e.i);
  return ints(std::move(v));
}

bool AttrValue::is_int_list() const { return kind == List && list.empty(); }

std::vector<int64_t> AttrValue::as_ints() const { return kind == Int ? std::vector<int64_t>{i} : int_list; }

double AttrValue::as_number() const { return kind == Int ? double(i) : f; }

const char *role_name(FunctionRole role) {
  switch (role) {
  case FunctionRole::Primal:
    return "primal";
  case FunctionRole::Adjoint:
    return "adjoint";
  case FunctionRole::TrainStep:
    return "train_step";
  }
  return "?";
}

std::string format_float(double v, DType dt) {
  char buf[64];
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf"; // + the suffix: TVM's `inff`
  if (std::isnan(v))
    return std::signbit(v) ? "-nan" : "nan"; // + the suffix: `nanf`
  snprintf(buf, sizeof buf, dt == DType::Float64 ? "%.17g" : "%.9g", v);
  // A constant is held as a double whatever its dtype (PyTorch folds a
  // float32 model's scalars in double too), so the text keeps every digit
  // where nine do not read back the same double (1/3 from a mean's
  // gradient: `0.333333333f` read back folded differently, and the dumped
  // adjoint was not bitwise the adjoint). Nine digits of float32's largest
  // value read back above it, which the parser rejects (TVM's rule): every
  // digit there too.
  double back = std::strtod(buf, nullptr);
  if (back != v || std::fabs(back) > dtype_info(dt).max_finite)
    snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string AttrValue::str() const {
  switch (kind) {
  case None:
    return "None";
  case Int:
    return std::to_string(i);
  case Float: {
    // Held as a double: written `f64` where float32 cannot read it back.
    const DTypeInfo &f32 = dtype_info(DType::Float32);
    double m = std::abs(f);
    bool float32 = !std::isfinite(f) || m == 0 || (m <= f32.max_finite && m > f32.min_subnormal / 2);
    return format_float(f, DType::Float64) + (float32 ? "f" : "f64");
  }
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
    for (size_t k = 0; k < int_list.size(); ++k)
      out += (k ? ", " : "") + std::to_string(int_list[k]);
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

static std::shared_ptr<Expr> node(ExprKind kind, Span span) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->span = span;
  return e;
}

ExprPtr make_var(std::string name, Type annotation, Span span, Type type) {
  auto e = node(ExprKind::Var, span);
  e->name = std::move(name);
  e->type = type.is_unknown() ? annotation : std::move(type);
  e->annotation = std::move(annotation);
  return e;
}

static std::shared_ptr<Expr> constant_node(double value, DType dtype, Span span) {
  auto e = node(ExprKind::Constant, span);
  e->fvalue = value;
  // The integer view of a float constant, saturating: converting a double
  // outside int64 (1e30f, inff) or NaN is undefined behaviour.
  if (std::isnan(value))
    e->ivalue = 0;
  else if (value >= 9223372036854775808.0)
    e->ivalue = INT64_MAX;
  else if (value < -9223372036854775808.0)
    e->ivalue = INT64_MIN;
  else
    e->ivalue = int64_t(value);
  e->dtype = dtype;
  e->type = Type::tensor({}, dtype);
  return e;
}

ExprPtr make_constant(double value, DType dtype, Span span) { return constant_node(value, dtype, span); }

ExprPtr make_int_constant(int64_t value, DType dtype, Span span) {
  auto e = constant_node(double(value), dtype, span);
  e->ivalue = value;
  return e;
}

ExprPtr make_call(const OpDef *op, std::vector<ExprPtr> args, Attrs attrs, Span span, Type type, DecodedAttrs decoded) {
  GRADC_CHECK(op, "tensor IR", "a call without an operator");
  auto e = node(ExprKind::Call, span);
  e->op = op;
  e->args = std::move(args);
  e->attrs = std::move(attrs);
  e->decoded = std::move(decoded);
  e->type = std::move(type);
  return e;
}

ExprPtr make_global_call(std::string callee, std::vector<ExprPtr> args, Span span, Type type) {
  auto e = node(ExprKind::GlobalCall, span);
  e->name = std::move(callee);
  e->args = std::move(args);
  e->type = std::move(type);
  return e;
}

ExprPtr make_tuple(std::vector<ExprPtr> fields, Span span) {
  auto e = node(ExprKind::Tuple, span);
  std::vector<Type> types;
  for (const ExprPtr &f : fields)
    types.push_back(f->type);
  e->args = std::move(fields);
  e->type = Type::tuple(std::move(types));
  if (e->type.has_unknown())
    e->type = Type::unknown();
  return e;
}

ExprPtr make_tuple_get(ExprPtr tuple, int index, Span span) {
  auto e = node(ExprKind::TupleGet, span);
  const Type &t = tuple->type;
  if (t.is_tuple() && index >= 0 && index < int(t.fields.size()))
    e->type = t.fields[index];
  e->args = {std::move(tuple)};
  e->index = index;
  return e;
}

ExprPtr make_func(FunctionPtr func, Span span) {
  auto e = node(ExprKind::Func, span);
  std::vector<Type> params;
  for (const ExprPtr &p : func->params)
    params.push_back(p->type);
  if (func->body.result)
    e->type = Type::function(std::move(params), func->body.result->type);
  e->func = std::move(func);
  return e;
}

ExprPtr with_args(const Expr &e, std::vector<ExprPtr> args) {
  GRADC_CHECK(e.kind != ExprKind::Var && e.kind != ExprKind::Func, "tensor IR", "with_args of a Var or fn");
  auto copy = std::make_shared<Expr>(e);
  // Axes in the decoded attributes were normalised against the old operands'
  // ranks: operands of other types drop them, and call_attrs decodes anew.
  auto same_type = [](const ExprPtr &a, const ExprPtr &b) { return a->type == b->type; };
  bool same_types = args.size() == e.args.size() && std::equal(args.begin(), args.end(), e.args.begin(), same_type);
  if (!same_types)
    copy->decoded = {};
  copy->args = std::move(args);
  return copy;
}

namespace {

/// Every Var defined in the function (parameters, bound Vars, and those of
/// nested `fn` bodies) becomes a fresh Var of the same name and type.
class Cloner : public ExprMutator {
protected:
  ExprPtr mutate_param(const ExprPtr &p) override { return fresh(p); }
  void mutate_binding(const Binding &b, std::vector<Binding> &out) override {
    ExprPtr value = mutate(b.value);
    out.push_back({fresh(b.var), value, b.is_let});
  }

private:
  ExprPtr fresh(const ExprPtr &v) {
    ExprPtr nv = make_var(v->name, v->annotation, v->span, v->type);
    remap(v, nv);
    return nv;
  }
};

} // namespace

FunctionPtr clone_function(const Function &fn) { return Cloner().mutate_function(fn); }

} // namespace gradc
