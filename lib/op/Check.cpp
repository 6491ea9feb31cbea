//===- Check.cpp - checking one call against its operator record ----------===//
//
// Arity, then attributes against the schema (unknown or ill-typed attributes
// are errors; defaults are filled in), then the type relation. Type inference
// runs this on every call of a model; the Builder on every call a pass makes.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {


/// Whether `v` fits `kind`; widens where the schema allows (int -> float, int -> [int]).
bool conform(AttrValue &v, AttrKind kind, std::string &why) {
  auto is_int = [&] { return v.kind == AttrValue::Int; };
  switch (kind) {
  case AttrKind::Int:
    return is_int();
  case AttrKind::Bool:
    return v.kind == AttrValue::Bool;
  case AttrKind::String:
    return v.kind == AttrValue::String;
  case AttrKind::Float:
    if (is_int()) {
      v = AttrValue::of(double(v.i));
      return true;
    }
    return v.kind == AttrValue::Float;
  case AttrKind::OptFloat:
    if (is_int())
      v = AttrValue::of(double(v.i));
    return v.kind == AttrValue::Float || v.kind == AttrValue::None;
  case AttrKind::OptInt:
    return is_int() || v.kind == AttrValue::None;
  case AttrKind::IntList:
  case AttrKind::Shape:
    if (is_int())
      v = AttrValue::ints({v.i});
    if (!v.is_int_list())
      return false;
    if (kind == AttrKind::Shape)
      for (const AttrValue &d : v.list)
        if (d.i < 0) {
          why = "a shape cannot have negative dimensions";
          return false;
        }
    return true;
  case AttrKind::OptIntList:
    return v.kind == AttrValue::None || is_int() || v.is_int_list();
  case AttrKind::DTypeName:
    if (v.kind == AttrValue::String && parse_dtype(v.s))
      return true;
    why = "not a dtype";
    return false;
  }
  return false;
}

} // namespace

Type check_call(Expr &call, const Report &report) {
  const OpDef &def = *call.op;
  int n = int(call.args.size());
  if (n < def.min_inputs || n > def.max_inputs) {
    std::string expected = def.min_inputs == def.max_inputs
                               ? std::to_string(def.min_inputs)
                               : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    report(call.span, def.name + ": expected " + expected + " argument" + (def.max_inputs == 1 ? "" : "s") +
                          ", found " + std::to_string(n));
    return Type::unknown();
  }
  bool attrs_ok = true;
  Attrs filled;
  for (auto &[key, value] : call.attrs.items) {
    const AttrSpec *spec = def.find_attr(key);
    if (!spec) {
      std::string valid;
      for (const AttrSpec &a : def.attrs)
        valid += (valid.empty() ? "" : ", ") + a.name;
      report(value.span, def.name + ": unknown attribute '" + key + "'" +
                             (valid.empty() ? " (it takes none)" : " (valid: " + valid + ")"));
      attrs_ok = false;
      continue;
    }
    AttrValue v = value;
    std::string why;
    if (!conform(v, spec->kind, why)) {
      report(value.span, def.name + ": attribute '" + key + "' expects " + attr_kind_name(spec->kind) + ", found " +
                             value.str() + (why.empty() ? "" : " (" + why + ")"));
      attrs_ok = false;
      continue;
    }
    v.span = value.span;
    value = v;
  }
  for (const AttrSpec &spec : def.attrs) {
    if (const AttrValue *given = call.attrs.find(spec.name)) {
      filled.items.emplace_back(spec.name, *given);
    } else if (spec.required) {
      report(call.span, def.name + ": missing required attribute '" + spec.name + "'");
      attrs_ok = false;
    } else {
      filled.items.emplace_back(spec.name, spec.default_value);
    }
  }
  if (!attrs_ok)
    return Type::unknown();
  call.attrs = std::move(filled);
  std::vector<Type> arg_types;
  for (const ExprPtr &a : call.args) {
    if (a->type.has_unknown())
      return Type::unknown();
    arg_types.push_back(a->type);
  }
  RelationCtx ctx{def, arg_types, call.attrs, ""};
  Type t = def.relation(ctx);
  if (!ctx.error.empty()) {
    report(call.span, ctx.error);
    return Type::unknown();
  }
  GRADC_CHECK(!t.is_unknown(), "type inference", def.name + " relation returned Unknown without an error");
  return t;
}

Type check_structural(Expr &e, const Report &report) {
  switch (e.kind) {
  case ExprKind::Var:
  case ExprKind::Constant:
    return e.type;
  case ExprKind::Tuple: {
    std::vector<Type> fields;
    for (const ExprPtr &f : e.args)
      fields.push_back(f->type);
    return Type::tuple(std::move(fields));
  }
  case ExprKind::TupleGet: {
    const Type &t = e.args[0]->type;
    if (t.is_unknown())
      return t;
    if (!t.is_tuple()) {
      report(e.span, "projection ." + std::to_string(e.index) + " of a non-tuple value of type " + t.str());
      return Type::unknown();
    }
    if (e.index >= (int)t.fields.size()) {
      report(e.span, "tuple index " + std::to_string(e.index) + " is out of range for " + t.str());
      return Type::unknown();
    }
    return t.fields[e.index];
  }
  default:
    internal_error("type inference", "not a structural expression");
  }
}

Type infer_call(Expr &call, std::string *error) {
  return check_call(call, [&](Span, const std::string &msg) {
    if (error && error->empty())
      *error = msg;
  });
}

Type infer_structural(Expr &e, std::string *error) {
  return check_structural(e, [&](Span, const std::string &msg) {
    if (error && error->empty())
      *error = msg;
  });
}

} // namespace gradc
