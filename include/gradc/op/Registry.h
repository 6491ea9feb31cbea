//===- Registry.h - the operator registry (RELAY_REGISTER_OP, kept whole) -===//
//
// An OpDef is everything gradc knows about an operator: arity, argument docs,
// typed attribute schema with defaults, support level, type relation,
// gradient (FPrimalGradient) and lowering. Each operator is registered once,
// in its family file under lib/op/, with all of these side by side:
//
//   reg.add("exp")
//       .describe("Elementwise e^x.")
//       .arg("data", "Tensor", "The input tensor.")
//       .support_level(1)
//       .relation("FloatIdentity", float_identity_rel)
//       .gradient([](GradCtx &g) -> Grads { return {g.b.mul(g.grad, g.out)}; }) // d/dx e^x = e^x
//       .element([](ElementCtx &c) { return unary(UnaryOp::Exp, c.in(0)); });
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"
#include "gradc/op/Attrs.h"
#include "gradc/loops/LoopIR.h"
#include "gradc/loops/Target.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gradc {

class Builder;
class OpRegistry;
struct ElementCtx;
struct KernelCtx;
class LoopLowerCtx;

enum class AttrKind {
  Int,        // 3
  Float,      // 0.5f or 1
  Bool,       // True
  String,     // "mean"
  IntList,    // [1, 2] (a single int is accepted and widened)
  OptInt,     // None or 3
  OptIntList, // None, 3 or [1, 2]
  DTypeName,  // "float32"
  Shape,      // [2, 3], every entry >= 0
  IntPairs,   // [[0, 0], [1, 2]]: a [before, after] pair per axis
  IntOrList,  // 3 or [3, 7]: two meanings (split's sections or indices)
};
const char *attr_kind_name(AttrKind kind);

struct AttrSpec {
  std::string name;
  AttrKind kind;
  AttrValue default_value; // used when the call omits the attribute
  std::string doc;
  bool required = false;
  std::string rule; // what a typed attribute accepts beyond its kind: ">= 1", "1 or 2 values", ...
};

struct ArgInfo {
  std::string name, type_info, doc;
};

/// What a type relation sees: argument types (all known: Unknown arguments
/// short-circuit before the relation runs) and the validated attributes.
struct RelationCtx {
  const OpDef &op;
  const std::vector<Type> &args;
  const Attrs &attrs;
  std::string error; // the first failure, "" if none
  /// args[i] is the call's argument first_arg + i: a relation run on the
  /// tail of another's arguments (grad.nll_loss_backward checks its forward
  /// loss's) names them as the call does.
  size_t first_arg = 0;

  /// Records `op: message` and returns Unknown.
  Type fail(const std::string &message);
  /// Argument `i` as a tensor type, or a failure if it is a tuple.
  const Type *tensor(size_t i);
  /// Records `op: message` against attribute `name` (located at its value
  /// where the call wrote it) and returns Unknown.
  Type fail_attr(const std::string &name, const std::string &message);
  Span error_span; // where to report `error`; empty: the call
  /// check_call's decoding of `attrs` for `args`; null: attrs_as decodes them.
  const DecodedAttrs *decoded = nullptr;

  /// The call's typed attributes (OpBuilder::attrs<T>), decoded and checked.
  template <class T> T attrs_as() const;
};
using TypeRelation = Type (*)(RelationCtx &);

/// What a gradient sees: the original call (arguments are atoms), the Var
/// holding its result, and the adjoint of that result.
struct GradCtx {
  Builder &b;
  const Expr &call;
  ExprPtr out;
  ExprPtr grad;
  /// The gradient pass applied to a function of the language (a scan's
  /// body): its vector-Jacobian product `@F_vjp(params..., %d_out)`, one
  /// adjoint per parameter with a floating-point part (transform/Gradient.h:
  /// build_vjp). Its errors (an operator without a gradient inside) are
  /// reported with the rest of the pass's.
  /// With keep_primal, the vjp's first bindings are a copy of each of the
  /// function's own, in order, dead ones included (what split_vjp reads).
  std::function<FunctionPtr(const Function &, bool keep_primal)> vjp_of;
  /// Rewrites the forward pass, for a rule that saves values there instead
  /// of recomputing them (the fwd half of JAX's custom_vjp): `emit` appends,
  /// with the Builder it is given, bindings that run just before the call's
  /// own and returns a Var of a tuple whose field 0 has the call's type; that
  /// field becomes the call's value. Returns the Var, whose other fields the
  /// rule then reads in the backward pass. Null where the forward pass cannot
  /// be rewritten (`gradc ops` derives formulas from a lone call).
  std::function<ExprPtr(const std::function<ExprPtr(Builder &)> &emit)> augment_forward;
  FunctionPtr differentiate(const Function &f, bool keep_primal = false) const { return vjp_of(f, keep_primal); }
  const ExprPtr &arg(size_t i) const { return call.args[i]; }
  const Attrs &attrs() const { return call.attrs; }
  template <class T> T attrs_as() const { return call_attrs<T>(call); }
};
/// One adjoint per input; nullptr means "contributes nothing" (zero).
using Grads = std::vector<ExprPtr>;
using GradientFn = Grads (*)(GradCtx &);

/// Injective operators compute one output element from input elements (and
/// can be fused); other operators emit a whole loop nest.
using ElementFn = LExprPtr (*)(ElementCtx &);
using KernelFn = StmtPtr (*)(KernelCtx &);
/// An operator computed element by element with several results (an
/// optimizer's update: the parameter and its state), each a tensor of its
/// first argument's shape: the stores of every result at element `i` (flat
/// `at`), reading its tensor arguments at `i` and scalars at `{}`. Its
/// kernel is a loop nest of these; an epilogue, it writes a product's
/// results where the product stores its value (KernelCtx::put).
using PointwiseFn = StmtPtr (*)(KernelCtx &, const std::vector<LExprPtr> &i, const LExprPtr &at);
/// An operator defined as a composition of others: emits the composition
/// with `b` (typed bindings) and returns its value.
using DecomposeFn = ExprPtr (*)(Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs);
/// Field `field` of a tuple-result call computed on its own, from the call's
/// arguments, by injective operators (split's part: a strided slice).
using ProjectFn = ExprPtr (*)(Builder &b, const std::vector<ExprPtr> &args, const Attrs &attrs, size_t field);

/// A finite-difference test case: parameters and a body calling the operator,
/// compiled in float64 by the registry-driven gradient test.
struct GradExample {
  std::string params;    // "%x: Tensor[(2, 3), float64], %y: Tensor[(3,), float64]"
  std::string body;      // "add(%x, %y)"
  bool positive = false; // floating inputs drawn from [0.5, 1.5] instead of ±[0.5, 1.5]
  int64_t int_range = 2; // integer inputs drawn from [0, int_range)
};

/// What a gradient-checkpoint marker operator means to rematerialization.
enum class CheckpointMarker { None, Start, End };

/// The arithmetic operations one call performs (for --report).
using FlopsFn = int64_t (*)(const Expr &call);
/// For an operator that fuses_producers: how many times at most its kernel
/// reads each element of argument `arg` (0: that argument takes no fused
/// producer, its kernel reads it from memory).
using ProducerReadsFn = int64_t (*)(const Expr &call, size_t arg);

/// For an operator whose first argument is a `fn` value (scan): the types
/// that fn's parameters take, given the types of the call's other
/// arguments (all known), or nullopt and why not in `error` (`op: ` is
/// prefixed). A `fn` written inline without parameter annotations is typed
/// with these; the relation checks an annotated one.
using FnParamsFn = std::optional<std::vector<Type>> (*)(const std::vector<Type> &rest, const Attrs &attrs,
                                                        std::string &error);
/// An operator that lowers to a time loop of kernels (scan): it builds them
/// through the function lowering's own machinery (op/Kernel.h: LoopLowerCtx).
using LoopLoweringFn = void (*)(LoopLowerCtx &);

/// Decodes a call's attributes as the operator's typed struct: the struct, or
/// an empty holder and the error in `error`.
using AttrCheckFn = DecodedAttrs (*)(const Attrs &attrs, const std::vector<Type> &args, size_t first_arg,
                                     AttrError &error);

struct OpDef {
  std::string name;
  std::string summary;
  std::string notes; // semantics beyond the summary, for the reference page (paragraphs)
  int min_inputs = 0, max_inputs = 0; // arity
  std::vector<ArgInfo> args;
  std::vector<AttrSpec> attrs;
  // Typed attributes (OpBuilder::attrs<T>): the struct, and its decoder,
  // which check_call runs on every call before the relation, storing the
  // struct on the call it types (Expr::decoded).
  const std::type_info *attrs_type = nullptr;
  AttrCheckFn check_attrs = nullptr;
  int support_level = 1;
  std::string relation_name;
  TypeRelation relation = nullptr;
  GradientFn gradient = nullptr;
  bool no_gradient = false; // gradient is zero by definition (comparisons, creation, ...)
  ElementFn element = nullptr;
  /// The calls `element` computes (all where null); the kernel, the others
  /// (grad.max_pool2d_backward: a gather where no two windows overlap).
  bool (*element_when)(const Expr &call) = nullptr;
  DecomposeFn decompose = nullptr; // a composite: expanded before gradient (after, if it has a rule) and lowering
  ProjectFn project = nullptr;     // a tuple result whose fields fuse one by one (transform/Passes.h: project_fields)
  KernelFn kernel = nullptr;       // the schedule-neutral kernel
  PointwiseFn pointwise = nullptr; // element-wise with several results (see PointwiseFn)
  std::vector<std::pair<TargetKind, KernelFn>> strategies; // hand-scheduled kernels per target (OpRegistry::strategy)
  std::vector<GradExample> examples; // finite-difference cases, at least one per gradient
  std::vector<std::string> aliases;
  CheckpointMarker checkpoint = CheckpointMarker::None;
  FlopsFn flops_fn = nullptr; // default: one per output element (per input element if larger)
  // Fusion beyond injective chains (transform/Fuse.h): the kernel passes every
  // value it stores, once per output element, through KernelCtx::epilogue, so
  // injective consumers that read it elementwise fuse into it (bias, relu);
  // and single-use injective producers of its operands fuse into it (read a
  // bounded number of times: sum(a / b) without a / b in memory).
  // A pointwise operator takes a fuses_epilogue operator's value the way an
  // injective consumer does: its stores become that kernel's epilogue.
  // An operator whose kernel reads an argument several times per element
  // (a pooling window's taps) or by flat offset says which (producer_reads):
  // a producer is then recomputed at each read, so only cheap ones fuse there.
  bool fuses_epilogue = false;
  bool fuses_producers = false;
  // An injective operator whose element reads operands at its index divided
  // by a stride (an unpooling: each window's value at each of its taps): in a
  // vector loop those reads are gathers, so fusion recomputes it in several
  // users only where memory is short (transform/Fuse.h: FuseOptions::lean).
  bool replicates = false;
  ProducerReadsFn producer_reads_fn = nullptr;
  // An operator whose first fn_args arguments are `fn` values (bodies),
  // whose free Vars (captured values) are inputs too: a gradient rule
  // returns their adjoints after the arguments', in captured_inputs order.
  // fn_params types argument 0's parameters.
  int fn_args = 0;
  FnParamsFn fn_params = nullptr;
  LoopLoweringFn lower_loop = nullptr;

  bool takes_fn() const { return fn_args > 0; }
  bool is_fn_arg(size_t i) const { return i < size_t(fn_args); }
  bool has_gradient() const { return gradient != nullptr || no_gradient || decompose != nullptr; }
  bool has_lowering() const {
    return element != nullptr || kernel != nullptr || decompose != nullptr || lower_loop != nullptr;
  }
  /// Whether `call` is computed element by element (and fuses as such).
  bool injective(const Expr &call) const { return element != nullptr && (!element_when || element_when(call)); }
  /// Whether any call is.
  bool ever_injective() const { return element != nullptr; }
  /// The kernel to lower a call with for `target`: its strategy, else the generic kernel.
  KernelFn kernel_for(TargetKind target) const;
  const AttrSpec *find_attr(const std::string &name) const;
  int64_t flops(const Expr &call) const;
  /// Reads per element of argument `arg` by the kernel of `call` when a
  /// producer fuses there (1 for an operator that fuses_producers without a
  /// ProducerReadsFn); 0 where none may.
  int64_t producer_reads(const Expr &call, size_t arg) const;
};

/// Fluent registration, in the spirit of RELAY_REGISTER_OP.
class OpBuilder {
public:
  OpBuilder(OpRegistry &reg, OpDef &def) : reg_(reg), def_(def) {}
  OpBuilder &describe(std::string summary);
  /// Semantics the summary cannot hold, printed on `gradc ops NAME`.
  OpBuilder &notes(std::string text);
  OpBuilder &arg(std::string name, std::string type_info, std::string doc);
  /// Variadic tail: the last declared argument may repeat up to `max` times.
  OpBuilder &arity(int min, int max);
  OpBuilder &attr(std::string name, AttrKind kind, AttrValue default_value, std::string doc);
  OpBuilder &required_attr(std::string name, AttrKind kind, std::string doc);
  /// Declares every attribute at once as the typed struct T (op/Attrs.h).
  template <class T> OpBuilder &attrs() {
    T defaults;
    AttrSchemaBuilder schema(def_);
    defaults.visit(schema);
    def_.attrs_type = &typeid(T);
    def_.check_attrs = [](const Attrs &a, const std::vector<Type> &args, size_t first_arg, AttrError &error) {
      std::optional<T> typed = decode_attrs<T>(a, args, first_arg, &error);
      return typed ? DecodedAttrs::of(std::move(*typed)) : DecodedAttrs();
    };
    return *this;
  }
  OpBuilder &support_level(int level);
  OpBuilder &relation(std::string name, TypeRelation rel);
  OpBuilder &gradient(GradientFn fn);
  OpBuilder &no_gradient();
  /// The element reads operands at strided-down indices (OpDef::replicates).
  OpBuilder &replicates();
  OpBuilder &element(ElementFn fn);
  /// `fn` for the calls `when` accepts, the kernel for the others.
  OpBuilder &element(ElementFn fn, bool (*when)(const Expr &call));
  OpBuilder &kernel(KernelFn fn);
  /// Element-wise with several results: `fn`'s stores in a loop nest over
  /// the first argument's shape are the kernel; takes fused producers, and
  /// fuses into the kernel of a product (or any fuses_epilogue operator)
  /// that makes an argument it reads element-wise.
  OpBuilder &pointwise(PointwiseFn fn);
  /// Defines the operator as a composition of others (tinygrad-style): its
  /// calls are expanded (transform/Passes.h: expand_composites) before the
  /// gradient pass and again before fusion, so the gradient and the kernels
  /// come from the parts; with .gradient() too, the rule differentiates its
  /// calls, which are expanded right after (variance: its parts' gradient
  /// would sum x - mean(x) once more). Unless .relation() is also given, the
  /// type relation is the composition's, checked on the argument types.
  OpBuilder &decompose(DecomposeFn fn);
  /// Each field of the operator's tuple result as an expression of its own:
  /// a call only read through projections becomes one per field read
  /// (transform/Passes.h: project_fields), each fusing into its consumers.
  OpBuilder &project(ProjectFn fn);
  /// Adds a finite-difference case; an operator may register several.
  OpBuilder &example(std::string params, std::string body, bool positive = false, int64_t int_range = 2);
  OpBuilder &alias(std::string name);
  /// Marks grad.start_checkpoint / grad.end_checkpoint (see transform/Remat.h).
  OpBuilder &checkpoint_marker(CheckpointMarker marker);
  OpBuilder &flops(FlopsFn fn);
  /// See OpDef::fuses_epilogue and OpDef::fuses_producers.
  OpBuilder &fuses_epilogue();
  OpBuilder &fuses_producers();
  /// Takes fused producers of the arguments `reads` gives a nonzero count,
  /// each read that many times per element at most.
  OpBuilder &fuses_producers(ProducerReadsFn reads);
  /// Arguments [0, count) are `fn` values; `fn` derives argument 0's parameter types.
  OpBuilder &takes_fn(FnParamsFn fn, int count = 1);
  /// Lowers to a time loop of kernels instead of one kernel.
  OpBuilder &lower_loop(LoopLoweringFn fn);

private:
  OpRegistry &reg_;
  OpDef &def_;
};

class OpRegistry {
public:
  /// The registry with every family registered (built on first use).
  static const OpRegistry &global();
  const OpDef *find(const std::string &name) const;
  /// Every operator, sorted by name (aliases not repeated).
  std::vector<const OpDef *> all() const;
  OpBuilder add(const std::string &name);
  /// A hand-scheduled kernel of operator `name` for one target kind, used
  /// there instead of its generic kernel. The targets register theirs
  /// (op/cpu, op/cuda); an operator's definition never names a target.
  void strategy(const std::string &name, TargetKind target, KernelFn fn);

private:
  std::vector<std::unique_ptr<OpDef>> defs_;
  std::map<std::string, OpDef *> by_name_;
  friend class OpBuilder;
};


template <class T> T call_attrs(const Expr &call) {
  if (!call.op->attrs_type || *call.op->attrs_type != typeid(T))
    attrs_decode_failure(call, typeid(T), nullptr);
  if (const T *stored = call.decoded.get<T>())
    return *stored;
  // A call built before type inference, or copied onto operands of other types.
  AttrError error;
  std::optional<T> typed = decode_attrs<T>(call.attrs, arg_types(call), 0, &error);
  if (!typed)
    attrs_decode_failure(call, typeid(T), &error);
  return *typed;
}

template <class T> T RelationCtx::attrs_as() const {
  if (!op.attrs_type || *op.attrs_type != typeid(T))
    internal_error("type inference", op.name + " read attributes as a struct it did not register");
  if (const T *stored = decoded ? decoded->get<T>() : nullptr)
    return *stored;
  std::optional<T> typed = decode_attrs<T>(attrs, args, first_arg, nullptr);
  if (!typed) // check_call decoded them before the relation ran
    internal_error("type inference", op.name + ": attributes failed to decode in the relation");
  return *typed;
}

/// The Vars that the `fn` arguments of `call` read from around them, in
/// first-use order without repeats: inputs of the call beside its arguments.
std::vector<ExprPtr> captured_inputs(const Expr &call);

/// The operation count of `e`: each call in it, fused operands included, as
/// each operator's record states it (a scan's counts its body's, once per step).
int64_t expr_flops(const Expr &e);
/// The operation count of every binding of `fn` (expr_flops).
int64_t function_flops(const Function &fn);

// The operator families (lib/op/*.cpp). Registry.cpp calls each once.
void register_elementwise_ops(OpRegistry &reg);
void register_reduce_ops(OpRegistry &reg);
void register_shape_ops(OpRegistry &reg);
void register_linear_ops(OpRegistry &reg);
void register_softmax_ops(OpRegistry &reg);
void register_loss_ops(OpRegistry &reg);
void register_conv_ops(OpRegistry &reg);
void register_pool_ops(OpRegistry &reg);
void register_norm_ops(OpRegistry &reg);
void register_activation_ops(OpRegistry &reg);
void register_random_ops(OpRegistry &reg);
void register_optim_ops(OpRegistry &reg);
void register_scan_ops(OpRegistry &reg);
void register_recurrence_ops(OpRegistry &reg);
void register_grad_ops(OpRegistry &reg);
void register_slice_ops(OpRegistry &reg);
void register_index_ops(OpRegistry &reg);
void register_annotation_ops(OpRegistry &reg);

} // namespace gradc
