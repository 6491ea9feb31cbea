//===- Check.cpp - checking one call against its operator record ----------===//
//
// Arity, then attributes against the schema (unknown or ill-typed attributes
// are errors; defaults are filled in), then the type relation, then the
// limits on the type it infers (ir/Type.h: shape_problem). Type inference
// runs this on every call of a model; the Builder on every call a pass makes.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Check.h"
#include "gradc/op/Registry.h"

#include <optional>

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
  case AttrKind::OptInt:
    return is_int() || v.kind == AttrValue::None;
  case AttrKind::IntList:
  case AttrKind::Shape:
    if (is_int())
      v = AttrValue::ints({v.i});
    if (!v.is_int_list())
      return false;
    if (kind == AttrKind::Shape)
      if (auto problem = shape_problem(v.as_ints())) {
        why = *problem;
        return false;
      }
    return true;
  case AttrKind::OptIntList:
    return v.kind == AttrValue::None || is_int() || v.is_int_list();
  case AttrKind::IntOrList:
    return is_int() || v.is_int_list();
  case AttrKind::IntPairs:
    if (v.is_int_list() && v.int_list.empty())
      return true; // []
    if (v.kind != AttrValue::List)
      return false;
    for (const AttrValue &e : v.list)
      if (!e.is_int_list() || e.int_list.size() != 2) {
        why = "each entry is [before, after]";
        return false;
      }
    return true;
  case AttrKind::DTypeName:
    if (v.kind == AttrValue::String && parse_dtype(v.s))
      return true;
    why = "not a dtype";
    return false;
  }
  return false;
}

} // namespace

ExprPtr check_call(const OpDef *op, std::vector<ExprPtr> args, const Attrs &attrs, Span span, const Report &report) {
  const OpDef &def = *op;
  auto untyped = [&] { return make_call(op, std::move(args), attrs, span); };
  int n = int(args.size());
  if (n < def.min_inputs || n > def.max_inputs) {
    std::string expected = def.min_inputs == def.max_inputs
                               ? std::to_string(def.min_inputs)
                               : std::to_string(def.min_inputs) + " to " + std::to_string(def.max_inputs);
    report(span, def.name + ": expected " + expected + " argument" + (def.max_inputs == 1 ? "" : "s") + ", found " +
                     std::to_string(n));
    return untyped();
  }
  bool attrs_ok = true;
  // Each given attribute conformed to its schema entry (the one copy of its
  // value: a list may hold millions of entries), by the entry's position.
  std::vector<std::optional<AttrValue>> conformed(def.attrs.size());
  for (const auto &[key, value] : attrs.items) {
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
    // `None` spells the default of an attribute whose default is None (what
    // the printer writes for it, so printed modules parse back).
    bool default_none = v.kind == AttrValue::None && !spec->required && spec->default_value.kind == AttrValue::None;
    if (!default_none && !conform(v, spec->kind, why)) {
      report(value.span, def.name + ": attribute '" + key + "' expects " + attr_kind_name(spec->kind) + ", found " +
                             value.str() + (why.empty() ? "" : " (" + why + ")"));
      attrs_ok = false;
      continue;
    }
    v.span = value.span;
    conformed[spec - def.attrs.data()] = std::move(v);
  }
  Attrs filled;
  for (size_t k = 0; k < def.attrs.size(); ++k) {
    const AttrSpec &spec = def.attrs[k];
    if (conformed[k]) {
      filled.items.emplace_back(spec.name, std::move(*conformed[k]));
    } else if (attrs.find(spec.name)) {
      continue; // ill-typed, reported above
    } else if (spec.required) {
      report(span, def.name + ": missing required attribute '" + spec.name + "'");
      attrs_ok = false;
    } else {
      filled.items.emplace_back(spec.name, spec.default_value);
    }
  }
  if (!attrs_ok)
    return untyped();
  std::vector<Type> arg_types;
  for (const ExprPtr &a : args) {
    if (a->type.has_unknown())
      return make_call(op, std::move(args), std::move(filled), span);
    bool body = def.is_fn_arg(size_t(&a - args.data()));
    if (a->type.is_function() != body) {
      report(a->kind == ExprKind::Var ? span : a->span, body ? def.name + ": argument " + std::to_string(&a - args.data() + 1) +
                                 " must be a `fn` value (a body), found a value of type " +
                                 a->type.str()
                           : def.name + ": a `fn` value is only accepted as the body of scan");
      return make_call(op, std::move(args), std::move(filled), span);
    }
    arg_types.push_back(a->type);
  }
  // Decoded once: the relation reads this struct, and so does every later
  // reader of the typed call (call_attrs).
  DecodedAttrs decoded;
  if (def.check_attrs) {
    AttrError bad;
    decoded = def.check_attrs(filled, arg_types, 0, bad);
    if (!decoded) {
      report(bad.span.valid() ? bad.span : span, def.name + ": " + bad.message);
      return make_call(op, std::move(args), std::move(filled), span);
    }
  }
  RelationCtx ctx{def, arg_types, filled, ""};
  ctx.decoded = &decoded;
  Type t = def.relation(ctx);
  if (!ctx.error.empty()) {
    report(ctx.error_span.valid() ? ctx.error_span : span, ctx.error);
    return make_call(op, std::move(args), std::move(filled), span);
  }
  GRADC_CHECK(!t.is_unknown(), "type inference", def.name + " relation returned Unknown without an error");
  // Legal operands can give a result past the limits (a broadcast or a
  // product of two large tensors): every inferred type is checked here, once.
  if (auto problem = type_problem(t)) {
    report(span, def.name + ": the result is over gradc's limits: " + *problem);
    return make_call(op, std::move(args), std::move(filled), span);
  }
  return make_call(op, std::move(args), std::move(filled), span, std::move(t), std::move(decoded));
}

ExprPtr check_tuple_get(ExprPtr tuple, int index, Span span, const Report &report) {
  const Type &t = tuple->type;
  if (!t.is_unknown() && !t.is_tuple())
    report(span, "projection ." + std::to_string(index) + " of a non-tuple value of type " + t.str());
  else if (t.is_tuple() && index >= int(t.fields.size()))
    report(span, "tuple index " + std::to_string(index) + " is out of range for " + t.str());
  return make_tuple_get(std::move(tuple), index, span);
}

} // namespace gradc
