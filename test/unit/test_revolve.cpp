//===- test_revolve.cpp - binomial checkpointing schedules ----------------===//
//
// Every schedule is run on a stack machine as grad.scan_backward's lowering
// runs it: each reverse step must find its state, the stack must stay within
// the slots, and the forward steps must be the binomial optimum, which a
// dynamic program over all split points confirms for small sizes.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/Revolve.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <vector>

using namespace gradc;

namespace {

/// The fewest forward steps to reverse n steps from a held state with f more
/// slots, over every split point (no closed form).
int64_t exhaustive_cost(int64_t n, int64_t f, std::map<std::pair<int64_t, int64_t>, int64_t> &memo) {
  if (n <= 1)
    return 0;
  if (f == 0)
    return n * (n - 1) / 2;
  auto [it, fresh] = memo.try_emplace({n, f}, 0);
  if (!fresh)
    return it->second;
  int64_t best = INT64_MAX;
  for (int64_t j = 1; j < n; ++j)
    best = std::min(best, j + exhaustive_cost(n - j, f - 1, memo) + exhaustive_cost(j, f, memo));
  return memo[{n, f}] = best;
}

} // namespace

TEST_CASE("revolve_cost is the exhaustive optimum", "[revolve]") {
  std::map<std::pair<int64_t, int64_t>, int64_t> memo;
  for (int64_t n = 1; n <= 60; ++n)
    for (int64_t s = 1; s <= 7; ++s)
      CHECK(revolve_cost(n, s) == exhaustive_cost(n, s - 1, memo));
  CHECK(revolve_cost(63, 8) == exhaustive_cost(63, 7, memo));
}

TEST_CASE("a revolve schedule reverses every step within its slots", "[revolve]") {
  for (int64_t T = 2; T <= 70; ++T)
    for (int64_t slots = 1; slots <= 9; ++slots) {
      INFO("T = " << T << ", slots = " << slots);
      RevolveSchedule s = revolve_schedule(T, slots);
      REQUIRE(s.pieces.size() == size_t(T - 1));
      REQUIRE(!s.kept.empty());
      CHECK(s.kept.front() == 0);
      CHECK(std::is_sorted(s.kept.begin(), s.kept.end()));
      CHECK(int64_t(s.kept.size()) <= slots);
      CHECK(s.depth <= slots + 1);
      std::vector<int64_t> stack = s.kept;
      size_t piece = 0;
      int64_t advanced = 0, most = int64_t(stack.size());
      for (int64_t t = T - 1; t >= 1; --t) {
        REQUIRE(!stack.empty());
        int64_t cur = stack.back(); // restore
        for (int64_t p = 0; p < s.pieces[size_t(T - 1 - t)]; ++p) {
          REQUIRE(piece < s.advances.size());
          REQUIRE(s.advances[piece] >= 0);
          cur += s.advances[piece];
          advanced += s.advances[piece++];
          stack.push_back(cur);
          most = std::max(most, int64_t(stack.size()));
        }
        REQUIRE(cur == t - 1); // the state reverse step t starts from
        int popped = 0;
        while (!stack.empty() && stack.back() == t - 1 && popped < 2) {
          stack.pop_back();
          ++popped;
        }
        CHECK((stack.empty() || stack.back() < t - 1));
      }
      CHECK(stack.empty());
      CHECK(piece == s.advances.size());
      CHECK(advanced == s.recomputed);
      CHECK(most <= s.depth);
      // The forward pass's sweep up to the last kept state, then the rest:
      // the binomial optimum.
      CHECK(s.kept.back() + s.recomputed == revolve_cost(T - 1, slots));
    }
}

TEST_CASE("with a slot per state, nothing is recomputed", "[revolve]") {
  RevolveSchedule s = revolve_schedule(10, 9);
  CHECK(s.recomputed == 0);
  CHECK(s.kept.size() == 9);
}

TEST_CASE("revolve_kept is the schedule's forward sweep", "[revolve]") {
  for (int64_t T = 2; T <= 90; T += 3)
    for (int64_t slots = 1; slots <= 10; ++slots)
      CHECK(revolve_kept(T, slots) == revolve_schedule(T, slots).kept);
  CHECK(revolve_kept(1, 4) == std::vector<int64_t>{0});
}
