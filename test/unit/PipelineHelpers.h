//===- PipelineHelpers.h - unit tests' way into the pipeline ---------------===//
//
// Compiling a model to planned loops as the driver does, and lowering and
// planning one rewritten function alone, for the tests of the memory model
// and of rematerialization.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/driver/Pipeline.h"
#include "gradc/lower/Lower.h"
#include "gradc/lower/Passes.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

namespace gradc::testing {

inline std::string read_sample(const std::string &name) {
  std::ifstream in(std::string(GRADC_SAMPLES_DIR) + "/" + name);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// `text` (named `name`) compiled with the gradient of @main to planned
/// loops, under --verify-each, keeping everything (--remat=none).
inline CompiledModule compile_text(const std::string &name, const std::string &text, TargetKind target) {
  auto src = std::make_shared<SourceFile>(name, text);
  std::ostringstream errors;
  DiagEngine diag(src, errors);
  PipelineOptions opts;
  opts.grad_fn = "main";
  opts.verify_each = true;
  opts.codegen.target = target;
  opts.codegen.gpu_arch = "sm_90";
  Dumper dumper(opts, errors);
  CompiledModule c = compile_to_loops(src, opts, diag, dumper);
  INFO(errors.str());
  REQUIRE(errors.str().empty());
  return c;
}

inline CompiledModule compile_sample(const std::string &name, TargetKind target) {
  return compile_text(name, read_sample(name), target);
}

/// `fn` lowered and planned as the pipeline does, for `target`.
inline LoweredFunction lower_and_plan(const FunctionPtr &fn, const Target &target) {
  Module m;
  m.functions.push_back(fn);
  LoweredModule lowered = lower_module(m, LowerOptions{target});
  LoweredFunction &l = lowered.functions.at(0);
  simplify_indices(l);
  if (target.is_gpu())
    bind_gpu_threads(l, target);
  else
    schedule_cpu(l, target);
  plan_memory(l);
  return std::move(l);
}

} // namespace gradc::testing
