//===- test_gradients.cpp - finite-difference check of every gradient -----===//
//
// Generated from the registry: every operator with a gradient rule must carry
// an example; the example is compiled with --grad in float64 through the real
// pipeline and JIT, and each adjoint is compared with central differences of
// sum(main(...)), the seed the gradient pass uses for non-scalar results.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Pipeline.h"
#include "gradc/op/Registry.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

using namespace gradc;

namespace {

struct Compiled {
  CompiledModule module;
  std::unique_ptr<JitSession> jit;
};

Compiled compile_text(const std::string &text) {
  auto src = std::make_shared<SourceFile>("example.relay", text);
  std::ostringstream errors;
  DiagEngine diag(src, errors);
  PipelineOptions opts;
  opts.grad_fn = "main";
  Dumper dumper(opts, errors);
  Compiled c;
  try {
    c.module = compile_to_loops(src, opts, diag, dumper);
  } catch (CompileError &) {
    FAIL("compilation failed:\n" << text << "\n" << errors.str());
  }
  c.jit = JitSession::create(c.module.lowered, CodegenOptions{});
  return c;
}

/// Runs function `fn` on `inputs` (raw bytes, one per parameter); returns its outputs.
std::vector<std::vector<double>> call(Compiled &c, const std::string &fn, std::vector<std::string> &inputs) {
  const LoweredFunction *lf = nullptr;
  for (const LoweredFunction &f : c.module.lowered.functions)
    if (f.name == fn)
      lf = &f;
  REQUIRE(lf);
  std::vector<void *> in, out;
  std::vector<std::vector<double>> results;
  std::vector<std::unique_ptr<char[]>> storage;
  auto aligned = [&](int64_t bytes) {
    storage.emplace_back(new char[bytes + 128]);
    char *p = storage.back().get();
    return reinterpret_cast<char *>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
  };
  for (std::string &s : inputs) {
    char *p = aligned(int64_t(s.size()));
    memcpy(p, s.data(), s.size());
    in.push_back(p);
  }
  for (const BufferPtr &b : lf->outputs)
    out.push_back(aligned(b->bytes()));
  void *ws = aligned(lf->workspace_bytes);
  REQUIRE(c.jit->lookup(fn)(in.data(), out.data(), ws) == 0);
  for (size_t i = 0; i < lf->outputs.size(); ++i) {
    REQUIRE(lf->outputs[i]->dtype == DType::Float64);
    const double *p = static_cast<const double *>(out[i]);
    results.emplace_back(p, p + lf->outputs[i]->numel());
  }
  return results;
}

} // namespace

TEST_CASE("every differentiable operator passes a finite-difference check", "[gradient]") {
  std::mt19937_64 rng(42);
  for (const OpDef *op : OpRegistry::global().all()) {
    if (!op->gradient)
      continue;
    REQUIRE(!op->examples.empty()); // every gradient rule must be testable
    for (size_t e = 0; e < op->examples.size(); ++e)
      DYNAMIC_SECTION(op->name << " example " << e) {
        INFO("operator " << op->name);
        const GradExample &ex = op->examples[e];
        std::string text = "#[version = \"0.0.5\"]\ndef @main(" + ex.params + ") {\n  " + ex.body + "\n}\n";
        INFO(text);
        Compiled c = compile_text(text);
        const LoweredFunction &fwd = c.module.lowered.functions[0];

        std::vector<std::string> inputs;
        std::vector<size_t> float_params;
        for (size_t i = 0; i < fwd.inputs.size(); ++i) {
          const Buffer &b = *fwd.inputs[i];
          std::string bytes(size_t(b.bytes()), '\0');
          for (int64_t k = 0; k < b.numel(); ++k) {
            if (b.dtype == DType::Float64) {
              double mag = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
              double v = ex.positive || rng() % 2 ? mag : -mag;
              memcpy(&bytes[k * 8], &v, 8);
            } else if (b.dtype == DType::Int64) {
              int64_t v = int64_t(rng() % uint64_t(ex.int_range));
              memcpy(&bytes[k * 8], &v, 8);
            } else if (b.dtype == DType::Int32) {
              int32_t v = int32_t(rng() % uint64_t(ex.int_range));
              memcpy(&bytes[k * 4], &v, 4);
            } else if (b.dtype == DType::Bool) {
              bytes[k] = char(rng() % 2);
            } else {
              FAIL("examples use float64, int32, int64 and bool only");
            }
          }
          if (b.dtype == DType::Float64)
            float_params.push_back(i);
          inputs.push_back(bytes);
        }

        auto objective = [&](std::vector<std::string> &in) {
          double s = 0;
          auto outputs = call(c, "main", in);
          for (double v : outputs[0])
            s += v;
          return s;
        };
        auto adjoint = call(c, "main_adjoint", inputs);
        REQUIRE(adjoint.size() == 1 + float_params.size());
        const double h = 1e-6;
        for (size_t g = 0; g < float_params.size(); ++g) {
          size_t p = float_params[g];
          for (size_t k = 0; k < inputs[p].size() / 8; ++k) {
            double orig;
            memcpy(&orig, &inputs[p][k * 8], 8);
            double plus = orig + h, minus = orig - h;
            memcpy(&inputs[p][k * 8], &plus, 8);
            double fp = objective(inputs);
            memcpy(&inputs[p][k * 8], &minus, 8);
            double fm = objective(inputs);
            memcpy(&inputs[p][k * 8], &orig, 8);
            double numeric = (fp - fm) / (2 * h);
            double analytic = adjoint[1 + g][k];
            INFO("parameter " << fwd.inputs[p]->name << " element " << k);
            CHECK(analytic == Approx(numeric).epsilon(1e-5).margin(1e-6));
          }
        }
      }
  }
}
