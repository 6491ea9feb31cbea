//===- Manifest.cpp - the JSON manifest of a compiled module --------------===//
//
// What `gradc compile` writes for tools (SPEC §8): the versions and flags,
// and for each function its parameters and results (with the C field the
// header gives each), its workspace, remat decisions and kernels.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Artifacts.h"
#include "gradc/transform/TrainStep.h"

#include <cstdlib>

namespace gradc {

namespace {

/// A parameter or result: `c_field` is its field in the header's struct
/// (`%w` beside `%W` is `w_2`, `%int` is `p_int`).
nlohmann::json tensor_json(const std::string &name, const std::string &c_field, const char *role, const Buffer &buf) {
  return {{"name", name},       {"c_field", c_field},  {"role", role}, {"dtype", dtype_name(buf.dtype)},
          {"shape", buf.shape}, {"bytes", buf.bytes()}};
}

nlohmann::json string_or_null(const std::string &s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); }

/// A training step's optimizer (transform/TrainStep.h), and what each of its
/// parameters is to it (`training` on each): "parameter" (trained), "data",
/// "model_state" (the model updates it itself, as a batch norm's running
/// statistics), "optimizer_state" (with `of`: the trained parameter),
/// "step" or "learning_rate". `model`: the model's own parameters (the
/// step's first ones), null when the model is not compiled alongside (a
/// dumped step compiled alone: no `training` keys).
nlohmann::json optimizer_json(const std::string &text, nlohmann::json &params, const nlohmann::json *model) {
  std::string why;
  std::optional<Optimizer> opt = parse_optimizer(text, &why);
  if (!opt)
    return {{"text", text}};
  nlohmann::json hyper = nlohmann::json::object();
  for (const auto &[k, v] : opt->hyper_parameters())
    hyper[k] = v == "true"    ? nlohmann::json(true)
               : v == "false" ? nlohmann::json(false)
               : k == "betas" ? nlohmann::json({opt->beta1, opt->beta2})
                              : nlohmann::json(std::strtod(v.c_str(), nullptr));
  nlohmann::json out = {{"name", opt->name()}, {"text", text}, {"hyper_parameters", hyper}};
  if (!model || model->size() >= params.size())
    return out;
  std::vector<size_t> trained, state;
  for (size_t i = 0; i < params.size(); ++i) {
    std::string role;
    if (i < model->size())
      role = (*model)[i].contains("updated_by") ? "model_state"
             : params[i].contains("updated_by") ? "parameter"
                                                : "data";
    else if (i + 1 == params.size())
      role = "learning_rate";
    else if (opt->needs_step() && i + 2 == params.size())
      role = "step";
    else
      role = "optimizer_state";
    params[i]["training"] = role;
    if (role == "parameter")
      trained.push_back(i);
    if (role == "optimizer_state")
      state.push_back(i);
  }
  size_t per = trained.empty() ? 0 : state.size() / trained.size();
  for (size_t j = 0; per && j < state.size(); ++j)
    params[state[j]]["of"] = params[trained[j / per]]["name"];
  out["learning_rate"] = params.back()["name"];
  return out;
}

} // namespace

nlohmann::json build_manifest(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                              const ManifestInfo &info, const std::string &prefix) {
  std::vector<CFieldNames> fields = c_field_names(module, reports, prefix);
  const bool cuda = info.target == "cuda";
  // Provenance: the binding of the tensor function a kernel or buffer comes from.
  auto origin_json = [](const Origin &o) { return o.set() ? nlohmann::json("%" + o.var) : nlohmann::json(); };
  nlohmann::json functions = nlohmann::json::array();
  for (size_t f = 0; f < module.functions.size(); ++f) {
    const LoweredFunction &fn = module.functions[f];
    const FunctionReport &report = reports[f];
    nlohmann::json params = nlohmann::json::array(), results = nlohmann::json::array();
    // A parameter updated in place is role "inout", and the result leaf
    // written into it role "in_place", with the parameter's field.
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      bool inout = fn.inputs[i]->scope == BufferScope::InOut;
      params.push_back(
          tensor_json(report.param_names[i], fields[f].inputs[i], inout ? "inout" : "input", *fn.inputs[i]));
    }
    for (size_t i = 0; i < fn.results.size(); ++i) {
      const Buffer &r = *fn.results[i];
      std::string name = "output_" + std::to_string(i);
      if (r.scope == BufferScope::InOut) {
        results.push_back(tensor_json(name, fields[f].inputs[size_t(r.io_index)], "in_place", r));
        results.back()["updates"] = report.param_names[size_t(r.io_index)];
        params[size_t(r.io_index)]["updated_by"] = name;
      } else {
        results.push_back(tensor_json(name, fields[f].outputs[size_t(r.io_index)], "output", r));
      }
    }

    nlohmann::json kernels = nlohmann::json::array();
    for (const Kernel &k : fn.kernels) {
      nlohmann::json buffers = nlohmann::json::array();
      for (const BufferPtr &b : k.buffers)
        buffers.push_back(b->name);
      nlohmann::json kernel = {{"name", k.name}, {"buffers", buffers}, {"binding", origin_json(k.origin)}};
      // A kernel's launch arguments are its buffers, in order (CudaTarget.cpp).
      if (cuda)
        kernel["launch"] = {
            {"grid", {k.grid.x, k.grid.y, k.grid.z}}, {"block", {k.block.x, k.block.y, k.block.z}}, {"shared_memory_bytes", shared_bytes(k)}, {"arguments", buffers}};
      kernels.push_back(kernel);
    }

    // Kernel-level loops: kernels [first, last) run `extent` times, or with
    // `trips` trips[i % n] times on their i-th entry, the table of n entries
    // restarting when a loop around the scan runs it again (TimeLoop).
    nlohmann::json time_loops = nlohmann::json::array();
    for (const TimeLoop &l : fn.time_loops) {
      time_loops.push_back({{"first_kernel", l.first}, {"end_kernel", l.last}, {"extent", l.extent}});
      if (l.streamed())
        time_loops.back()["trips"] = l.trips;
    }

    // Each arena buffer with the kernels it is live over (what the plan
    // placed) and the binding it comes from.
    nlohmann::json arena = nlohmann::json::array();
    auto life = buffer_lifetimes(fn);
    for (const BufferPtr &b : fn.arena)
      arena.push_back({{"name", b->name},
                       {"offset", b->offset},
                       {"bytes", b->bytes()},
                       {"live_kernels", {life[b.get()].first, life[b.get()].second}},
                       {"binding", b == fn.status ? nlohmann::json() : origin_json(b->origin)}});
    // Each intermediate placed in a result's bytes instead (Buffer::host).
    nlohmann::json hosted = nlohmann::json::array();
    for (const BufferPtr &b : fn.hosted)
      hosted.push_back({{"name", b->name},
                        {"in", b->host->name},
                        {"bytes", b->bytes()},
                        {"live_kernels", {life[b.get()].first, life[b.get()].second}},
                        {"binding", origin_json(b->origin)}});

    nlohmann::json optimizer;
    if (!report.attrs.optimizer.empty()) {
      const nlohmann::json *model = nullptr;
      for (const nlohmann::json &g : functions)
        if (g["name"] == report.attrs.primal)
          model = &g["parameters"];
      optimizer = optimizer_json(report.attrs.optimizer, params, model);
    }
    functions.push_back({
        {"name", fn.name},
        {"symbol", prefix + "_" + fn.name},
        {"role", role_name(report.attrs.role)},
        {"primal", string_or_null(report.attrs.primal)},
        {"optimizer", optimizer},
        {"parameters", params},
        {"results", results},
        {"workspace_bytes", fn.workspace_bytes},
        {"stack_bytes", stack_bytes(fn)},
        {"planned_peak_bytes", {{"before_remat", report.peak_before_remat}, {"after_remat", report.peak_after_remat}}},
        {"remat", {{"segments", report.remat_segments}, {"recomputed_bindings", report.remat_recomputed}}},
        {"flops", report.flops},
        // What rematerialization bought and cost (SPEC §6): the planned
        // peak, the peak keeping everything, the forward pass's FLOPs and
        // the FLOPs recomputed, the values recomputed, the plan, the budget.
        {"peak_bytes", report.peak_after_remat},
        {"peak_bytes_no_remat", report.peak_before_remat},
        {"forward_flops", report.forward_flops},
        {"extra_flops", report.extra_flops},
        {"recomputed", report.recomputed},
        {"remat_strategy", report.remat_strategy},
        {"budget_bytes", report.budget_bytes >= 0 ? nlohmann::json(report.budget_bytes) : nlohmann::json()},
        {"remat_plans", report.remat_plans},
        {"remat_solver_seconds",
         report.remat_solver_seconds >= 0 ? nlohmann::json(report.remat_solver_seconds) : nlohmann::json()},
        {"kernels", kernels},
        {"time_loops", time_loops},
        {"arena", arena},
        {"hosted", hosted},
    });
  }

  return {
      {"format", "gradc-manifest"},
      {"version", 1},
      {"tool", {{"name", "gradc"}, {"version", info.tool_version}}},
      {"llvm_version", info.llvm_version},
      {"command_line", info.argv},
      {"target",
       {{"kind", info.target},
        {"triple", string_or_null(info.triple)},
        {"cpu", string_or_null(info.cpu)},
        {"gpu_arch", cuda ? string_or_null(info.gpu_arch) : nlohmann::json()},
        {"gpu_math", cuda ? nlohmann::json(info.gpu_tf32 ? "tf32" : "exact") : nlohmann::json()}}},
      {"opt_level", info.opt_level},
      {"remat",
       {{"mode", info.remat},
        {"memory_budget", info.memory_budget < 0 ? nlohmann::json() : nlohmann::json(info.memory_budget)}}},
      {"functions", functions},
  };
}

} // namespace gradc
