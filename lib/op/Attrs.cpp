//===- Attrs.cpp - typed operator attributes: decoding and schema ---------===//
//
// See op/Attrs.h. check_call has already conformed each value to its schema
// kind (an int where an int is due, a list of ints, a dtype name), so the
// decoder only widens, normalises and checks the rules.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Attrs.h"
#include "gradc/op/Registry.h"

#include <set>

namespace gradc {

void AttrDecoder::fail(const AttrValue &v, std::string message) {
  if (!error)
    error = AttrError{std::move(message), v.span};
}

bool AttrDecoder::check_min(const char *name, const AttrValue &v, const std::vector<int64_t> &values,
                            const AttrRule &rule) {
  for (int64_t x : values) {
    if (rule.min && x < *rule.min) {
      fail(v, std::string(name) + " must be >= " + std::to_string(*rule.min) + ", found " + v.str());
      return false;
    }
    if (rule.max && x > *rule.max) {
      fail(v, std::string(name) + " must be <= " + std::to_string(*rule.max) + ", found " + v.str());
      return false;
    }
  }
  return true;
}

bool AttrDecoder::normalise_axes(const char *name, const AttrValue &v, std::vector<int64_t> &axes,
                                 const AttrRule &rule) {
  if (rule.axis_of < 0)
    return true;
  size_t i = size_t(rule.axis_of);
  if (i < first_arg_ || i - first_arg_ >= args_.size() || !args_[i - first_arg_].is_tensor())
    return true; // the relation reports the argument
  int64_t rank = args_[i - first_arg_].rank() + rule.extra_rank;
  // "axis 5 is out of range ...", or "axes: axis 5 is ..." for another name;
  // " (the default)" when the call did not write it.
  std::string what = std::string(name) == "axis" ? "axis" : std::string(name) + ": axis";
  std::string dflt = v.span.valid() ? "" : " (the default)";
  std::set<int64_t> seen;
  for (int64_t &a : axes) {
    if (a < -rank || a >= rank) {
      std::string expected = rank == 0 ? "it has no axes"
                                       : "expected " + std::to_string(-rank) + " to " + std::to_string(rank - 1);
      fail(v, what + " " + std::to_string(a) + dflt + " is out of range for a tensor of rank " +
                  std::to_string(rank - rule.extra_rank) + " (" + expected + ")");
      return false;
    }
    int64_t given = a;
    a = a < 0 ? a + rank : a;
    if (!seen.insert(a).second) {
      fail(v, what + " " + std::to_string(given) + " is repeated");
      return false;
    }
  }
  return true;
}

void AttrDecoder::read(const char *name, const AttrValue &v, int64_t &f, const AttrRule &rule) {
  std::vector<int64_t> one{v.i};
  if (check_min(name, v, one, rule) && normalise_axes(name, v, one, rule))
    f = one[0];
}
void AttrDecoder::read(const char *name, const AttrValue &v, std::optional<int64_t> &f, const AttrRule &rule) {
  if (v.kind == AttrValue::None) {
    f.reset();
    return;
  }
  int64_t x = 0;
  read(name, v, x, rule);
  f = x;
}
void AttrDecoder::read(const char *, const AttrValue &v, double &f, const AttrRule &) { f = v.as_number(); }
void AttrDecoder::read(const char *, const AttrValue &v, bool &f, const AttrRule &) { f = v.b; }
void AttrDecoder::read(const char *name, const AttrValue &v, std::string &f, const AttrRule &rule) {
  f = v.s;
  if (rule.one_of.empty())
    return;
  for (const std::string &choice : rule.one_of)
    if (choice == f)
      return;
  std::string choices;
  for (size_t i = 0; i < rule.one_of.size(); ++i)
    choices += (i == 0 ? "" : i + 1 == rule.one_of.size() ? " or " : ", ") + ("\"" + rule.one_of[i] + "\"");
  fail(v, std::string(name) + " must be " + choices + ", found " + v.str());
}
void AttrDecoder::read(const char *, const AttrValue &v, DType &f, const AttrRule &) {
  if (auto dt = parse_dtype(v.s))
    f = *dt;
}
void AttrDecoder::read(const char *name, const AttrValue &v, std::optional<DType> &f, const AttrRule &rule) {
  if (v.kind == AttrValue::None) {
    f.reset();
    return;
  }
  DType dt = DType::Float32;
  read(name, v, dt, rule);
  f = dt;
}
void AttrDecoder::read(const char *name, const AttrValue &v, std::vector<int64_t> &f, const AttrRule &rule) {
  std::vector<int64_t> xs = v.as_ints();
  if (check_min(name, v, xs, rule) && normalise_axes(name, v, xs, rule))
    f = std::move(xs);
}
void AttrDecoder::read(const char *name, const AttrValue &v, std::optional<std::vector<int64_t>> &f,
                       const AttrRule &rule) {
  if (v.kind == AttrValue::None) {
    f.reset();
    return;
  }
  std::vector<int64_t> xs;
  read(name, v, xs, rule);
  f = std::move(xs);
}
void AttrDecoder::read(const char *name, const AttrValue &v, IntOrList &f, const AttrRule &rule) {
  std::vector<int64_t> xs = v.as_ints();
  if (!check_min(name, v, xs, rule))
    return;
  f = {};
  if (v.kind == AttrValue::Int)
    f.count = v.i;
  else
    f.list = std::move(xs);
}
void AttrDecoder::read(const char *name, const AttrValue &v, Pair &f, const AttrRule &rule) {
  std::vector<int64_t> xs = v.as_ints();
  if (xs.size() != 1 && xs.size() != 2)
    return fail(v, std::string(name) + " expects 1 or 2 values, found " + std::to_string(xs.size()));
  if (!check_min(name, v, xs, rule))
    return;
  f = {xs[0], xs.back()};
}
void AttrDecoder::read(const char *name, const AttrValue &v, Pad4 &f, const AttrRule &rule) {
  std::vector<int64_t> xs = v.as_ints();
  if (xs.size() != 1 && xs.size() != 2 && xs.size() != 4)
    return fail(v, std::string(name) + " expects 1, 2 or 4 values, found " + std::to_string(xs.size()));
  if (!check_min(name, v, xs, rule))
    return;
  if (xs.size() == 1)
    f = {xs[0], xs[0], xs[0], xs[0]};
  else if (xs.size() == 2)
    f = {xs[0], xs[1], xs[0], xs[1]};
  else
    f = {xs[0], xs[1], xs[2], xs[3]};
}

void AttrDecoder::read(const char *name, const AttrValue &v, IntPairs &f, const AttrRule &rule) {
  IntPairs pairs;
  for (const AttrValue &e : v.list) {
    if (!check_min(name, v, e.int_list, rule))
      return;
    pairs.push_back({e.int_list[0], e.int_list[1]});
  }
  f = std::move(pairs);
}

void AttrSchemaBuilder::add(const char *name, const char *doc, const AttrRule &rule, Described d, const char *count) {
  std::vector<std::string> parts;
  if (*count)
    parts.push_back(count);
  if (rule.min)
    parts.push_back(">= " + std::to_string(*rule.min));
  if (rule.max)
    parts.push_back("<= " + std::to_string(*rule.max));
  if (rule.axis_of >= 0)
    parts.push_back(std::string(name) == "axes" || AttrKind(d.kind) != AttrKind::Int ? "axes of argument "
                                                                                     : "an axis of argument ");
  if (rule.axis_of >= 0)
    parts.back() += std::to_string(rule.axis_of + 1) + (rule.extra_rank ? " with the new axes" : "");
  if (!rule.one_of.empty()) {
    std::string choices;
    for (const std::string &c : rule.one_of)
      choices += (choices.empty() ? "" : ", ") + ("\"" + c + "\"");
    parts.push_back("one of " + choices);
  }
  std::string text;
  for (const std::string &p : parts)
    text += (text.empty() ? "" : "; ") + p;
  def_.attrs.push_back(AttrSpec{name, AttrKind(d.kind), rule.required ? AttrValue::none() : std::move(d.value), doc,
                                rule.required, text});
}

using D = AttrSchemaBuilder;
D::Described D::describe(const int64_t &f, const AttrRule &) { return {int(AttrKind::Int), AttrValue::of(f)}; }
D::Described D::describe(const std::optional<int64_t> &f, const AttrRule &) {
  return {int(AttrKind::OptInt), f ? AttrValue::of(*f) : AttrValue::none()};
}
D::Described D::describe(const double &f, const AttrRule &) { return {int(AttrKind::Float), AttrValue::of(f)}; }
D::Described D::describe(const bool &f, const AttrRule &) { return {int(AttrKind::Bool), AttrValue::of(f)}; }
D::Described D::describe(const std::string &f, const AttrRule &) { return {int(AttrKind::String), AttrValue::of(f)}; }
D::Described D::describe(const DType &f, const AttrRule &) {
  return {int(AttrKind::DTypeName), AttrValue::of(std::string(dtype_name(f)))};
}
D::Described D::describe(const std::optional<DType> &f, const AttrRule &) {
  return {int(AttrKind::DTypeName), f ? AttrValue::of(std::string(dtype_name(*f))) : AttrValue::none()};
}
D::Described D::describe(const std::vector<int64_t> &f, const AttrRule &rule) {
  return {int(rule.shape ? AttrKind::Shape : AttrKind::IntList), AttrValue::ints(f)};
}
D::Described D::describe(const std::optional<std::vector<int64_t>> &f, const AttrRule &) {
  return {int(AttrKind::OptIntList), f ? AttrValue::ints(*f) : AttrValue::none()};
}
D::Described D::describe(const Pair &f, const AttrRule &) {
  return {int(AttrKind::IntList), AttrValue::ints({f.begin(), f.end()})};
}
D::Described D::describe(const IntPairs &f, const AttrRule &) {
  std::vector<AttrValue> pairs;
  for (const auto &p : f)
    pairs.push_back(AttrValue::ints({p[0], p[1]}));
  return {int(AttrKind::IntPairs), pairs.empty() ? AttrValue::ints({}) : AttrValue::of_list(std::move(pairs))};
}
D::Described D::describe(const IntOrList &f, const AttrRule &) {
  return {int(AttrKind::IntOrList), f.count ? AttrValue::of(*f.count) : AttrValue::ints(f.list)};
}
D::Described D::describe(const Pad4 &f, const AttrRule &) {
  return {int(AttrKind::IntList), AttrValue::ints({f.begin(), f.end()})};
}

std::vector<Type> arg_types(const Expr &call) {
  std::vector<Type> types;
  for (const ExprPtr &a : call.args)
    types.push_back(a->type);
  return types;
}

void attrs_decode_failure(const Expr &call, const std::type_info &wanted, const AttrError *error) {
  std::string name = call.op ? call.op->name : "?";
  if (!error)
    internal_error("attributes", name + " read its attributes as " + wanted.name() + ", not the struct it registered");
  internal_error("attributes", name + ": checked attributes failed to decode: " + error->message);
}

} // namespace gradc
