//===- MemoryPlan.cpp - plan the workspace arena --------------------------===//
//
// Runs after lowering. Lifetimes are kernel indices; two buffers may share
// bytes only if one's last reader runs before the other's writer. Placement
// is greedy by size: largest first (earlier first write on ties), each at
// the lowest offset free of the buffers already placed whose lifetimes
// overlap its own. In order of the first write instead, a kernel's small
// buffers scattered over the arena and left no room for a large one after
// them (the sample MLP's gradient: 196 672 bytes against 133 696 by size).
// Simple, deterministic, and the result is exactly what the code uses.
//
//===----------------------------------------------------------------------===//
#include "gradc/support/Log.h"
#include "gradc/lower/Passes.h"

#include <algorithm>
#include <unordered_map>

namespace gradc {

void plan_memory(LoweredFunction &fn) {
  auto life = buffer_lifetimes(fn); // first, last kernel
  std::vector<BufferPtr> order = fn.arena;
  std::stable_sort(order.begin(), order.end(), [&](const BufferPtr &a, const BufferPtr &b) {
    auto la = life[a.get()], lb = life[b.get()];
    return a->bytes() != b->bytes() ? a->bytes() > b->bytes() : la.first < lb.first;
  });
  struct Placed {
    int64_t offset, end;
    size_t first, last;
  };
  std::vector<Placed> placed;
  int64_t peak = 0;
  for (const BufferPtr &b : order) {
    auto [first, last] = life[b.get()];
    int64_t size = (b->bytes() + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    std::vector<Placed> conflicts;
    for (const Placed &p : placed)
      if (!(p.last < first || last < p.first))
        conflicts.push_back(p);
    std::sort(conflicts.begin(), conflicts.end(), [](auto &a, auto &b) { return a.offset < b.offset; });
    int64_t offset = 0;
    for (const Placed &p : conflicts) {
      if (offset + size <= p.offset)
        break;
      offset = std::max(offset, p.end);
    }
    // Saturating: a plan past kMaxWorkspaceBytes is rejected by the pipeline.
    offset = std::min(offset, kMaxWorkspaceBytes + 1);
    b->offset = offset;
    placed.push_back({offset, offset + size, first, last});
    peak = std::max(peak, std::min(offset + size, kMaxWorkspaceBytes + 1));
  }
  fn.workspace_bytes = peak;
  if (log_enabled(LogLevel::Info)) {
    log(LogLevel::Info, "memory", "@" + fn.name + ": workspace " + std::to_string(peak) + " bytes for " +
                                       std::to_string(fn.arena.size()) + " arena buffers");
    for (const BufferPtr &b : fn.arena)
      log(LogLevel::Debug, "memory",
          "  " + b->name + ": " + std::to_string(b->bytes()) + " bytes at offset " + std::to_string(b->offset));
  }
}

} // namespace gradc
