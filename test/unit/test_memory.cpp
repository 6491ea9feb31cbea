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
#include "gradc/transform/MemoryModel.h"
#include "gradc/transform/Remat.h"

#include <catch2/catch.hpp>

#include <random>

using namespace gradc;
using namespace gradc::testing;

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
