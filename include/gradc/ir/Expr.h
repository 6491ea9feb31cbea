//===- Expr.h - the tensor IR: expressions, functions, modules ------------===//
//
// The tensor IR is Relay's expression language, restricted to what SPEC §3
// accepts. One closed set of node kinds (ExprKind); every node carries the
// source span it came from and, after type inference, its checked type.
//
// Semantics:
//  * A Var is identified by object identity, not by name. Names only matter
//    for printing; the printer makes them unique.
//  * A function body is a list of bindings then a result expression. Binding
//    values may be nested expressions; after `normalize` (ANF) every Call,
//    Tuple and TupleGet is bound to its own Var and arguments are atoms
//    (Var or Constant).
//  * Values are immutable tensors: no aliasing, no side effects, so a pass
//    may duplicate (recompute) or reorder any binding that respects data
//    dependencies.
//  * After fusion, each top-level binding is one kernel and nested calls in
//    its value are the operators fused into it (see transform/Fuse.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Type.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace gradc {

struct OpDef;
struct Expr;
struct Function;
// Nodes are immutable once built: passes rebuild (see ir/Functor.h).
using ExprPtr = std::shared_ptr<const Expr>;
using FunctionPtr = std::shared_ptr<const Function>;

/// `v` in the text format, without a dtype suffix: enough digits to read back
/// as the same value of `dt` (17 significant digits for float64, else 9, or
/// 17 where 9 would read back beyond the dtype's largest value), `inf`,
/// `-inf` or `nan`.
std::string format_float(double v, DType dt);

/// An attribute value as written in the text format. A list whose elements
/// are all integers (shapes, axes) is held as int64s in `int_list`, any other in
/// `list`: an input may write millions of entries, and a whole AttrValue per
/// entry would take a dozen times the memory.
struct AttrValue {
  enum Kind { None, Int, Float, String, Bool, List };
  Kind kind = None;
  int64_t i = 0;
  double f = 0;
  std::string s;
  bool b = false;
  std::vector<AttrValue> list;   // List: the elements, unless they are all integers
  std::vector<int64_t> int_list; // List: the elements when they are all integers (`list` empty)
  Span span;

  static AttrValue none() { return {}; }
  static AttrValue of(int64_t v);
  static AttrValue of(int v) { return of((int64_t)v); }
  static AttrValue of(double v);
  static AttrValue of(bool v);
  static AttrValue of(const std::string &v);
  static AttrValue of(const char *v) { return of(std::string(v)); }
  static AttrValue ints(std::vector<int64_t> v);
  /// A list of these elements, held as `int_list` when they are all integers.
  static AttrValue of_list(std::vector<AttrValue> elements);

  bool is_int_list() const;
  std::vector<int64_t> as_ints() const; // Int or list of Int
  double as_number() const;             // Int or Float
  /// Relay text: `1`, `0.5f`, `"mean"`, `True`, `None`, `[1, 2]`.
  std::string str() const;
};

/// Keyword attributes of a call, in source order. After type inference every
/// attribute of the operator's schema is present (defaults filled in).
/// Operators read them through their typed struct (op/Attrs.h), never by name.
struct Attrs {
  std::vector<std::pair<std::string, AttrValue>> items;

  const AttrValue *find(const std::string &name) const;
  const AttrValue &get(const std::string &name) const; // internal error if absent
  void set(const std::string &name, AttrValue value);
};

/// A call's attributes decoded into its operator's typed struct (op/Attrs.h)
/// for the argument types it was checked with: lists widened, defaults
/// filled, axes normalised against those arguments' ranks. check_call stores
/// it on the call it types, so that relations, gradients and kernels read the
/// struct (call_attrs<T>) instead of decoding `attrs` again. The IR holds it
/// without knowing the struct: only its std::type_info.
class DecodedAttrs {
public:
  DecodedAttrs() = default;
  template <class T> static DecodedAttrs of(T value) {
    DecodedAttrs d;
    d.value_ = std::make_shared<const T>(std::move(value));
    d.type_ = &typeid(T);
    return d;
  }
  /// The struct if it is a T, else null.
  template <class T> const T *get() const {
    return type_ && *type_ == typeid(T) ? static_cast<const T *>(value_.get()) : nullptr;
  }
  explicit operator bool() const { return value_ != nullptr; }

private:
  std::shared_ptr<const void> value_;
  const std::type_info *type_ = nullptr;
};

enum class ExprKind {
  Var,        // a parameter or bound variable; identity is the node itself
  Constant,   // a scalar literal with a dtype
  Call,       // an operator call: positional arguments and attributes
  GlobalCall, // a call of another definition `@f(...)`, inlined before grad
  Tuple,      // `(a, b)`
  TupleGet,   // `t.0`, args[0] is the tuple
  Func,       // `fn (%s: T, ...) { body }`, a value of function type
};

struct Binding {
  ExprPtr var;
  ExprPtr value;
  bool is_let = false; // written `let %x = ...;` rather than `%x = ...;`
};

struct Body {
  std::vector<Binding> bindings;
  ExprPtr result;
};

struct Expr {
  ExprKind kind;
  Span span;
  Type type; // checked type; Unknown until type inference

  std::string name;             // Var (without '%'); GlobalCall callee (without '@')
  Type annotation;              // Var: declared type, Unknown if none
  double fvalue = 0;            // Constant (float and bool)
  int64_t ivalue = 0;           // Constant (int and bool)
  DType dtype = DType::Float32; // Constant
  const OpDef *op = nullptr;    // Call
  Attrs attrs;                  // Call
  DecodedAttrs decoded;         // Call, once type-checked: `attrs` as the operator's struct, for these args' types
  std::vector<ExprPtr> args;    // Call, GlobalCall, Tuple fields, TupleGet [tuple]
  int index = 0;                // TupleGet
  FunctionPtr func;             // Func

  bool is_atom() const { return kind == ExprKind::Var || kind == ExprKind::Constant; }
};

/// What a function is to the compiler. The gradient pass makes adjoints,
/// --train makes training steps; everything else is a primal.
enum class FunctionRole { Primal, Adjoint, TrainStep };
const char *role_name(FunctionRole role);

/// A definition's own attributes, written in the text format after its
/// parameters as TVM writes function attributes
/// (`def @main_adjoint(%x: T, role="adjoint", primal="main")`), so every
/// dumped stage keeps them.
struct FunctionAttrs {
  FunctionRole role = FunctionRole::Primal;
  /// Adjoint, TrainStep: the function it was derived from.
  std::string primal;
  /// Per leaf of the result (depth-first): the index of the parameter it is
  /// written into in place (a donated buffer, updated by the call), or -1
  /// for a leaf of its own. Empty: every leaf is the function's own
  /// (Relax's `inplace_indices`, on the whole function).
  std::vector<int64_t> inplace;
  Span inplace_span; // where `inplace_indices` is written, for diagnostics
  /// TrainStep: the optimizer and its hyper-parameters, as --train reads
  /// them (transform/TrainStep.h: `adam(lr=0.001, betas=(0.9, 0.999), ...)`).
  std::string optimizer;

  bool empty() const {
    return role == FunctionRole::Primal && primal.empty() && inplace.empty() && optimizer.empty();
  }
  /// Whether parameter `p` is updated in place.
  bool updates(size_t p) const { return std::find(inplace.begin(), inplace.end(), int64_t(p)) != inplace.end(); }
};

struct Function {
  std::string name; // without '@'; empty for `fn`
  std::vector<ExprPtr> params;
  Type ret_type; // declared return type, Unknown if none
  Body body;
  Span span;
  FunctionAttrs attrs;
};

struct Module {
  std::shared_ptr<const SourceFile> source;
  std::vector<FunctionPtr> functions;
  FunctionPtr find(const std::string &name) const;
};

// Constructors. A node's type is given when it is known (passes build typed
// nodes, the parser untyped ones); Tuple and TupleGet derive theirs from typed
// operands. A typed Call is checked against its operator record where it is
// built (op/Builder.h), and every pass's output by the verifier.

/// A Var of type `type` (default: its annotation).
ExprPtr make_var(std::string name, Type annotation = {}, Span span = {}, Type type = {});
ExprPtr make_constant(double value, DType dtype, Span span = {});
ExprPtr make_int_constant(int64_t value, DType dtype, Span span = {});
/// A call; `decoded` is `attrs` decoded for the types of `args` (check_call).
ExprPtr make_call(const OpDef *op, std::vector<ExprPtr> args, Attrs attrs, Span span = {}, Type type = {},
                  DecodedAttrs decoded = {});
ExprPtr make_global_call(std::string callee, std::vector<ExprPtr> args, Span span = {}, Type type = {});
ExprPtr make_tuple(std::vector<ExprPtr> fields, Span span = {});
ExprPtr make_tuple_get(ExprPtr tuple, int index, Span span = {});
ExprPtr make_func(FunctionPtr func, Span span = {});
/// A copy of `e` (any kind but Var) with other operands, keeping its type.
/// A call keeps its decoded attributes only where every operand has the type
/// of the one it replaces: they were decoded for those types.
ExprPtr with_args(const Expr &e, std::vector<ExprPtr> args);

/// A copy of a function with fresh Vars everywhere (types kept).
FunctionPtr clone_function(const Function &fn);

} // namespace gradc
