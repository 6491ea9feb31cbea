//===- Memory.cpp - placing buffer lifetimes in one workspace arena -------===//
//
// Greedy by size: in order of first write instead, a kernel's small buffers
// scattered over the arena and left no room for a large one after them (the
// sample MLP's gradient: 196 672 bytes against 133 696 by size).
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Memory.h"

#include <algorithm>
#include <numeric>

namespace gradc {

Placement place(const std::vector<Lifetime> &lifetimes) {
  std::vector<size_t> order(lifetimes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Lifetime &la = lifetimes[a], &lb = lifetimes[b];
    return la.bytes != lb.bytes ? la.bytes > lb.bytes : la.first < lb.first;
  });
  struct Placed {
    int64_t offset, end;
    size_t first, last;
  };
  Placement out;
  out.offsets.assign(lifetimes.size(), 0);
  std::vector<Placed> placed; // by offset
  for (size_t i : order) {
    const Lifetime &l = lifetimes[i];
    int64_t size = arena_bytes(l.bytes);
    // First fit among the buffers live at the same time, lowest offset first.
    int64_t offset = 0;
    for (const Placed &p : placed) {
      if (p.last < l.first || l.last < p.first)
        continue;
      if (offset + size <= p.offset)
        break;
      offset = std::max(offset, p.end);
    }
    offset = std::min(offset, kMaxWorkspaceBytes + 1);
    out.offsets[i] = offset;
    Placed here{offset, offset + size, l.first, l.last};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), here,
                                   [](const Placed &a, const Placed &b) { return a.offset < b.offset; }),
                  here);
    out.peak = std::max(out.peak, std::min(offset + size, kMaxWorkspaceBytes + 1));
  }
  return out;
}

int64_t plan_arena(LoweredFunction &fn) {
  auto life = buffer_lifetimes(fn);
  std::vector<Lifetime> lifetimes;
  for (const BufferPtr &b : fn.arena) {
    auto [first, last] = life[b.get()];
    lifetimes.push_back({b->bytes(), first, last});
  }
  Placement p = place(lifetimes);
  for (size_t i = 0; i < fn.arena.size(); ++i)
    fn.arena[i]->offset = p.offsets[i];
  return p.peak;
}

} // namespace gradc
