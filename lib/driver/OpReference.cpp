//===- OpReference.cpp - what `gradc ops NAME` derives from an operator ---===//
//
// The reference page of an operator states its gradient as a formula and, for
// a composite, what it expands into. Neither is written by hand: both come
// from running the operator's own rule (FPrimalGradient, or the
// decomposition) on its first registry example, with the result's adjoint
// %grad and the result %out as free variables, and printing what the rule
// builds as one nested expression. The page can then never disagree with
// what the compiler does.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/OpReference.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Builder.h"
#include "gradc/support/Diagnostics.h"
#include "gradc/text/Parser.h"
#include "gradc/text/Printer.h"
#include "gradc/transform/Gradient.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/TypeInfer.h"

#include <sstream>

namespace gradc {
namespace {

/// Substitutes every binding into its uses: one nested expression per value.
class Nester : public ExprMutator {
public:
  explicit Nester(const std::vector<Binding> &bindings) {
    for (const Binding &b : bindings)
      remap(b.var, mutate(b.value));
  }
  ExprPtr nest(const ExprPtr &e) { return mutate(e); }
};

/// `e` as one line of the text format (bindings substituted).
std::string one_line(const ExprPtr &e) {
  auto fn = std::make_shared<Function>();
  fn->name = "f";
  fn->body.result = e;
  Module m{nullptr, {fn}};
  std::string text = print_module(m);
  size_t open = text.find("{\n"), close = text.rfind("\n}");
  std::string line = open == std::string::npos || close == std::string::npos ? text : text.substr(open + 2, close - open - 2);
  size_t first = line.find_first_not_of(' ');
  return first == std::string::npos ? line : line.substr(first);
}

/// The first call of `op` in the typed example (depth first, nested calls included).
const Expr *find_call(const ExprPtr &e, const OpDef &op) {
  if (e->kind == ExprKind::Call && e->op == &op)
    return e.get();
  for (const ExprPtr &a : e->args)
    if (const Expr *c = find_call(a, op))
      return c;
  return nullptr;
}

/// The typed call of `op` in its first example, or null.
std::optional<Module> typed_example(const OpDef &op, const Expr *&call) {
  if (op.examples.empty())
    return std::nullopt;
  const GradExample &ex = op.examples[0];
  auto file = std::make_shared<SourceFile>("example", std::string("#[version = \"0.0.5\"]\ndef @main(") + ex.params +
                                                          ") {\n  " + ex.body + "\n}\n");
  std::ostringstream quiet;
  DiagEngine diag(file, quiet);
  try {
    std::optional<Module> parsed = parse_module(file, diag);
    if (!parsed)
      return std::nullopt;
    Module typed = infer_types(*parsed, diag);
    diag.check();
    const Function &main = *typed.functions.at(0);
    call = nullptr;
    for (const Binding &b : main.body.bindings)
      if (!call)
        call = find_call(b.value, op);
    if (!call && main.body.result)
      call = find_call(main.body.result, op);
    return call ? std::optional<Module>(typed) : std::nullopt;
  } catch (const CompileError &) {
    return std::nullopt;
  }
}

} // namespace

std::vector<std::string> derived_gradient(const OpDef &op) {
  const Expr *call = nullptr;
  std::optional<Module> keep = typed_example(op, call);
  if (!keep || !op.gradient)
    return {};
  std::vector<Binding> bindings;
  Builder b(bindings);
  ExprPtr out = make_var("out", {}, {}, call->type), g = make_var("grad", {}, {}, call->type);
  std::ostringstream quiet;
  DiagEngine diag(std::make_shared<SourceFile>("example", ""), quiet);
  // A body (scan's) is differentiated as the gradient pass does, once in ANF.
  GradCtx ctx{b, *call, out, g,
              [&](const Function &f, bool keep_primal) { return build_vjp(*normalize(f), diag, keep_primal); }};
  Grads grads = op.gradient(ctx);
  std::vector<ExprPtr> captured = captured_inputs(*call);
  Nester nester(bindings);
  std::vector<std::string> lines;
  for (size_t i = 0; i < grads.size(); ++i) {
    std::string arg = i >= call->args.size()           ? "%" + captured.at(i - call->args.size())->name + " (captured)"
                      : i < op.args.size()             ? op.args[i].name
                      : op.args.empty()                ? "arg"
                                                       : op.args.back().name;
    lines.push_back("d" + arg + " = " + (grads[i] ? one_line(nester.nest(grads[i])) : "0 (none)"));
  }
  return lines;
}

std::string derived_decomposition(const OpDef &op) {
  const Expr *call = nullptr;
  std::optional<Module> keep = typed_example(op, call);
  if (!keep || !op.decompose)
    return "";
  std::vector<Binding> bindings;
  Builder b(bindings);
  ExprPtr result = op.decompose(b, call->args, call->attrs);
  return one_line(Nester(bindings).nest(result));
}

std::string example_text(const OpDef &op) {
  if (op.examples.empty())
    return "";
  return "def @main(" + op.examples[0].params + ") { " + op.examples[0].body + " }";
}

} // namespace gradc
