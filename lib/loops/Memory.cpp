//===- Memory.cpp - placing buffer lifetimes in one workspace arena -------===//
//
// First fit, in the best of three orders. Greedy by size first: in order of
// first write instead, a kernel's small buffers scattered over the arena and
// left no room for a large one after them (the sample MLP's gradient:
// 196 672 bytes against 133 696 by size). By size alone, though, a middle
// sized buffer placed early can sit across the gap a busier kernel needs
// (vgg11_bn's gradient planned to fit half its peak: 58.3 MB placed, 42.6 MB
// live at once); the busiest kernels' buffers first, or the longest-lived
// bytes first, close it. The bytes live during the busiest kernel bound
// every placement: one that reaches it ends the search.
//
//===----------------------------------------------------------------------===//
#include "gradc/loops/Memory.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <unordered_map>

namespace gradc {

namespace {

/// First fit in `order`: each lifetime at the lowest offset free of the
/// placed ones that overlap it.
Placement first_fit(const std::vector<Lifetime> &lifetimes, const std::vector<size_t> &order) {
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

} // namespace

Placement place(const std::vector<Lifetime> &lifetimes) {
  size_t kernels = 0;
  for (const Lifetime &l : lifetimes)
    kernels = std::max(kernels, l.last + 1);
  // The bytes live during each kernel: no placement is below their maximum.
  std::vector<int64_t> live(kernels + 1, 0);
  for (const Lifetime &l : lifetimes) {
    live[l.first] += arena_bytes(l.bytes);
    live[l.last + 1] -= arena_bytes(l.bytes);
  }
  std::vector<int64_t> busiest(lifetimes.size(), 0); // the most bytes live during each lifetime
  int64_t bound = 0;
  int64_t sum = 0;
  for (size_t k = 0; k < kernels; ++k) {
    sum += live[k];
    live[k] = sum;
    bound = std::max(bound, sum);
  }
  for (size_t i = 0; i < lifetimes.size(); ++i)
    for (size_t k = lifetimes[i].first; k <= lifetimes[i].last && k < kernels; ++k)
      busiest[i] = std::max(busiest[i], live[k]);
  // Each order sorts by a key, larger first (the earlier first kernel on
  // ties, then the order given): the largest first; the lifetimes of the
  // busiest kernels first (each kernel's buffers together, largest first),
  // where the largest buffers are not what sets the peak; then the
  // longest-lived bytes first.
  using Key = std::pair<int64_t, int64_t>;
  auto by = [&](const std::function<Key(size_t)> &key) {
    std::vector<size_t> o(lifetimes.size());
    std::iota(o.begin(), o.end(), 0);
    std::stable_sort(o.begin(), o.end(), [&](size_t a, size_t b) {
      Key ka = key(a), kb = key(b);
      return ka != kb ? ka > kb : lifetimes[a].first < lifetimes[b].first;
    });
    return o;
  };
  const std::function<Key(size_t)> keys[] = {[&](size_t i) {
                                               return Key{lifetimes[i].bytes, 0};
                                             },
                                             [&](size_t i) {
                                               return Key{busiest[i], lifetimes[i].bytes};
                                             },
                                             [&](size_t i) {
                                               const Lifetime &l = lifetimes[i];
                                               return Key{l.bytes * int64_t(l.last - l.first + 1), l.bytes};
                                             }};
  Placement best;
  for (size_t n = 0; n < std::size(keys); ++n) {
    Placement p = first_fit(lifetimes, by(keys[n]));
    if (n == 0 || p.peak < best.peak)
      best = std::move(p);
    if (best.peak <= bound)
      break;
  }
  return best;
}

bool hands_over(const std::unordered_map<const Buffer *, std::pair<size_t, size_t>> &life, size_t k, const Buffer &from,
                const Buffer &to) {
  auto lf = life.find(&from), lt = life.find(&to);
  return lf != life.end() && lt != life.end() && lt->second.first == k && lf->second.second == k &&
         lf->second.first < k && from.bytes() == to.bytes();
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
      // (A kernel's own scratch stays in the workspace: where it is made is
      // the footprint's to record, and the workspace's order.)
      if (h == home.end() || taken[buf.get()] || over->scope != BufferScope::Arena || over == fn.status || over->host ||
          over->origin.binding == buf->origin.binding || !hands_over(life, k, *over, *buf))
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
      if (b == index.end() || o == index.end() || joined[b->second] || hosts[o->second] ||
          !hands_over(life, k, *over, *buf))
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
