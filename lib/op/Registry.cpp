//===- Registry.cpp - the operator registry and registration builder ------===//
//
// Builds the global registry once, from every operator family, then the
// targets' strategies (cpu/, cuda/). Adding an operator means adding it to a
// family file; adding a family means one line in OpRegistry::global().
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Registry.h"
#include "cpu/Cpu.h"
#include "cuda/Cuda.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Ops.h"
#include "gradc/ir/Functor.h"

#include <algorithm>

namespace gradc {

const char *attr_kind_name(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int:
    return "int";
  case AttrKind::Float:
    return "float";
  case AttrKind::Bool:
    return "bool";
  case AttrKind::String:
    return "string";
  case AttrKind::IntList:
    return "list of int";
  case AttrKind::OptInt:
    return "int or None";
  case AttrKind::OptIntList:
    return "None, int or list of int";
  case AttrKind::DTypeName:
    return "dtype";
  case AttrKind::Shape:
    return "shape";
  case AttrKind::IntPairs:
    return "list of [int, int]";
  case AttrKind::IntOrList:
    return "int or list of int";
  }
  return "?";
}

Type RelationCtx::fail(const std::string &message) {
  if (error.empty())
    error = op.name + ": " + message;
  return Type::unknown();
}

Type RelationCtx::fail_attr(const std::string &name, const std::string &message) {
  if (error.empty())
    if (const AttrValue *v = attrs.find(name))
      error_span = v->span;
  return fail(message);
}

const Type *RelationCtx::tensor(size_t i) {
  if (i >= args.size() || !args[i].is_tensor()) {
    size_t n = first_arg + i; // the argument's index in the call
    std::string which = n < op.args.size() ? op.args[n].name : "";
    fail("argument " + std::to_string(n + 1) + (which.empty() ? "" : " (" + which + ")") + " must be a tensor, found " +
         (i < args.size() ? args[i].str() : "nothing"));
    return nullptr;
  }
  return &args[i];
}

const AttrSpec *OpDef::find_attr(const std::string &attr_name) const {
  for (const AttrSpec &a : attrs)
    if (a.name == attr_name)
      return &a;
  return nullptr;
}

OpBuilder &OpBuilder::notes(std::string text) {
  def_.notes = std::move(text);
  return *this;
}

OpBuilder &OpBuilder::describe(std::string summary) {
  def_.summary = std::move(summary);
  return *this;
}
OpBuilder &OpBuilder::arg(std::string name, std::string type_info, std::string doc) {
  def_.args.push_back({std::move(name), std::move(type_info), std::move(doc)});
  def_.min_inputs = def_.max_inputs = int(def_.args.size());
  return *this;
}
OpBuilder &OpBuilder::arity(int min, int max) {
  def_.min_inputs = min;
  def_.max_inputs = max;
  return *this;
}
OpBuilder &OpBuilder::attr(std::string name, AttrKind kind, AttrValue default_value, std::string doc) {
  def_.attrs.push_back({std::move(name), kind, std::move(default_value), std::move(doc), false});
  return *this;
}
OpBuilder &OpBuilder::required_attr(std::string name, AttrKind kind, std::string doc) {
  def_.attrs.push_back({std::move(name), kind, AttrValue::none(), std::move(doc), true});
  return *this;
}
OpBuilder &OpBuilder::support_level(int level) {
  def_.support_level = level;
  return *this;
}
OpBuilder &OpBuilder::relation(std::string name, TypeRelation rel) {
  def_.relation_name = std::move(name);
  def_.relation = rel;
  return *this;
}
OpBuilder &OpBuilder::gradient(GradientFn fn) {
  def_.gradient = fn;
  return *this;
}
OpBuilder &OpBuilder::no_gradient() {
  def_.no_gradient = true;
  return *this;
}
OpBuilder &OpBuilder::replicates() {
  def_.replicates = true;
  return *this;
}
OpBuilder &OpBuilder::element(ElementFn fn) {
  def_.element = fn;
  return *this;
}
OpBuilder &OpBuilder::element(ElementFn fn, bool (*when)(const Expr &call)) {
  def_.element = fn;
  def_.element_when = when;
  return *this;
}
OpBuilder &OpBuilder::kernel(KernelFn fn) {
  def_.kernel = fn;
  return *this;
}

OpBuilder &OpBuilder::pointwise(PointwiseFn fn) {
  def_.pointwise = fn;
  def_.kernel = pointwise_kernel;
  def_.fuses_producers = true;
  return *this;
}

namespace {

/// The relation of a composite: its composition built on placeholders of the
/// argument types; the first failing part's message is the call's error.
Type decomposed_relation(RelationCtx &ctx) {
  std::vector<Binding> scratch;
  std::string error;
  Builder b(scratch, {}, [&](Span, const std::string &msg) {
    if (error.empty())
      error = msg;
  });
  std::vector<ExprPtr> args;
  for (const Type &t : ctx.args)
    args.push_back(make_var("arg", {}, {}, t));
  ExprPtr result = ctx.op.decompose(b, args, ctx.attrs);
  if (!error.empty() || !result || result->type.has_unknown())
    return ctx.fail(error.empty() ? "its composition is ill-typed" : error);
  return result->type;
}

} // namespace

OpBuilder &OpBuilder::project(ProjectFn fn) {
  def_.project = fn;
  return *this;
}

OpBuilder &OpBuilder::decompose(DecomposeFn fn) {
  def_.decompose = fn;
  if (!def_.relation) {
    def_.relation_name = "Decomposed";
    def_.relation = decomposed_relation;
  }
  return *this;
}
void OpRegistry::strategy(const std::string &name, TargetKind target, KernelFn fn) {
  auto it = by_name_.find(name);
  GRADC_CHECK(it != by_name_.end(), "registry", "a strategy for '" + name + "', which is not registered");
  OpDef &d = *it->second;
  GRADC_CHECK(d.kernel, "registry", "a strategy for '" + name + "', which has no generic kernel");
  for (const auto &[kind, f] : d.strategies)
    GRADC_CHECK(kind != target, "registry", "two strategies for '" + name + "' on one target");
  d.strategies.emplace_back(target, fn);
}

KernelFn OpDef::kernel_for(TargetKind target) const {
  for (const auto &[kind, fn] : strategies)
    if (kind == target)
      return fn;
  return kernel;
}
OpBuilder &OpBuilder::example(std::string params, std::string body, bool positive, int64_t int_range) {
  def_.examples.push_back(GradExample{std::move(params), std::move(body), positive, int_range});
  return *this;
}

OpBuilder &OpBuilder::checkpoint_marker(CheckpointMarker marker) {
  def_.checkpoint = marker;
  return *this;
}

OpBuilder &OpBuilder::flops(FlopsFn fn) {
  def_.flops_fn = fn;
  return *this;
}

OpBuilder &OpBuilder::fuses_epilogue() {
  def_.fuses_epilogue = true;
  return *this;
}

OpBuilder &OpBuilder::fuses_producers() {
  def_.fuses_producers = true;
  return *this;
}

OpBuilder &OpBuilder::fuses_producers(ProducerReadsFn reads) {
  def_.fuses_producers = true;
  def_.producer_reads_fn = reads;
  return *this;
}

int64_t OpDef::producer_reads(const Expr &call, size_t arg) const {
  if (!fuses_producers)
    return 0;
  return producer_reads_fn ? producer_reads_fn(call, arg) : 1;
}

int64_t expr_flops(const Expr &e) {
  int64_t flops = e.kind == ExprKind::Call ? e.op->flops(e) : 0;
  if (e.kind == ExprKind::Call || e.kind == ExprKind::Tuple)
    for (const ExprPtr &a : e.args) // a fused operand's own work
      flops += expr_flops(*a);
  return flops;
}

int64_t function_flops(const Function &fn) {
  int64_t flops = 0;
  for (const Binding &b : fn.body.bindings)
    flops += expr_flops(*b.value);
  return flops;
}

OpBuilder &OpBuilder::takes_fn(FnParamsFn fn, int count) {
  def_.fn_params = fn;
  def_.fn_args = count;
  return *this;
}

std::vector<ExprPtr> captured_inputs(const Expr &call) {
  std::vector<ExprPtr> out;
  for (size_t i = 0; call.kind == ExprKind::Call && call.op->is_fn_arg(i) && i < call.args.size(); ++i)
    for (const ExprPtr &v : free_vars(call.args[i]))
      if (std::find(out.begin(), out.end(), v) == out.end())
        out.push_back(v);
  return out;
}

OpBuilder &OpBuilder::lower_loop(LoopLoweringFn fn) {
  def_.lower_loop = fn;
  return *this;
}

int64_t OpDef::flops(const Expr &call) const {
  if (flops_fn)
    return flops_fn(call);
  if (!call.type.is_tensor())
    return 0;
  int64_t out = num_elements(call.type.shape);
  if (!injective(call) && !call.args.empty() && call.args[0]->type.is_tensor())
    return std::max(out, num_elements(call.args[0]->type.shape));
  return out;
}

OpBuilder &OpBuilder::alias(std::string name) {
  GRADC_CHECK(!reg_.by_name_.count(name), "registry", "alias '" + name + "' registered twice");
  reg_.by_name_[name] = &def_;
  def_.aliases.push_back(std::move(name));
  return *this;
}

const OpRegistry &OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    register_elementwise_ops(r);
    register_reduce_ops(r);
    register_shape_ops(r);
    register_slice_ops(r);
    register_index_ops(r);
    register_annotation_ops(r);
    register_linear_ops(r);
    register_softmax_ops(r);
    register_loss_ops(r);
    register_conv_ops(r);
    register_pool_ops(r);
    register_norm_ops(r);
    register_activation_ops(r);
    register_random_ops(r);
    register_optim_ops(r);
    register_scan_ops(r);
    register_recurrence_ops(r);
    register_grad_ops(r);
    register_cpu_strategies(r);
    register_cuda_strategies(r);
    return r;
  }();
  return registry;
}

const OpDef *OpRegistry::find(const std::string &name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<const OpDef *> OpRegistry::all() const {
  std::vector<const OpDef *> out;
  for (const auto &d : defs_)
    out.push_back(d.get());
  std::sort(out.begin(), out.end(), [](auto *a, auto *b) { return a->name < b->name; });
  return out;
}

OpBuilder OpRegistry::add(const std::string &name) {
  GRADC_CHECK(!by_name_.count(name), "registry", "operator '" + name + "' registered twice");
  defs_.push_back(std::make_unique<OpDef>());
  OpDef &d = *defs_.back();
  d.name = name;
  by_name_[name] = &d;
  return OpBuilder(*this, d);
}

const OpDef *OpRef::get() const {
  const OpDef *d = def_.load(std::memory_order_acquire);
  if (!d) {
    d = OpRegistry::global().find(name_);
    GRADC_CHECK(d, "registry", std::string("the handle ops::") + name_ + " names no registered operator");
    def_.store(d, std::memory_order_release);
  }
  return d;
}

std::vector<const OpRef *> all_op_refs() {
  return {
#define GRADC_OP(handle, name) &ops::handle,
#include "gradc/op/Ops.def"
#undef GRADC_OP
  };
}

} // namespace gradc
