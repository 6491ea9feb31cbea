//===- Attrs.h - typed operator attributes --------------------------------===//
//
// An operator declares its attributes once, as a struct whose `visit` names
// each field with its doc and rule (in the spirit of TVM's TVM_ATTR_FIELD):
//
//   struct Pool2DAttrs {
//     Pair pool_size{1, 1}, strides{1, 1};
//     Pad4 padding{0, 0, 0, 0};
//     bool ceil_mode = false;
//     template <class V> void visit(V &v) {
//       v("pool_size", pool_size, "The window.", {.required = true, .min = 1});
//       v("strides", strides, "The window's step.", {.min = 1});
//       v("padding", padding, "Implicit zeros (1, 2 or 4 values).", {.min = 0});
//       v("ceil_mode", ceil_mode, "Round the output size up.");
//     }
//   };
//   reg.add("nn.max_pool2d").attrs<Pool2DAttrs>() ...
//
// The registry derives the schema (`gradc ops`, the parser's checks, the
// defaults) from the field types and the struct's initial values, and every
// call is decoded once by check_call: lists widened (a Pair from 1 or 2
// values, a Pad4 from 1, 2 or 4), axes normalised into [0, rank) and checked
// for range and repeats, integers checked against their minimum, strings
// against their choices. Each failure is a located error naming the
// attribute. The typed call keeps the struct (ir/Expr.h: DecodedAttrs), and
// relations, gradients and kernels read it with `attrs_as<T>()`, already
// normalised and without decoding again: nothing reads an attribute by name.
//
// Each operator family's structs are public, in op/attrs/<family>.h, so
// that the ONNX importer builds calls with them too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace gradc {

struct OpDef;

/// Two values, one per spatial axis (H, W): `3` and `[3]` widen to [3, 3].
using Pair = std::array<int64_t, 2>;
/// Padding of the two spatial axes as (top, left, bottom, right), from one
/// value (all sides), two (H and W, both sides) or four.
using Pad4 = std::array<int64_t, 4>;
/// A [before, after] pair per axis (nn.pad's pad_width).
using IntPairs = std::vector<std::array<int64_t, 2>>;

/// An int or a list of ints that mean different things (split's
/// indices_or_sections: 3 equal parts, or parts starting at [3, 7]).
struct IntOrList {
  std::optional<int64_t> count; // an int was given
  std::vector<int64_t> list;    // a list was given
};

/// What a field accepts beyond its C++ type.
struct AttrRule {
  bool required = false;          // no default: the call must give it
  std::optional<int64_t> min;     // every integer of the field is >= min
  std::optional<int64_t> max;     // ... and <= max (a window's size, a padding: kMaxElements)
  int axis_of = -1;               // the field is an axis (or axes) of argument `axis_of`
  int extra_rank = 0;             // ... of a result with this many more axes (expand_dims)
  bool shape = false;             // a list of int that is a shape (entries >= 0, within limits)
  std::vector<std::string> one_of; // the strings a String field may hold
};

/// A failure to decode a call's attributes: the message (without the
/// operator's name) and the span of the attribute, if the call wrote it.
struct AttrError {
  std::string message;
  Span span;
};

/// Reads attributes into a typed struct (one field per call of operator()).
/// Axes of an argument whose type is not a known tensor are left as given:
/// the relation reports that argument.
class AttrDecoder {
public:
  AttrDecoder(const Attrs &attrs, const std::vector<Type> &args, size_t first_arg)
      : attrs_(attrs), args_(args), first_arg_(first_arg) {}

  template <class F> void operator()(const char *name, F &field, const char *, const AttrRule &rule = {}) {
    if (error)
      return;
    const AttrValue *v = attrs_.find(name);
    if (!v) // a call built before defaults were filled
      return;
    read(name, *v, field, rule);
  }
  std::optional<AttrError> error;

private:
  const Attrs &attrs_;
  const std::vector<Type> &args_;
  size_t first_arg_;

  void read(const char *name, const AttrValue &v, int64_t &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, std::optional<int64_t> &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, double &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, bool &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, std::string &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, DType &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, std::optional<DType> &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, std::vector<int64_t> &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, std::optional<std::vector<int64_t>> &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, Pair &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, Pad4 &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, IntPairs &f, const AttrRule &rule);
  void read(const char *name, const AttrValue &v, IntOrList &f, const AttrRule &rule);

  void fail(const AttrValue &v, std::string message);
  bool check_min(const char *name, const AttrValue &v, const std::vector<int64_t> &values, const AttrRule &rule);
  /// Normalises `axes` of argument rule.axis_of in place; false after an error.
  bool normalise_axes(const char *name, const AttrValue &v, std::vector<int64_t> &axes, const AttrRule &rule);
};

/// Builds the schema entry of each field (kind, default, doc).
class AttrSchemaBuilder {
public:
  explicit AttrSchemaBuilder(OpDef &def) : def_(def) {}
  template <class F> void operator()(const char *name, F &field, const char *doc, const AttrRule &rule = {}) {
    const char *count = std::is_same_v<F, Pair> ? "1 or 2 values" : std::is_same_v<F, Pad4> ? "1, 2 or 4 values" : "";
    add(name, doc, rule, describe(field, rule), count);
  }

  struct Described {
    int kind; // AttrKind
    AttrValue value;
  };
  static Described describe(const int64_t &f, const AttrRule &rule);
  static Described describe(const std::optional<int64_t> &f, const AttrRule &rule);
  static Described describe(const double &f, const AttrRule &rule);
  static Described describe(const bool &f, const AttrRule &rule);
  static Described describe(const std::string &f, const AttrRule &rule);
  static Described describe(const DType &f, const AttrRule &rule);
  static Described describe(const std::optional<DType> &f, const AttrRule &rule);
  static Described describe(const std::vector<int64_t> &f, const AttrRule &rule);
  static Described describe(const std::optional<std::vector<int64_t>> &f, const AttrRule &rule);
  static Described describe(const Pair &f, const AttrRule &rule);
  static Described describe(const Pad4 &f, const AttrRule &rule);
  static Described describe(const IntPairs &f, const AttrRule &rule);
  static Described describe(const IntOrList &f, const AttrRule &rule);

private:
  OpDef &def_;
  void add(const char *name, const char *doc, const AttrRule &rule, Described d, const char *count);
};

/// Writes a typed struct back as call attributes (for rules that build calls).
class AttrEncoder {
public:
  Attrs attrs;
  template <class F> void operator()(const char *name, F &field, const char *, const AttrRule &rule = {}) {
    attrs.set(name, AttrSchemaBuilder::describe(field, rule).value);
  }
};
template <class T> Attrs encode_attrs(T typed) {
  AttrEncoder e;
  typed.visit(e);
  return std::move(e.attrs);
}
/// A struct of typed attributes (it has `visit`).
template <class T>
concept TypedAttrs = requires(T t, AttrEncoder e) { t.visit(e); };

/// `attrs` decoded into T, or the first error.
template <class T>
std::optional<T> decode_attrs(const Attrs &attrs, const std::vector<Type> &args, size_t first_arg, AttrError *error) {
  T typed;
  AttrDecoder d(attrs, args, first_arg);
  typed.visit(d);
  if (d.error) {
    if (error)
      *error = *d.error;
    return std::nullopt;
  }
  return typed;
}

/// The typed attributes of a composite's call (OpBuilder::decompose) or of a
/// projected one (OpBuilder::project), whose arguments are typed and
/// attributes checked.
template <class T> T composite_attrs(const std::vector<ExprPtr> &args, const Attrs &attrs) {
  std::vector<Type> types;
  for (const ExprPtr &a : args)
    types.push_back(a->type);
  AttrError error;
  std::optional<T> typed = decode_attrs<T>(attrs, types, 0, &error);
  if (!typed)
    internal_error("attributes", "a composite's checked attributes failed to decode: " + error.message);
  return *typed;
}

/// The argument types of a call (for decoding after type inference).
std::vector<Type> arg_types(const Expr &call);
/// An internal error: a checked call's attributes failed to decode, or were
/// read as a struct other than the one the operator registered.
[[noreturn]] void attrs_decode_failure(const Expr &call, const std::type_info &wanted, const AttrError *error);

/// The typed attributes of a type-checked call of an operator registered
/// with OpBuilder::attrs<T>(): the struct check_call stored on it, or its
/// `attrs` decoded anew where it holds none (a call copied onto operands of
/// other types).
template <class T> T call_attrs(const Expr &call);

} // namespace gradc
