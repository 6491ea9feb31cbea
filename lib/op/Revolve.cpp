//===- Revolve.cpp - binomial checkpointing of a scan's reverse -----------===//
//
// The schedule is the recursion of binomial checkpointing: to reverse steps
// (a, b] from state a with f more states free, advance to a split point m,
// push state m, reverse (m, b] with f - 1 free, pop m, reverse (a, m] with
// f free. The split is one whose cost adds up to p(b - a, f + 1); the
// recursion's actions are then cut into reverse steps and pieces
// (op/Revolve.h).
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Revolve.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <numeric>

namespace gradc {
namespace {

/// C(s + r, s), saturating well above any scan length.
int64_t beta(int64_t s, int64_t r) {
  double v = 1;
  for (int64_t i = 1; i <= std::min(s, r); ++i)
    v = v * double(s + r - std::min(s, r) + i) / double(i);
  return v > 4e18 ? int64_t(4e18) : int64_t(v + 0.5);
}

/// A split j of n steps with `free` more slots whose cost is optimal.
int64_t optimal_split(int64_t n, int64_t free) {
  int64_t best = revolve_cost(n, free + 1);
  for (int64_t j = n - 1; j >= 1; --j)
    if (j + revolve_cost(n - j, free) + revolve_cost(j, free + 1) == best)
      return j;
  internal_error("revolve", "no split of " + std::to_string(n) + " steps meets the binomial bound");
}

class Planner {
public:
  RevolveSchedule out;

  /// Reverses (a, b] with state a on top of `depth` states on the stack and
  /// `free` more slots.
  void reverse(int64_t a, int64_t b, int64_t free, int64_t depth) {
    out.depth = std::max(out.depth, depth + 1); // the last piece's push
    int64_t n = b - a;
    if (n == 1)
      return step(b);
    if (free == 0) {
      for (int64_t t = b; t > a; --t) {
        advance(t - 1 - a);
        step(t);
      }
      return;
    }
    int64_t j = optimal_split(n, free);
    advance(j);
    push(a + j);
    reverse(a + j, b, free - 1, depth + 1);
    reverse(a, a + j, free, depth);
  }

private:
  int64_t pending_ = 0;          // forward steps since the last push or reverse step
  std::vector<int64_t> current_; // the pieces of the reverse step under way
  bool sweep_ = true;            // in the forward sweep: before the first reverse step
  int64_t swept_ = 0;            // the state it has reached

  void advance(int64_t k) {
    pending_ += k;
    swept_ += sweep_ ? k : 0;
  }
  /// In the forward sweep the forward pass keeps the state (its history);
  /// after it, the piece under way ends.
  void push(int64_t state) {
    if (sweep_) {
      GRADC_CHECK(state == swept_, "revolve", "the forward sweep pushed a state it had not reached");
      out.kept.push_back(state);
    } else {
      current_.push_back(pending_);
    }
    pending_ = 0;
  }
  /// Reverse step t: its last piece reaches state t - 1 (in the first one,
  /// from the last state the forward pass kept).
  void step(int64_t t) {
    GRADC_CHECK(!sweep_ || swept_ == t - 1, "revolve", "the forward sweep did not reach the first reverse step");
    sweep_ = false;
    current_.push_back(pending_);
    pending_ = 0;
    out.pieces.push_back(int64_t(current_.size()));
    out.advances.insert(out.advances.end(), current_.begin(), current_.end());
    out.recomputed += std::accumulate(current_.begin(), current_.end(), int64_t(0));
    current_.clear();
  }
};

} // namespace

int64_t revolve_cost(int64_t n, int64_t s) {
  if (n <= 1)
    return 0;
  int64_t r = 1;
  while (beta(s, r) < n)
    ++r;
  return r * n - beta(s + 1, r - 1);
}

std::vector<int64_t> revolve_kept(int64_t steps, int64_t slots) {
  // The forward sweep: the first split of each level, down to one step or no free slot.
  std::vector<int64_t> kept{0};
  for (int64_t a = 0, free = slots - 1; steps - 1 - a > 1 && free > 0; --free) {
    a += optimal_split(steps - 1 - a, free);
    kept.push_back(a);
  }
  return kept;
}

RevolveSchedule revolve_schedule(int64_t steps, int64_t slots) {
  GRADC_CHECK(steps >= 2 && slots >= 1 && steps <= kMaxRevolveSteps, "revolve", "no schedule for these sizes");
  Planner p;
  p.out.kept.push_back(0);
  p.reverse(0, steps - 1, slots - 1, 1);
  return p.out;
}

} // namespace gradc
