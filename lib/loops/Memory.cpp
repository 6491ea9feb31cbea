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
#include <unordered_map>

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

namespace {

/// Arena buffers whose last reader writes an output over them, the output
/// touched by no kernel before (Kernel::overwrites), move into the output's
/// bytes (Buffer::host, LoweredFunction::hosted); so do buffers written over
/// by a buffer that moved. Kernels in reverse order: a chain moves whole.
void host_in_outputs(LoweredFunction &fn, const std::unordered_map<const Buffer *, std::pair<size_t, size_t>> &life) {
  std::unordered_map<const Buffer *, BufferPtr> home; // a buffer that moved: the output it lives in
  std::unordered_map<const Buffer *, bool> taken;     // an output or a moved buffer holds one before it
  for (size_t k = fn.kernels.size(); k-- > 0;)
    for (const auto &[buf, over] : fn.kernels[k].overwrites) {
      if (buf->scope == BufferScope::Output)
        home.try_emplace(buf.get(), buf);
      auto h = home.find(buf.get());
      auto lb = life.find(buf.get()), lo = life.find(over.get());
      // (A kernel's own scratch stays in the workspace: where it is made is
      // the footprint's to record, and the workspace's order.)
      if (h == home.end() || taken[buf.get()] || over->scope != BufferScope::Arena || over == fn.status || over->host ||
          over->origin.binding == buf->origin.binding || lb == life.end() || lo == life.end() ||
          lb->second.first != k || lo->second.second != k || lo->second.first == k || buf->bytes() != over->bytes())
        continue;
      taken[buf.get()] = true;
      over->host = h->second;
      home[over.get()] = h->second;
    }
  std::vector<BufferPtr> arena;
  for (const BufferPtr &b : fn.arena)
    (b->host ? fn.hosted : arena).push_back(b);
  fn.arena = std::move(arena);
}

} // namespace

int64_t plan_arena(LoweredFunction &fn) {
  auto life = buffer_lifetimes(fn);
  host_in_outputs(fn, life);
  std::unordered_map<const Buffer *, size_t> index;
  for (size_t i = 0; i < fn.arena.size(); ++i)
    index[fn.arena[i].get()] = i;
  // Buffers a kernel stores over one it reads for the last time
  // (Kernel::overwrites) join its group: one place for all.
  std::vector<size_t> group(fn.arena.size());
  std::iota(group.begin(), group.end(), 0);
  std::vector<bool> hosts(fn.arena.size()), joined(fn.arena.size());
  for (size_t k = 0; k < fn.kernels.size(); ++k)
    for (const auto &[buf, over] : fn.kernels[k].overwrites) {
      auto b = index.find(buf.get()), o = index.find(over.get());
      if (b == index.end() || o == index.end() || joined[b->second] || hosts[o->second])
        continue;
      auto lb = life.at(buf.get()), lo = life.at(over.get());
      if (lb.first != k || lo.second != k || lo.first == k || buf->bytes() != over->bytes())
        continue;
      group[b->second] = group[o->second];
      joined[b->second] = hosts[o->second] = true;
    }
  std::vector<Lifetime> lifetimes;
  std::vector<size_t> slot(fn.arena.size()); // each buffer's group's lifetime
  std::unordered_map<size_t, size_t> slot_of;
  for (size_t i = 0; i < fn.arena.size(); ++i) {
    auto [first, last] = life[fn.arena[i].get()];
    auto [it, fresh] = slot_of.try_emplace(group[i], lifetimes.size());
    if (fresh)
      lifetimes.push_back({fn.arena[i]->bytes(), first, last});
    Lifetime &l = lifetimes[it->second];
    l.first = std::min(l.first, first);
    l.last = std::max(l.last, last);
    slot[i] = it->second;
  }
  Placement p = place(lifetimes);
  for (size_t i = 0; i < fn.arena.size(); ++i)
    fn.arena[i]->offset = p.offsets[slot[i]];
  return p.peak;
}

} // namespace gradc
