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
#include "gradc/text/Parser.h"
#include "gradc/text/Printer.h"
#include "gradc/transform/Gradient.h"
#include "gradc/transform/Passes.h"
#include "gradc/transform/TypeInfer.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <optional>
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
  // Outputs and workspace start as garbage (0xFF bytes: NaN), so an element
  // left unwritten cannot pass as a zero.
  for (const BufferPtr &b : lf->outputs) {
    out.push_back(aligned(b->bytes()));
    memset(out.back(), 0xFF, size_t(b->bytes()));
  }
  void *ws = aligned(lf->workspace_bytes);
  memset(ws, 0xFF, size_t(lf->workspace_bytes));
  REQUIRE(c.jit->lookup(fn)(in.data(), out.data(), ws) == 0);
  for (size_t i = 0; i < lf->outputs.size(); ++i) {
    REQUIRE(lf->outputs[i]->dtype == DType::Float64);
    const double *p = static_cast<const double *>(out[i]);
    results.emplace_back(p, p + lf->outputs[i]->numel());
  }
  return results;
}

/// `text` parsed and typed, each function in ANF; nullopt (and the messages
/// in `errors`) if it has an error.
std::optional<Module> typed_module(const std::string &name, const std::string &text, std::ostream &errors) {
  auto src = std::make_shared<SourceFile>(name, text);
  DiagEngine diag(src, errors);
  std::optional<Module> parsed = parse_module(src, diag);
  if (!parsed)
    return std::nullopt;
  try {
    Module typed = infer_types(*parsed, diag);
    diag.check();
    for (FunctionPtr &fn : typed.functions)
      fn = normalize(*fn);
    return typed;
  } catch (CompileError &) {
    return std::nullopt;
  }
}

/// build_vjp of @f in `text`, printed: the text of `def @f_vjp ...`.
std::string vjp_text(const std::string &text) {
  std::ostringstream errors;
  std::optional<Module> typed = typed_module("f.relay", text, errors);
  INFO(errors.str());
  REQUIRE(typed);
  DiagEngine diag(typed->source, errors);
  Module out = *typed;
  out.functions = {build_vjp(*typed->find("f"), diag)};
  std::string printed = print_module(out);
  return printed.substr(printed.find("def @f_vjp"));
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

TEST_CASE("the gradient hook: build_vjp of a function with a tuple state matches the adjoint", "[gradient]") {
  // A scan body's shape (issue 17): a tuple state (the TE tutorial's two
  // states), an input, a captured weight and an integer parameter without an
  // adjoint. @f_vjp(s, x, w, n, d_out) must equal main_adjoint's gradients of
  // <d_out, f(s, x, w, n)> (d_out passed as %g0, %g1), to rounding.
  const std::string f = "def @f(%s: (Tensor[(3), float64], Tensor[(3), float64]), %x: Tensor[(3), float64],\n"
                        "       %w: Tensor[(3, 3), float64], %n: Tensor[(3), int64]) {\n"
                        "  %h = tanh(add(squeeze(nn.dense(expand_dims(%s.0, axis=0), %w), axis=[0]), %x));\n"
                        "  (%h, %s.1 + %h * %s.0 + cast(%n, dtype=\"float64\"))\n"
                        "}\n";
  const std::string header = "#[version = \"0.0.5\"]\n";
  std::ostringstream errors;
  std::optional<Module> typed = typed_module("f.relay", header + f, errors);
  REQUIRE(typed);
  DiagEngine diag(typed->source, errors);
  FunctionPtr vjp = build_vjp(*typed->find("f"), diag);
  REQUIRE(vjp->name == "f_vjp");
  REQUIRE(vjp->params.size() == 5);
  CHECK(vjp->params.back()->name == "d_out");
  CHECK(vjp->params.back()->type == typed->find("f")->body.result->type);
  const std::string vjp_fn = vjp_text(header + f);
  INFO(vjp_fn);

  // Entry points take tensors only: @vjp calls @f_vjp with the tuples built
  // in the caller, and is inlined here (round-tripping @f_vjp through the
  // text format on the way); @main is <g, f(...)> with f written out.
  const std::string params = "%s0: Tensor[(3), float64], %s1: Tensor[(3), float64], %x: Tensor[(3), float64], "
                             "%w: Tensor[(3, 3), float64], %n: Tensor[(3), int64], %g0: Tensor[(3), float64], "
                             "%g1: Tensor[(3), float64]";
  std::optional<Module> wrapper = typed_module(
      "vjp.relay", header + vjp_fn + "def @vjp(" + params + ") {\n  @f_vjp((%s0, %s1), %x, %w, %n, (%g0, %g1))\n}\n",
      errors);
  INFO(errors.str());
  REQUIRE(wrapper);
  Module inlined = *wrapper;
  inlined.functions = {inline_calls(*wrapper->find("vjp"), *wrapper)};
  std::string text = print_module(inlined) +
                     "def @main(" + params + ") {\n"
                     "  %h = tanh(add(squeeze(nn.dense(expand_dims(%s0, axis=0), %w), axis=[0]), %x));\n"
                     "  add(sum(multiply(%h, %g0)), sum(multiply(%s1 + %h * %s0 + cast(%n, dtype=\"float64\"), %g1)))\n}\n";
  INFO(text);
  Compiled c = compile_text(text);
  std::mt19937_64 rng(7);
  std::vector<std::string> inputs;
  for (int p = 0; p < 7; ++p) {
    size_t n = p == 3 ? 9 : 3;
    std::string bytes(n * 8, '\0');
    for (size_t k = 0; k < n; ++k) {
      if (p == 4) {
        int64_t v = int64_t(rng() % 5);
        memcpy(&bytes[k * 8], &v, 8);
      } else {
        double v = std::uniform_real_distribution<double>(-1.5, 1.5)(rng);
        memcpy(&bytes[k * 8], &v, 8);
      }
    }
    inputs.push_back(bytes);
  }
  auto adjoint = call(c, "main_adjoint", inputs); // loss, then d s0, s1, x, w, g0, g1
  auto vjp_out = call(c, "vjp", inputs);          // d s0, s1 (the tuple's fields), x, w
  REQUIRE(adjoint.size() == 7);
  REQUIRE(vjp_out.size() == 4);
  for (size_t i = 0; i < 4; ++i) {
    REQUIRE(vjp_out[i].size() == adjoint[1 + i].size());
    for (size_t k = 0; k < vjp_out[i].size(); ++k)
      CHECK(vjp_out[i][k] == Approx(adjoint[1 + i][k]).epsilon(1e-12).margin(1e-14));
  }
}

TEST_CASE("build_vjp: a parameter the result does not reach gets zeros, a returned parameter d_out", "[gradient]") {
  const std::string f = "def @f(%x: Tensor[(2), float64], %y: Tensor[(2), float64]) {\n  %x\n}\n";
  const std::string header = "#[version = \"0.0.5\"]\n";
  Compiled c = compile_text(header + f + vjp_text(header + f) +
                            "def @main(%x: Tensor[(2), float64], %y: Tensor[(2), float64], %g: Tensor[(2), float64]) {\n"
                            "  @f_vjp(%x, %y, %g)\n}\n");
  std::vector<std::string> inputs;
  for (double base : {1.0, 2.0, 3.0}) {
    double v[2] = {base, -base};
    inputs.emplace_back(reinterpret_cast<const char *>(v), sizeof v);
  }
  auto got = call(c, "main", inputs);
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::vector<double>{3.0, -3.0});
  CHECK(got[1] == std::vector<double>{0.0, 0.0});
}
