//===- test_memory.cpp - the memory model plans what lowering plans --------===//
//
// transform/MemoryModel.h composes a fused function's workspace from its
// bindings' footprints. Given the footprints of a lowering it must give that
// lowering's plan (the pipeline checks this under --verify-each on every
// model of the test suite); here, more: a function rewritten by
// rematerialization, estimated from the footprints of the function it was
// rewritten from, plans what its own lowering plans, on every sample, for
// CPU and GPU code. And placement itself against a brute-force check.
//
//===----------------------------------------------------------------------===//
#include "PipelineHelpers.h"
#include "gradc/loops/InPlace.h"
#include "gradc/loops/Memory.h"
#include "gradc/loops/Verify.h"
#include "gradc/transform/MemoryModel.h"
#include "gradc/transform/Remat.h"

#include <catch2/catch.hpp>

#include <functional>
#include <random>

using namespace gradc;
using namespace gradc::testing;
using Catch::Matchers::Contains;

namespace {

/// A remat set on a fused adjoint: every Call in the first half of the body
/// that the second half reads is dropped; the first half reads originals.
RematSet drop_first_half(const Function &fn) {
  size_t n = fn.body.bindings.size(), half = n / 2;
  RematSet set{std::vector<bool>(n), std::vector<bool>(n)};
  for (size_t i = 0; i < half; ++i) {
    set.reads_original[i] = true;
    set.dropped[i] = fn.body.bindings[i].value->kind == ExprKind::Call;
  }
  return set;
}

} // namespace

TEST_CASE("memory model: a rematerialized function is estimated from its original's footprints", "[memory]") {
  for (const char *sample : {"mlp.relay", "cnn.relay", "transformer.relay", "rnn.relay", "lstm.relay"})
    for (TargetKind kind : {TargetKind::CPU, TargetKind::CUDA}) {
      CAPTURE(sample, kind == TargetKind::CUDA);
      CompiledModule c = compile_sample(sample, kind);
      CodegenOptions cg;
      cg.target = kind;
      cg.gpu_arch = "sm_90";
      Target target = describe_target(cg);
      for (size_t f = 0; f < c.module.functions.size(); ++f) {
        const Function &fn = *c.module.functions[f];
        const LoweredFunction &lowered = c.lowered.functions[f];
        std::vector<Footprint> footprints = binding_footprints(fn, lowered);
        auto of = [&](size_t i) -> const Footprint & { return footprints.at(i); };
        CHECK(estimate_workspace(fn, of) == lowered.workspace_bytes);

        RematStats stats;
        std::vector<size_t> source;
        FunctionPtr rewritten = rematerialize(fn, drop_first_half(fn), stats, &source);
        REQUIRE(source.size() == rewritten->body.bindings.size());
        int64_t estimate =
            estimate_workspace(*rewritten, [&](size_t i) -> const Footprint & { return footprints.at(source.at(i)); });
        CHECK(estimate == lower_and_plan(rewritten, target).workspace_bytes);
        if (fn.name == "main_adjoint")
          CHECK(stats.recomputed > 0);
      }
    }
}

TEST_CASE("placement: no two overlapping lifetimes share a byte, and the peak is the end of the last", "[memory]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::vector<Lifetime> lifetimes;
    size_t n = 1 + rng() % 30, kernels = 1 + rng() % 20;
    for (size_t i = 0; i < n; ++i) {
      size_t a = rng() % kernels, b = rng() % kernels;
      lifetimes.push_back({int64_t(rng() % 5000), std::min(a, b), std::max(a, b)});
    }
    Placement p = place(lifetimes);
    int64_t end = 0, most_live = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t size = arena_bytes(lifetimes[i].bytes);
      CHECK(p.offsets[i] % kBufferAlignment == 0);
      end = std::max(end, p.offsets[i] + size);
      for (size_t j = 0; j < i; ++j) {
        int64_t other = arena_bytes(lifetimes[j].bytes);
        bool overlap_time = !(lifetimes[i].last < lifetimes[j].first || lifetimes[j].last < lifetimes[i].first);
        bool overlap_bytes = p.offsets[i] < p.offsets[j] + other && p.offsets[j] < p.offsets[i] + size;
        CHECK_FALSE((overlap_time && overlap_bytes && size > 0 && other > 0));
      }
    }
    for (size_t k = 0; k < kernels; ++k) { // a lower bound: what is live at once
      int64_t live = 0;
      for (const Lifetime &l : lifetimes)
        if (l.first <= k && k <= l.last)
          live += arena_bytes(l.bytes);
      most_live = std::max(most_live, live);
    }
    CHECK(p.peak == end);
    CHECK(p.peak >= most_live);
  }
}

TEST_CASE("placement: where the largest first leaves a gap, the busiest kernel's buffers first close it", "[memory]") {
  // (bytes, first, last) in 64-byte units. Largest first: A at 0, C above
  // it, B at 0, and D, live beside both B and C, only above C: 12 units.
  // The most live at once is 10 (A and C during kernel 0), and a plan of
  // 10 exists: C and A below D's and B's kernels' buffers.
  constexpr int64_t U = kBufferAlignment;
  std::vector<Lifetime> lifetimes{{5 * U, 0, 0}, {4 * U, 2, 3}, {5 * U, 0, 1}, {2 * U, 1, 2}};
  Placement p = place(lifetimes);
  CHECK(p.peak == 10 * U);
  for (size_t i = 0; i < lifetimes.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      bool overlap_time = !(lifetimes[i].last < lifetimes[j].first || lifetimes[j].last < lifetimes[i].first);
      bool overlap_bytes =
          p.offsets[i] < p.offsets[j] + lifetimes[j].bytes && p.offsets[j] < p.offsets[i] + lifetimes[i].bytes;
      CHECK_FALSE((overlap_time && overlap_bytes));
    }
}

namespace {

BufferPtr arena_buffer(const std::string &name, int64_t n, DType dt = DType::Float32) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = dt;
  b->shape = {n};
  b->scope = BufferScope::Arena;
  return b;
}

/// for (i, 0, 8) { to[i] = value(i) }
StmtPtr elementwise(const BufferPtr &to, const std::function<LExprPtr(const LExprPtr &)> &value) {
  auto i = std::make_shared<LVar>(LVar{"i"});
  return for_loop(i, 8, ForKind::Serial, store(to, var_ref(i), value(var_ref(i))));
}

Kernel kernel_of(const std::string &name, StmtPtr body) {
  Kernel k;
  k.name = name;
  k.body = std::move(body);
  k.buffers = touched_buffers(k.body);
  return k;
}

} // namespace

TEST_CASE("overwrite rule: a kernel writes its result over an input only element by element", "[memory]") {
  BufferPtr a = arena_buffer("a", 8), b = arena_buffer("b", 8), c = arena_buffer("c", 8);
  LExprPtr two = float_imm(2, DType::Float32);
  auto twice = [&](const LExprPtr &i) { return binary(BinaryOp::Mul, load(a, i), two); };
  CHECK(overwrite_violation(kernel_of("k", elementwise(b, twice)), *b, *a) == "");
  // Another element of a: iteration i would read a[i + 1], and iteration
  // i + 1 a[i + 2]; but iteration 7 reads a[0], which b[0] has replaced.
  auto shifted = [&](const LExprPtr &i) {
    return load(a, binary(BinaryOp::FloorMod, binary(BinaryOp::Add, i, int_imm(1)), int_imm(8)));
  };
  CHECK_THAT(overwrite_violation(kernel_of("k", elementwise(b, shifted)), *b, *a), Contains("not of the element"));
  // a read outside the values stored into b (into c): it may come after b's store
  StmtPtr two_stores = seq({elementwise(b, twice), elementwise(c, twice)});
  CHECK_THAT(overwrite_violation(kernel_of("k", two_stores), *b, *a), Contains("not of the element"));
  // b stored under a loop its index does not read: an element written twice
  auto r = std::make_shared<LVar>(LVar{"r"});
  CHECK_THAT(overwrite_violation(kernel_of("k", for_loop(r, 3, ForKind::Serial, elementwise(b, twice))), *b, *a),
             Contains("repeats under loop r"));
  // b read back (an accumulation): its element may already be a's bytes' new value
  auto accumulate = [&](const LExprPtr &i) { return binary(BinaryOp::Add, load(b, i), load(a, i)); };
  CHECK_THAT(overwrite_violation(kernel_of("k", elementwise(b, accumulate)), *b, *a), Contains("reads b"));
  // a fill of b, then stores that read a (grad.max_pool2d_backward's zero
  // fill and scatter): the fill writes a's bytes before they are read
  auto zero = [&](const LExprPtr &) { return float_imm(0, DType::Float32); };
  CHECK_THAT(overwrite_violation(kernel_of("k", seq({elementwise(b, zero), elementwise(b, twice)})), *b, *a),
             Contains("does not read a"));
  // ... where every loop has one iteration, so both stores are at element 0
  // (regress/overwrite_fill_then_scatter.relay)
  BufferPtr one_a = arena_buffer("one_a", 1), one_b = arena_buffer("one_b", 1);
  StmtPtr fill = store(one_b, int_imm(0), float_imm(0, DType::Float32));
  StmtPtr copy = store(one_b, int_imm(0), load(one_a, int_imm(0)));
  CHECK_THAT(overwrite_violation(kernel_of("k", seq({fill, copy})), *one_b, *one_a), Contains("two stores"));
  // another size or dtype
  BufferPtr wide = arena_buffer("wide", 8, DType::Float64);
  CHECK_THAT(overwrite_violation(kernel_of("k", elementwise(b, twice)), *b, *wide), Contains("differ"));
}

TEST_CASE("memory plan: a result written over the input it reads last shares its bytes", "[memory]") {
  // k0: a = 1; k1: b = 2a (a read for the last time); k2: c = b + 1.
  auto plan = [](bool allowed) {
    LoweredFunction fn;
    fn.name = "f";
    BufferPtr a = arena_buffer("a", 8), b = arena_buffer("b", 8), c = arena_buffer("c", 8);
    LExprPtr one = float_imm(1, DType::Float32), two = float_imm(2, DType::Float32);
    fn.kernels.push_back(kernel_of("k0", elementwise(a, [&](const LExprPtr &) { return one; })));
    fn.kernels.push_back(
        kernel_of("k1", elementwise(b, [&](const LExprPtr &i) { return binary(BinaryOp::Mul, load(a, i), two); })));
    fn.kernels.push_back(
        kernel_of("k2", elementwise(c, [&](const LExprPtr &i) { return binary(BinaryOp::Add, load(b, i), one); })));
    if (allowed) {
      fn.kernels[1].overwrites.emplace_back(b, a);
      fn.kernels[2].overwrites.emplace_back(c, b);
    }
    fn.arena = {a, b, c};
    int64_t peak = plan_arena(fn);
    fn.workspace_bytes = peak;
    verify(fn, {true, true}, "test");
    return std::make_pair(peak, a->offset == b->offset && b->offset == c->offset);
  };
  CHECK(plan(false) == std::make_pair(int64_t(128), false)); // a and b live together at k1, b and c at k2
  CHECK(plan(true) == std::make_pair(int64_t(64), true));    // b written over a, c over b: one place
}
