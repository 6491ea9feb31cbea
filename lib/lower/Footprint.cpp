//===- Footprint.cpp - what lowering made of each binding, for memory -----===//
//
// Reads a lowered function back by provenance: the kernels and arena
// buffers whose Origin is binding i make its footprint; a buffer it touches
// that it did not make is a leaf of a Var its value reads. A footprint is
// what the memory estimate composes (transform/MemoryModel.h).
//
//===----------------------------------------------------------------------===//
#include "gradc/ir/Functor.h"
#include "gradc/lower/Lower.h"

#include <algorithm>
#include <unordered_map>

namespace gradc {

std::vector<Footprint> binding_footprints(const Function &fn, const LoweredFunction &lowered) {
  const std::vector<Binding> &body = fn.body.bindings;
  GRADC_CHECK(lowered.binding_leaves.size() == body.size(), "memory", "a lowering of another function");
  std::unordered_map<const Expr *, std::vector<BufferPtr>> leaves; // every Var's leaf buffers
  for (const BufferPtr &in : lowered.inputs)
    leaves[fn.params.at(size_t(in->io_index)).get()] = {in};
  for (size_t i = 0; i < body.size(); ++i)
    leaves[body[i].var.get()] = lowered.binding_leaves[i];

  std::vector<Footprint> out(body.size());
  std::vector<std::unordered_map<const Buffer *, size_t>> own(body.size()); // buffer -> created index
  // (A buffer in a result's bytes, LoweredFunction::hosted, is always a
  // binding's result, never a kernel's own scratch: loops/Memory.cpp.)
  for (const BufferPtr &b : lowered.arena)
    if (b->origin.set() && size_t(b->origin.binding) < body.size()) {
      size_t i = size_t(b->origin.binding);
      const std::vector<BufferPtr> &result = lowered.binding_leaves[i];
      if (std::find(result.begin(), result.end(), b) != result.end())
        continue;
      own[i][b.get()] = out[i].created.size();
      out[i].created.push_back({b->dtype, b->shape, b == lowered.status});
    }
  std::vector<size_t> first(body.size(), lowered.kernels.size());
  for (size_t k = 0; k < lowered.kernels.size(); ++k) {
    const Origin &o = lowered.kernels[k].origin;
    if (!o.set())
      continue;
    size_t i = size_t(o.binding);
    GRADC_CHECK(i < body.size() && (first[i] == lowered.kernels.size() || k == first[i] + out[i].kernels.size()),
                "memory", "the kernels of binding %" + o.var + " are not contiguous");
    if (first[i] == lowered.kernels.size())
      first[i] = k;
    // The inputs: each Var the value reads, its leaves in turn.
    std::unordered_map<const Buffer *, size_t> input;
    size_t n = 0;
    for (const ExprPtr &v : free_vars(body[i].value))
      for (const BufferPtr &leaf : leaves.at(v.get()))
        input.try_emplace(leaf.get(), n++);
    std::vector<Footprint::Touch> touches;
    for (const BufferPtr &b : lowered.kernels[k].buffers) {
      const std::vector<BufferPtr> &result = lowered.binding_leaves[i];
      auto r = std::find(result.begin(), result.end(), b);
      if (b == lowered.status)
        touches.push_back({Footprint::Role::Status, 0});
      else if (r != result.end())
        touches.push_back({Footprint::Role::Result, size_t(r - result.begin())});
      else if (auto it = own[i].find(b.get()); it != own[i].end())
        touches.push_back({Footprint::Role::Own, it->second});
      else if (auto in = input.find(b.get()); in != input.end())
        touches.push_back({Footprint::Role::Input, in->second});
      else if (b->scope == BufferScope::InOut)
        touches.push_back({Footprint::Role::Param, size_t(b->io_index)});
      else
        internal_error("memory", "kernel " + lowered.kernels[k].name + " touches " + b->name +
                                     ", which is neither its binding's nor a leaf of a Var it reads");
    }
    std::vector<std::pair<size_t, size_t>> overwrites;
    const std::vector<BufferPtr> &buffers = lowered.kernels[k].buffers;
    auto at = [&](const BufferPtr &b) {
      return size_t(std::find(buffers.begin(), buffers.end(), b) - buffers.begin());
    };
    for (const auto &[buf, over] : lowered.kernels[k].overwrites)
      overwrites.emplace_back(at(buf), at(over));
    out[i].kernels.push_back(std::move(touches));
    out[i].overwrites.push_back(std::move(overwrites));
  }
  for (const TimeLoop &l : lowered.time_loops) {
    const Origin &o = lowered.kernels.at(l.first).origin;
    GRADC_CHECK(o.set(), "memory", "a time loop of no binding");
    size_t i = size_t(o.binding), base = first[i];
    TimeLoop rel = l;
    rel.first -= base;
    rel.last -= base;
    GRADC_CHECK(rel.last <= out[i].kernels.size(), "memory", "a time loop past its binding's kernels");
    out[i].time_loops.push_back(rel);
  }
  return out;
}

} // namespace gradc
