//===- test_verify.cpp - the verifiers catch what passes must not produce --===//
//
// Each case breaks one invariant of a correct module (built by the real
// pipeline) and checks that the verifier names it.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Pipeline.h"
#include "gradc/loops/Functor.h"
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Verify.h"
#include "gradc/transform/Verify.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <cstdint>
#include <sstream>

using namespace gradc;
using Catch::Matchers::Contains;

namespace {

const char *const kModel = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(4, 6), float32], %w: Tensor[(3, 6), float32]) {
  %0 = nn.dense(%x, %w);
  %1 = tanh(%0);
  %2 = %1 * 2f;
  sum(%2)
}
)";

CompiledModule compile(const std::string &text, bool grad = true) {
  auto src = std::make_shared<SourceFile>("v.relay", text);
  std::ostringstream errors;
  DiagEngine diag(src, errors);
  PipelineOptions opts;
  if (grad)
    opts.grad_fn = "main";
  opts.verify_each = true;
  Dumper dumper(opts, errors);
  return compile_to_loops(src, opts, diag, dumper);
}

std::shared_ptr<Function> main_copy(const CompiledModule &c) { return std::make_shared<Function>(*c.module.functions[0]); }

} // namespace

TEST_CASE("verify(Function): a correct pipeline output passes in every form", "[verify]") {
  CompiledModule c = compile(kModel);
  for (const FunctionPtr &fn : c.module.functions)
    CHECK_NOTHROW(verify(*fn, IRForm::Fused, "test"));
}

TEST_CASE("verify(Function): use before definition", "[verify]") {
  auto fn = main_copy(compile(kModel, false));
  REQUIRE(fn->body.bindings.size() >= 2);
  std::swap(fn->body.bindings[0], fn->body.bindings[1]);
  CHECK_THROWS_WITH(verify(*fn, IRForm::Fused, "a broken pass"),
                    Contains("after a broken pass") && Contains("is used where it is not defined"));
}

TEST_CASE("verify(Function): a Var bound twice", "[verify]") {
  auto fn = main_copy(compile(kModel, false));
  fn->body.bindings.push_back(fn->body.bindings[0]);
  CHECK_THROWS_WITH(verify(*fn, IRForm::Fused, "p"), Contains("is defined twice"));
}

TEST_CASE("verify(Function): two bindings of one value node", "[verify]") {
  // A recomputation must be a node of its own: fusion counts uses per node.
  auto fn = main_copy(compile(kModel, false));
  Binding copy = fn->body.bindings[0];
  copy.var = make_var(copy.var->name + "_remat", {}, {}, copy.var->type);
  fn->body.bindings.insert(fn->body.bindings.begin() + 1, copy);
  CHECK_THROWS_WITH(verify(*fn, IRForm::Fused, "p"), Contains("bound to the same node as another binding"));
}

TEST_CASE("verify(Function): a binding whose type disagrees with its relation", "[verify]") {
  auto fn = main_copy(compile(kModel, false));
  Binding &b = fn->body.bindings[0];
  REQUIRE(b.value->kind == ExprKind::Call);
  Type wrong = Type::tensor({7}, DType::Float32);
  auto value = std::make_shared<Expr>(*b.value);
  value->type = wrong;
  b.value = value;
  b.var = make_var(b.var->name, {}, {}, wrong);
  CHECK_THROWS_WITH(verify(*fn, IRForm::Typed, "p"), Contains("its relation gives"));
}

TEST_CASE("verify(Function): ANF operands must be atoms", "[verify]") {
  auto fn = main_copy(compile(kModel, false));
  // tanh(nn.dense(...)) nested: fine once fused, not in ANF.
  bool nested = false;
  for (const Binding &b : fn->body.bindings)
    for (const ExprPtr &a : b.value->args)
      nested |= !a->is_atom();
  REQUIRE(nested);
  CHECK_NOTHROW(verify(*fn, IRForm::Fused, "p"));
  CHECK_THROWS_WITH(verify(*fn, IRForm::ANF, "p"), Contains("is not an atom"));
}

namespace {

LoweredFunction lowered_main(const CompiledModule &c) { return c.lowered.functions[0]; }

Kernel &first_kernel_with_loop(LoweredFunction &fn) {
  for (Kernel &k : fn.kernels)
    if (contains_loop(k.body))
      return k;
  FAIL("no kernel with a loop");
  return fn.kernels[0];
}

/// The buffer a kernel writes (its first non-input buffer).
BufferPtr written(const Kernel &k) {
  for (const BufferPtr &b : k.buffers)
    if (b->scope != BufferScope::Input)
      return b;
  FAIL("kernel " << k.name << " writes nothing");
  return nullptr;
}

} // namespace

TEST_CASE("verify(LoweredFunction): the pipeline's output passes", "[verify]") {
  CompiledModule c = compile(kModel);
  for (const LoweredFunction &fn : c.lowered.functions)
    CHECK_NOTHROW(verify(fn, {true, true}, "test"));
}

TEST_CASE("verify(LoweredFunction): a store out of bounds", "[verify]") {
  LoweredFunction fn = lowered_main(compile(kModel, false));
  Kernel &k = first_kernel_with_loop(fn);
  BufferPtr out = written(k);
  auto i = std::make_shared<LVar>(LVar{"i"});
  k.body = for_loop(i, out->numel() + 1, ForKind::Serial, store(out, var_ref(i), float_imm(0, out->dtype)));
  CHECK_THROWS_WITH(verify(fn, {}, "p"), Contains("at indices 0.." + std::to_string(out->numel())));
}

TEST_CASE("verify(LoweredFunction): an if guard proves a GPU-style index in bounds", "[verify]") {
  LoweredFunction fn = lowered_main(compile(kModel, false));
  Kernel &k = first_kernel_with_loop(fn);
  BufferPtr out = written(k);
  auto i = std::make_shared<LVar>(LVar{"i"});
  StmtPtr guarded = if_then(compare(CompareOp::LT, var_ref(i), int_imm(out->numel())),
                            store(out, var_ref(i), float_imm(0, out->dtype)));
  k.body = for_loop(i, out->numel() + 100, ForKind::Serial, guarded);
  CHECK_NOTHROW(verify(fn, {}, "p"));
}

TEST_CASE("verify(LoweredFunction): a branch no value of its variable takes is never checked", "[verify]") {
  // for p in [0, 1): if (p < 0) out[p - 100] = 0. The branch never runs (a product's loop over
  // its full panels where it has none, kept so that products share code: loops/Templates.h).
  LoweredFunction fn = lowered_main(compile(kModel, false));
  Kernel &k = first_kernel_with_loop(fn);
  BufferPtr out = written(k);
  auto p = std::make_shared<LVar>(LVar{"p"});
  LExprPtr at = binary(BinaryOp::Sub, var_ref(p), int_imm(100));
  k.body = for_loop(p, 1, ForKind::Serial,
                    if_then(compare(CompareOp::LT, var_ref(p), int_imm(0)), store(out, at, float_imm(0, out->dtype))));
  CHECK_NOTHROW(verify(fn, {}, "p"));
  // The same store where the branch can run is out of bounds.
  k.body = for_loop(p, 1, ForKind::Serial,
                    if_then(compare(CompareOp::LT, var_ref(p), int_imm(1)), store(out, at, float_imm(0, out->dtype))));
  CHECK_THROWS_WITH(verify(fn, {}, "p"), Contains("at indices -100..-100"));
}

TEST_CASE("verify(LoweredFunction): a loop variable used outside its loop", "[verify]") {
  LoweredFunction fn = lowered_main(compile(kModel, false));
  Kernel &k = first_kernel_with_loop(fn);
  BufferPtr out = written(k);
  auto i = std::make_shared<LVar>(LVar{"i"});
  k.body = store(out, var_ref(i), float_imm(0, out->dtype));
  CHECK_THROWS_WITH(verify(fn, {}, "p"), Contains("used outside its loop"));
}

TEST_CASE("verify(LoweredFunction): unscheduled loops after scheduling", "[verify]") {
  LoweredFunction fn = lowered_main(compile(kModel, false));
  Kernel &k = first_kernel_with_loop(fn);
  BufferPtr out = written(k);
  auto i = std::make_shared<LVar>(LVar{"i"});
  k.body = for_loop(i, out->numel(), ForKind::Spatial, store(out, var_ref(i), float_imm(0, out->dtype)));
  CHECK_NOTHROW(verify(fn, {false, false}, "lowering"));
  CHECK_THROWS_WITH(verify(fn, {true, false}, "schedule"), Contains("still spatial after scheduling"));
}

TEST_CASE("verify(LoweredFunction): arena buffers that overlap while live", "[verify]") {
  const char *two = R"(#[version = "0.0.5"]
def @main(%x: Tensor[(64, 64), float32]) {
  %0 = nn.softmax(%x);
  %1 = nn.softmax(%0);
  %2 = nn.softmax(%1);
  nn.softmax(%2)
}
)";
  LoweredFunction fn = lowered_main(compile(two, false));
  REQUIRE(fn.arena.size() >= 1);
  CHECK_NOTHROW(verify(fn, {true, true}, "memory planning"));
  // Put every arena buffer at offset 0: two live together now share bytes.
  REQUIRE(fn.arena.size() >= 2);
  for (const BufferPtr &b : fn.arena)
    b->offset = 0;
  CHECK_THROWS_WITH(verify(fn, {true, true}, "memory planning"), Contains("share bytes while both are live"));
}

TEST_CASE("tensor-IR constructors check their invariants", "[verify]") {
  CHECK_THROWS_AS(Type::tensor({-1, 2}, DType::Float32), InternalError);
  // The limits are not the constructor's: a relation may build an over-limit
  // type, which check_call reports at the call (test/regress/inferred_type_over_limits).
  Type huge = Type::tensor({int64_t(1) << 40, int64_t(1) << 40}, DType::Float32);
  CHECK(type_problem(Type::tuple({Type::tensor({2}, DType::Float32), huge})));
  CHECK(type_problem(Type::tensor(Shape(65, 1), DType::Float32)));
  CHECK_FALSE(type_problem(Type::tensor({0, int64_t(1) << 62, int64_t(1) << 62}, DType::Float32)));
  CHECK_FALSE(type_problem(Type::tensor(Shape(64, 1), DType::Float32)));
  CHECK_THROWS_AS(make_call(nullptr, {}, {}), InternalError);
  // Regression (fuzzer finding F1): the integer view of a float constant saturates instead of
  // converting out of range (undefined behaviour, reported by UBSan).
  CHECK(make_constant(1e30, DType::Float32)->ivalue == INT64_MAX);
  CHECK(make_constant(-INFINITY, DType::Float32)->ivalue == INT64_MIN);
  CHECK(make_constant(NAN, DType::Float64)->ivalue == 0);
  CHECK(make_constant(-3.5, DType::Float64)->ivalue == -3);
}

namespace {

const char *const kSgd = R"(#[version = "0.0.5"]
def @main(%w: Tensor[(4, 6), float32], %g: Tensor[(4, 6), float32], inplace_indices=[0]) {
  %w - 0.5f * %g
}
)";

/// The one kernel of kSgd's lowering, which writes w in place.
Kernel &update_kernel(CompiledModule &c) {
  LoweredFunction &fn = c.lowered.functions.at(0);
  REQUIRE(fn.inputs.at(0)->scope == BufferScope::InOut);
  REQUIRE(fn.kernels.size() == 1);
  return fn.kernels[0];
}

/// Rewrites every load of `buf` in `body` with `index(old index)`.
StmtPtr reindex_loads(const StmtPtr &body, const Buffer &buf, std::function<LExprPtr(const LExprPtr &)> index) {
  class Reindex : public LoopMutator {
  public:
    const Buffer &buf;
    std::function<LExprPtr(const LExprPtr &)> index;
    Reindex(const Buffer &b, std::function<LExprPtr(const LExprPtr &)> f) : buf(b), index(std::move(f)) {}
    using LoopMutator::mutate;

  protected:
    LExprPtr on_load(const LExprPtr &e) override {
      return e->buffer.get() == &buf ? load(e->buffer, index(mutate(e->operands[0]))) : LoopMutator::on_load(e);
    }
  } r(buf, std::move(index));
  return r.mutate(body);
}

} // namespace

TEST_CASE("verify(LoweredFunction): a parameter updated in place, read at another element", "[verify]") {
  CompiledModule c = compile(kSgd, false);
  LoweredFunction &fn = c.lowered.functions[0];
  CHECK_NOTHROW(verify(fn, {true, true}, "test"));
  // w[i] = w[23 - i] - ...: the write at i destroys what a later i reads.
  Kernel &k = update_kernel(c);
  k.body = reindex_loads(k.body, *fn.inputs[0], [](const LExprPtr &i) { return binary(BinaryOp::Sub, int_imm(23), i); });
  CHECK_THROWS_WITH(verify(fn, {true, true}, "a broken pass"),
                    Contains("parameter w is updated in place") && Contains("not of the element its store writes"));
}

TEST_CASE("verify(LoweredFunction): a kernel after the update reads the new value", "[verify]") {
  CompiledModule c = compile(kSgd, false);
  LoweredFunction &fn = c.lowered.functions[0];
  Kernel reader = update_kernel(c);
  reader.name = "reads_new_w";
  // The same kernel again writes g from w: it reads the new w, as an
  // optimizer's parameter update reads the state updated before it.
  reader.body = [&] {
    class ToG : public LoopMutator {
    public:
      const BufferPtr &w, &g;
      ToG(const BufferPtr &a, const BufferPtr &b) : w(a), g(b) {}
      using LoopMutator::mutate;

    protected:
      StmtPtr on_store(const StmtPtr &s) override {
        return s->buffer == w ? store(g, mutate(s->index), mutate(s->value)) : LoopMutator::on_store(s);
      }
    } to_g(fn.inputs[0], fn.outputs.empty() ? fn.inputs[1] : fn.outputs[0]);
    return to_g.mutate(reader.body);
  }();
  fn.inputs[1]->scope = BufferScope::Arena; // let it be written, for the test
  reader.buffers = touched_buffers(reader.body);
  fn.kernels.push_back(reader);
  CHECK_NOTHROW(verify(fn, {true, false}, "a pass"));
}

TEST_CASE("verify(LoweredFunction): a parameter updated in place twice", "[verify]") {
  CompiledModule c = compile(kSgd, false);
  LoweredFunction &fn = c.lowered.functions[0];
  fn.kernels.push_back(update_kernel(c));
  CHECK_THROWS_WITH(verify(fn, {true, true}, "a broken pass"), Contains("writes w after kernel"));
}

TEST_CASE("verify(LoweredFunction): an in-place update read at its element written another way", "[verify]") {
  CompiledModule c = compile(kSgd, false);
  LoweredFunction &fn = c.lowered.functions[0];
  // w[(i div 6) * 6 + i mod 6]: element i, as a kernel that splits a flat
  // index into a shape's indices and joins them again reads it.
  Kernel &k = update_kernel(c);
  StmtPtr original = k.body;
  k.body = reindex_loads(original, *fn.inputs[0], [](const LExprPtr &i) {
    return binary(BinaryOp::Add, binary(BinaryOp::Mul, binary(BinaryOp::FloorDiv, i, int_imm(6)), int_imm(6)),
                  binary(BinaryOp::FloorMod, i, int_imm(6)));
  });
  CHECK_NOTHROW(verify(fn, {true, true}, "test"));
  // ... and (i div 6) * 6 + i mod 3 is another element.
  k.body = reindex_loads(original, *fn.inputs[0], [](const LExprPtr &i) {
    return binary(BinaryOp::Add, binary(BinaryOp::Mul, binary(BinaryOp::FloorDiv, i, int_imm(6)), int_imm(6)),
                  binary(BinaryOp::FloorMod, i, int_imm(3)));
  });
  k.buffers = touched_buffers(k.body);
  CHECK_THROWS_WITH(verify(fn, {true, true}, "a broken pass"), Contains("not of the element its store writes"));
}

TEST_CASE("verify(LoweredFunction): an in-place update in the last iteration of a loop its index does not read",
          "[verify]") {
  // A blocked product writes its results in the last K block: for (kb < 3)
  // { if (kb == 2) { the update } } writes each element once, after every
  // read of the old values; kb == 0 would let kb = 1, 2 read new ones.
  auto wrapped = [](int64_t when) {
    CompiledModule c = compile(kSgd, false);
    LoweredFunction &fn = c.lowered.functions[0];
    Kernel &k = update_kernel(c);
    auto kb = std::make_shared<LVar>(LVar{"kb"});
    StmtPtr body = when < 0 ? k.body : if_then(compare(CompareOp::EQ, var_ref(kb), int_imm(when)), k.body, seq({}));
    k.body = for_loop(kb, 3, ForKind::Serial, body);
    return in_place_violation(fn, *fn.inputs[0]);
  };
  CHECK(wrapped(2) == "");
  CHECK_THAT(wrapped(0), Contains("repeats under loop kb"));
  CHECK_THAT(wrapped(-1), Contains("repeats under loop kb"));
}
