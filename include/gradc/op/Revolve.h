//===- Revolve.h - binomial checkpointing of a scan's reverse (revolve) ---===//
//
// Griewank's binomial checkpointing, offline (the length is known when
// compiling): the reverse of a scan of T states that may hold at most
// `slots` of them at once recomputes the fewest forward steps there are,
//   p(n, s) = r n - C(s + r, r - 1),  r the least with C(s + r, s) >= n,
// for n = T - 1 reverse steps and s = slots (Griewank and Walther, ACM TOMS
// 26(1), 2000). grad.scan_backward's lowering runs the schedule as time
// loops whose trip counts come from it (op/recurrence.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <vector>

namespace gradc {

/// How the reverse of a scan runs under binomial checkpointing. The states
/// held form a stack whose bottom is state 0. Each reverse step t, from
/// T - 1 down to 1, restores the state on top of the stack, then runs its
/// pieces: each advances some forward steps from there and pushes the state
/// it reached; the last piece reaches state t - 1, which the step reverses
/// from. Then the states t - 1 on top are popped (the last piece's own, and
/// one the schedule has finished with).
struct RevolveSchedule {
  /// The states on the stack before the first reverse step, ascending from
  /// 0: the ones the forward sweep passes over (the forward pass keeps them).
  std::vector<int64_t> kept;
  /// Per reverse step t = T - 1, ..., 1: its number of pieces (at least 1).
  std::vector<int64_t> pieces;
  /// Per piece, in order: the forward steps it advances (0 or more).
  std::vector<int64_t> advances;
  /// Forward steps the reverse recomputes in all, p(T - 1, slots) less the
  /// forward sweep's (which the forward pass ran).
  int64_t recomputed = 0;
  /// The most states on the stack at once, the last piece's push included.
  int64_t depth = 0;
};

/// p(n, s): the fewest forward steps that reverse n steps holding at most
/// s >= 1 states (n >= 1), the first sweep included.
int64_t revolve_cost(int64_t n, int64_t s);

/// The optimal schedule of a T-state scan's reverse with at most `slots`
/// states held (T >= 2, slots >= 1).
RevolveSchedule revolve_schedule(int64_t steps, int64_t slots);

/// revolve_schedule(steps, slots).kept alone, without planning the rest
/// (what a type relation needs); {0} for one step.
std::vector<int64_t> revolve_kept(int64_t steps, int64_t slots);

/// The longest scan binomial checkpointing plans (the plan takes O(T^2)).
constexpr int64_t kMaxRevolveSteps = 1 << 20;

} // namespace gradc
