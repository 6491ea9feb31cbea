//===- AutoRemat.cpp - what to keep and what to recompute, under a budget -===//
//
// The dynamic program, over blocks s..t of the chain (0-based) and a memory
// level m (in units of the chain's bytes / kLevels), where block s-1's
// output x[s-1] is at hand (the parameters for s = 0):
//
//   Opt(s, t, m)  the least FLOPs to run the backward pass of blocks t..s
//                 from a recomputed forward: s == t, recompute block s and
//                 keep what its backward reads (stash[s]); or keep block s's
//                 stash and solve s+1..t with m - stash[s]; or advance from
//                 x[s-1] to x[k] keeping only x[k] (the FLOPs of s..k), solve
//                 k+1..t with m - x[k], then s..k again with m.
//   Top(s, t, m)  the same for the first sweep, which is the forward pass
//                 itself and costs nothing: what it keeps are originals.
//
// On a chain of equal blocks this is binomial checkpointing's recursion
// (Griewank's revolve, with stash = x: m levels are revolve's m slots, the
// block worked from among them; test_remat.cpp checks the optimum); with
// unequal blocks, Rotor's (Beaumont et al. 2019) with its F_all / F_ck /
// F_none operations. A
// schedule is read back from the choices at each level m: the bindings to
// recompute right before the first backward binding that needs them. The
// memory the program counts is a model; the workspace every plan reports is
// the memory model's (exact), so the program only proposes.
//
// Keep sets (keep_set_plans) cover what the chain does not: exhaustive up to
// kRematExhaustiveCandidates forward kernels, a measured greedy descent by
// single flips beyond.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/AutoRemat.h"
#include "gradc/ir/Functor.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"
#include "gradc/transform/MemoryModel.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

namespace gradc {
namespace {

constexpr int64_t kLevels = 128;   // memory levels of the program
constexpr size_t kMaxBlocks = 128; // longer chains are merged into this many blocks
// The plans measured: each costs about a microsecond per binding, so a
// function of n bindings gets kWork / n of them (at least kMinPlans), the
// chain's levels half of those at most, keep sets the rest.
constexpr size_t kWork = 60000;
constexpr size_t kMinPlans = 24;
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

int64_t value_bytes(const Type &t) {
  int64_t bytes = 0;
  for (const Type &leaf : leaf_types(t))
    bytes += arena_bytes(num_elements(leaf.shape) * int64_t(dtype_bytes(leaf.dtype)));
  return bytes;
}

/// The reads of every binding (binding indices, direct) and its readers.
struct Uses {
  std::vector<std::vector<size_t>> reads, readers;
  explicit Uses(const Function &fn) : reads(fn.body.bindings.size()), readers(fn.body.bindings.size()) {
    std::unordered_map<const Expr *, size_t> def;
    const std::vector<Binding> &body = fn.body.bindings;
    for (size_t i = 0; i < body.size(); ++i)
      def[body[i].var.get()] = i;
    for (size_t j = 0; j < body.size(); ++j)
      for (const ExprPtr &v : free_vars(body[j].value))
        if (auto it = def.find(v.get()); it != def.end()) {
          reads[j].push_back(it->second);
          readers[it->second].push_back(j);
        }
  }
};

size_t forward_end(const Function &fn) {
  const std::vector<Binding> &body = fn.body.bindings;
  const ExprPtr &r = fn.body.result;
  auto def = [&](const ExprPtr &v) -> std::optional<size_t> {
    for (size_t i = 0; i < body.size(); ++i)
      if (body[i].var == v)
        return i;
    return std::nullopt;
  };
  ExprPtr tuple = r;
  if (r->kind == ExprKind::Var) {
    auto i = def(r);
    if (!i)
      return 0;
    tuple = body[*i].value;
  }
  if (tuple->kind != ExprKind::Tuple || tuple->args.empty() || tuple->args[0]->kind != ExprKind::Var)
    return 0;
  auto primal = def(tuple->args[0]);
  return primal ? *primal + 1 : 0;
}

/// The bindings whose reads make a value cross a cut of the forward pass:
/// those before `end`, but a primal that is a tuple (a model's loss with
/// its batch norms' running statistics). The tuple reads its fields at the
/// end of the forward pass as outputs, not to compute anything: a running
/// statistic made by the first layer does not tie it to the last.
size_t computing_end(const Function &fn, size_t end) {
  return end > 0 && fn.body.bindings[end - 1].value->kind == ExprKind::Tuple ? end - 1 : end;
}

/// The chain's blocks with what the program needs of each. Block k's
/// output x[k] is the value that crosses the cut after it (the last block's:
/// the primal value); its stash is what the backward pass reads of it.
class Chain {
public:
  Chain(const Function &fn, const RematChain &chain, const Uses &uses)
      : fn_(fn), uses_(uses), end_(chain.forward_end), n_(fn.body.bindings.size()) {
    // Merge consecutive blocks so that at most kMaxBlocks remain.
    size_t blocks = chain.block_begin.size(), per = (blocks + kMaxBlocks - 1) / kMaxBlocks;
    for (size_t k = 0; k < blocks; k += per)
      begin_.push_back(chain.block_begin[k]);
    begin_.push_back(end_);
    L_ = begin_.size() - 1;
    read_late_.assign(n_, false);
    for (size_t i = 0; i < end_; ++i)
      for (size_t j : uses.readers[i])
        read_late_[i] = read_late_[i] || j >= end_;
    for (size_t k = 0; k < L_; ++k)
      out_.push_back(k + 1 < L_ ? crossing(begin_[k + 1]) : end_ - 1);
    // The backward pass in steps, in descending order: a binding belongs to
    // the last block whose values it reads, where a block's output read
    // alone counts as the next block's input (a layer's weight gradient and
    // the adjoint of its input read only the layer's input: the step of the
    // layer, not of the one before), and never to a later step than the
    // binding before it.
    std::vector<size_t> block_of(end_);
    for (size_t k = 0; k < L_; ++k)
      for (size_t i = begin_[k]; i < begin_[k + 1]; ++i)
        block_of[i] = k;
    step_first_.assign(L_, n_);
    size_t step = L_; // none yet
    for (size_t j = end_; j < n_; ++j) {
      std::set<size_t> inner; // blocks it reads more of than their output
      for (size_t r : uses.reads[j])
        if (r < end_ && r != out_[block_of[r]])
          inner.insert(block_of[r]);
      size_t mine = L_;
      for (size_t r : uses.reads[j]) {
        if (r >= end_)
          continue;
        size_t b = block_of[r];
        if (r == out_[b] && !inner.count(b) && b + 1 < L_)
          b += 1; // read as the next block's input
        mine = mine == L_ ? b : std::max(mine, b);
      }
      if (mine != L_)
        step = step == L_ ? mine : std::min(step, mine);
      if (step != L_)
        step_first_[step] = std::min(step_first_[step], j);
    }
    for (size_t k = 0; k < L_; ++k) {
      x_bytes_.push_back(value_bytes(fn.body.bindings[out_[k]].var->type));
      std::vector<size_t> stash = stash_values(k), others;
      for (size_t i : stash)
        if (i != out_[k])
          others.push_back(i);
      others.push_back(out_[k]);
      keep_.push_back(closure(others, begin_[k], begin_[k + 1]));
      others.pop_back();
      base_.push_back(closure(others, begin_[k], begin_[k + 1]));
      advance_.push_back(closure({out_[k]}, begin_[k], begin_[k + 1]));
      keep_bytes_.push_back(x_bytes_[k] + bytes(others));
      base_bytes_.push_back(bytes(others));
    }
  }

  size_t blocks() const { return L_; }
  int64_t x_bytes(size_t k) const { return x_bytes_[k]; }
  /// Keeping block k for its backward step: its stash and output (memory),
  /// and the bindings that compute them from x[k-1].
  int64_t keep_bytes(size_t k) const { return keep_bytes_[k]; }
  const std::vector<size_t> &keep(size_t k) const { return keep_[k]; }
  /// Its backward step alone, x[k] at hand: the rest of its stash.
  int64_t base_bytes(size_t k) const { return base_bytes_[k]; }
  const std::vector<size_t> &base(size_t k) const { return base_[k]; }
  /// x[k] from x[k-1], keeping nothing else.
  const std::vector<size_t> &advance(size_t k) const { return advance_[k]; }
  int64_t flops(const std::vector<size_t> &bindings) const {
    int64_t f = 0;
    for (size_t i : bindings)
      f += expr_flops(*fn_.body.bindings[i].value);
    return f;
  }

  /// The program's view, memory in levels of `unit` bytes (rounded up).
  ChainCosts costs(int64_t unit) const {
    auto levels = [unit](int64_t bytes) { return (bytes + unit - 1) / unit; };
    ChainCosts c;
    for (size_t k = 0; k < L_; ++k) {
      c.x.push_back(levels(x_bytes_[k]));
      c.keep.push_back(levels(keep_bytes_[k]));
      c.base.push_back(levels(base_bytes_[k]));
      c.keep_flops.push_back(flops(keep_[k]));
      c.base_flops.push_back(flops(base_[k]));
      c.advance_flops.push_back(flops(advance_[k]));
    }
    return c;
  }

  /// Where the recomputation for blocks s..t goes: before the first binding
  /// of their backward steps.
  size_t need_position(size_t s, size_t t) const {
    size_t p = n_;
    for (size_t k = s; k <= t; ++k)
      p = std::min(p, step_first_[k]);
    return p;
  }

private:
  const Function &fn_;
  const Uses &uses_;
  size_t end_, n_, L_ = 0;
  std::vector<size_t> begin_, out_, step_first_;
  std::vector<bool> read_late_;
  std::vector<int64_t> x_bytes_, keep_bytes_, base_bytes_;
  std::vector<std::vector<size_t>> keep_, base_, advance_;

  /// The one forward value read at or after binding p that is defined before it.
  size_t crossing(size_t p) const {
    size_t computing = computing_end(fn_, end_);
    for (size_t i = p; i-- > 0;)
      for (size_t j : uses_.readers[i])
        if (j >= p && j < computing)
          return i;
    return p - 1;
  }
  std::vector<size_t> stash_values(size_t k) const {
    std::vector<size_t> out;
    for (size_t i = begin_[k]; i < begin_[k + 1]; ++i)
      if (read_late_[i])
        out.push_back(i);
    return out;
  }
  int64_t bytes(const std::vector<size_t> &values) const {
    int64_t b = 0;
    for (size_t i : values)
      b += value_bytes(fn_.body.bindings[i].var->type);
    return b;
  }
  /// `roots` and the bindings in [lo, hi) they read, transitively, in order.
  std::vector<size_t> closure(std::vector<size_t> roots, size_t lo, size_t hi) const {
    std::set<size_t> in;
    while (!roots.empty()) {
      size_t i = roots.back();
      roots.pop_back();
      if (i < lo || i >= hi || !in.insert(i).second)
        continue;
      for (size_t r : uses_.reads[i])
        roots.push_back(r);
    }
    return {in.begin(), in.end()};
  }
};

/// The two tables of the program over `ChainCosts` and their choices: -1
/// block s's backward step alone (s == t: x[s-1] at hand), -2 keep block s,
/// k >= 0 advance to x[k].
class Program {
public:
  explicit Program(const ChainCosts &c) : c_(c), L_(c.x.size()) {
    prefix_.assign(L_ + 1, 0);
    for (size_t k = 0; k < L_; ++k)
      prefix_[k + 1] = prefix_[k] + c.advance_flops[k];
    size_t cells = L_ * (L_ + 1) / 2 * size_t(kLevels + 1);
    opt_.assign(cells, kInf);
    top_.assign(cells, kInf);
    opt_choice_.assign(cells, -1);
    top_choice_.assign(cells, -1);
    for (size_t len = 0; len < L_; ++len)
      for (size_t s = 0; s + len < L_; ++s)
        for (int64_t m = 0; m <= kLevels; ++m)
          solve(s, s + len, m);
  }

  int64_t top(int64_t m) const { return L_ == 0 ? 0 : top_[at(0, L_ - 1, m)]; }

  /// The schedule of Top(0, L-1, m) on `chain`: the bindings recomputed before each binding.
  void schedule(const Chain &chain, int64_t m, std::vector<std::vector<size_t>> &before) const {
    rebuild(chain, 0, L_ - 1, m, true, before);
  }

private:
  const ChainCosts &c_;
  size_t L_;
  std::vector<int64_t> prefix_;
  std::vector<int64_t> opt_, top_;
  std::vector<int32_t> opt_choice_, top_choice_;

  size_t at(size_t s, size_t t, int64_t m) const {
    size_t pair = t * (t + 1) / 2 + s; // s <= t
    return pair * size_t(kLevels + 1) + size_t(m);
  }
  static int64_t sum(int64_t a, int64_t b) { return a >= kInf || b >= kInf ? kInf : a + b; }

  void solve(size_t s, size_t t, int64_t m) {
    for (bool first : {false, true}) {
      int64_t best = kInf;
      int32_t choice = -1;
      if (s == t) {
        best = m >= c_.base[s] ? (first ? 0 : c_.base_flops[s]) : kInf;
      } else {
        if (m >= c_.keep[s]) {
          best = sum(first ? 0 : c_.keep_flops[s], (first ? top_ : opt_)[at(s + 1, t, m - c_.keep[s])]);
          choice = -2;
        }
        for (size_t k = s; k < t; ++k) {
          if (m < c_.x[k])
            continue;
          int64_t advance = first ? 0 : prefix_[k + 1] - prefix_[s];
          int64_t cost = sum(sum(advance, (first ? top_ : opt_)[at(k + 1, t, m - c_.x[k])]), opt_[at(s, k, m)]);
          if (cost < best) {
            best = cost;
            choice = int32_t(k);
          }
        }
      }
      (first ? top_ : opt_)[at(s, t, m)] = best;
      (first ? top_choice_ : opt_choice_)[at(s, t, m)] = choice;
    }
  }

  void rebuild(const Chain &chain, size_t s, size_t t, int64_t m, bool first,
               std::vector<std::vector<size_t>> &before) const {
    int32_t choice = (first ? top_choice_ : opt_choice_)[at(s, t, m)];
    std::vector<size_t> &here = before[chain.need_position(s, t)];
    auto emit = [&](const std::vector<size_t> &bindings) {
      if (!first)
        here.insert(here.end(), bindings.begin(), bindings.end());
    };
    if (choice == -1) {
      emit(chain.base(s));
    } else if (choice == -2) {
      emit(chain.keep(s));
      rebuild(chain, s + 1, t, m - c_.keep[s], first, before);
    } else {
      size_t k = size_t(choice);
      for (size_t b = s; b <= k; ++b)
        emit(chain.advance(b));
      rebuild(chain, k + 1, t, m - c_.x[k], first, before);
      rebuild(chain, s, k, m, false, before);
    }
  }
};

/// Drops a binding listed again before any binding runs between (its copy is current).
void dedupe(std::vector<std::vector<size_t>> &before) {
  for (std::vector<size_t> &list : before) {
    std::set<size_t> seen;
    std::vector<size_t> kept;
    for (size_t i : list)
      if (seen.insert(i).second)
        kept.push_back(i);
    list = std::move(kept);
  }
}

RematPlan evaluate(const Function &fn, const std::vector<Footprint> &footprints, std::string strategy,
                   RematSchedule schedule) {
  dedupe(schedule.before);
  RematPlan plan;
  plan.strategy = std::move(strategy);
  plan.schedule = std::move(schedule);
  RematStats stats;
  std::vector<size_t> source;
  FunctionPtr rewritten = rematerialize(fn, plan.schedule, stats, &source);
  plan.workspace =
      estimate_workspace(*rewritten, [&](size_t i) -> const Footprint & { return footprints.at(source.at(i)); });
  plan.extra_flops = stats.extra_flops;
  plan.recomputed = std::move(stats.recomputed_values);
  return plan;
}

/// The forward values a keep set decides on: the kernels of the forward
/// pass but the primal value (an output). A dropped value the backward pass
/// does not read changes the plan only through the recomputation of those
/// it does, which then recomputes it instead of keeping it alive.
std::vector<size_t> keep_set_candidates(const Function &fn, size_t end) {
  std::vector<size_t> out;
  for (size_t i = 0; i + 1 < end; ++i)
    if (fn.body.bindings[i].value->kind == ExprKind::Call)
      out.push_back(i);
  return out;
}

/// The keep set's schedule: the forward pass reads originals; each dropped
/// value is recomputed once, before the first backward binding that needs it.
RematSchedule keep_set_schedule(const Function &fn, size_t end, const std::vector<size_t> &dropped) {
  size_t n = fn.body.bindings.size();
  RematSet set{std::vector<bool>(n), std::vector<bool>(n)};
  for (size_t i = 0; i < end; ++i)
    set.reads_original[i] = true;
  for (size_t i : dropped)
    set.dropped[i] = true;
  return schedule_of(fn, set);
}

/// Keep-set plans, for any graph (skip connections, several uses, tuples).
/// With few candidates, every subset: exact over keep sets. With more, a
/// greedy descent measured exactly: from keeping everything, drop the
/// candidate that frees the most workspace per FLOP recomputed (where none
/// frees any, the cheapest), every step a plan. Past `allowance` plans the
/// descent goes on by bytes per FLOP of each value alone, unmeasured.
/// `add` evaluates a schedule and returns its plan.
template <typename Add>
void keep_set_plans(const Function &fn, size_t end, size_t exhaustive_up_to, size_t allowance, Add add) {
  std::vector<size_t> cand = keep_set_candidates(fn, end);
  size_t k = cand.size();
  if (k <= exhaustive_up_to) {
    for (uint32_t mask = 1; mask < (uint32_t(1) << k); ++mask) {
      std::vector<size_t> dropped;
      for (size_t c = 0; c < k; ++c)
        if (mask >> c & 1)
          dropped.push_back(cand[c]);
      add("keep-set", keep_set_schedule(fn, end, dropped));
    }
    return;
  }
  auto ratio = [&](size_t i) {
    return double(value_bytes(fn.body.bindings[i].var->type)) / double(1 + expr_flops(*fn.body.bindings[i].value));
  };
  // Segments: keep every g-th kernel in forward order and recompute the
  // rest once (Chen et al.'s √n for every g; on a chain, what single flips
  // from either end do not reach).
  // Each is then polished: a kept kernel moved to a neighbour, or one kept
  // or dropped more, while that beats it in both workspace and FLOPs.
  auto of_kept = [&](const std::vector<bool> &kept) {
    std::vector<size_t> dropped;
    for (size_t c = 0; c < k; ++c)
      if (!kept[c])
        dropped.push_back(cand[c]);
    return keep_set_schedule(fn, end, dropped);
  };
  size_t segment_plans = std::min<size_t>(k - 1, allowance / 8), spent = 0;
  for (size_t i = 0; i < segment_plans; ++i) {
    size_t g = 2 + i * (k - 1) / std::max<size_t>(segment_plans, 1);
    std::vector<bool> kept(k);
    for (size_t c = 0; c < k; ++c)
      kept[c] = (c + 1) % g == 0;
    RematPlan current = add("keep-set", of_kept(kept));
    ++spent;
    for (bool better = true; better && spent + 3 * k <= allowance / 2;) {
      better = false;
      for (size_t c = 0; c < k && !better; ++c)
        for (int move : {-1, 0, 1}) {
          std::vector<bool> next = kept;
          if (move == 0) {
            next[c] = !next[c];
          } else {
            size_t to = c + size_t(move);
            if (!kept[c] || to >= k || kept[to])
              continue;
            next[c] = false;
            next[to] = true;
          }
          RematPlan p = add("keep-set", of_kept(next));
          ++spent;
          if (p.workspace <= current.workspace && p.extra_flops <= current.extra_flops &&
              (p.workspace < current.workspace || p.extra_flops < current.extra_flops)) {
            kept = std::move(next);
            current = std::move(p);
            better = true;
            break;
          }
        }
    }
  }
  allowance -= std::min(allowance, spent);
  std::stable_sort(cand.begin(), cand.end(), [&](size_t a, size_t b) { return ratio(a) > ratio(b); });
  // Walks over keep sets by single flips, each measured, never back to a set
  // seen. Down from keeping everything: a flip that frees bytes and
  // recomputes less first, then the most bytes freed per FLOP added, then
  // (a plateau) the fewest FLOPs added. Then up from the leanest set found:
  // the most FLOPs saved per byte added. Each walk traces the trade-off from
  // its end; half the allowance each.
  auto schedule_of_state = [&](const std::vector<bool> &st) {
    std::vector<size_t> dropped;
    for (size_t c = 0; c < k; ++c)
      if (st[c])
        dropped.push_back(cand[c]);
    return keep_set_schedule(fn, end, dropped);
  };
  std::set<std::vector<bool>> visited;
  size_t evaluations = 0;
  std::vector<bool> leanest;
  int64_t leanest_workspace = std::numeric_limits<int64_t>::max();
  auto walk = [&](std::vector<bool> state, bool down, size_t limit) {
    visited.insert(state);
    RematPlan current = add("keep-set", schedule_of_state(state));
    while (evaluations + k <= limit) {
      int best = -1;
      double best_score = 0;
      RematPlan chosen;
      for (size_t c = 0; c < k; ++c) {
        state[c] = !state[c];
        if (!visited.count(state)) {
          RematPlan p = add("keep-set", schedule_of_state(state));
          ++evaluations;
          if (p.workspace < leanest_workspace) {
            leanest_workspace = p.workspace;
            leanest = state;
          }
          double freed = double(current.workspace - p.workspace), cost = double(p.extra_flops - current.extra_flops);
          double score = freed >= 0 && cost <= 0 && freed - cost > 0 ? 3 + freed - cost
                         : down && freed > 0                         ? 2 - 1 / (1 + freed / (1 + cost))
                         : down && freed == 0                        ? 1 / (1 + cost)
                         : !down && cost < 0                         ? 2 - 1 / (1 - cost / (1 - freed))
                                                                     : 0;
          if (score > best_score) {
            best_score = score;
            best = int(c);
            chosen = std::move(p);
          }
        }
        state[c] = !state[c];
      }
      if (best < 0)
        break;
      state[size_t(best)] = !state[size_t(best)];
      visited.insert(state);
      current = std::move(chosen);
    }
    return state;
  };
  std::vector<bool> state = walk(std::vector<bool>(k), true, allowance / 2);
  if (!leanest.empty())
    walk(leanest, false, allowance);
  // Past the measured descent (many candidates), the rest by bytes per FLOP.
  std::vector<size_t> dropped, rest;
  for (size_t c = 0; c < k; ++c)
    (state[c] ? dropped : rest).push_back(cand[c]);
  size_t steps = std::max<size_t>(1, allowance - std::min(allowance, evaluations));
  for (size_t c = 0; c < rest.size(); ++c)
    if (c + 1 == rest.size() || c % std::max<size_t>(1, rest.size() / steps) == 0) {
      std::vector<size_t> more = dropped;
      more.insert(more.end(), rest.begin(), rest.begin() + std::ptrdiff_t(c + 1));
      add("keep-set", keep_set_schedule(fn, end, more));
    }
}

/// The plans no other plan beats in both workspace and FLOPs (the first,
/// keeping everything, stays first).
void drop_dominated(std::vector<RematPlan> &plans) {
  std::vector<RematPlan> kept{std::move(plans[0])};
  std::vector<size_t> order(plans.size() - 1);
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i + 1;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plans[a].extra_flops != plans[b].extra_flops ? plans[a].extra_flops < plans[b].extra_flops
                                                        : plans[a].workspace < plans[b].workspace;
  });
  int64_t least = kept[0].workspace; // by fewer FLOPs
  for (size_t i : order)
    if (plans[i].workspace < least) {
      least = plans[i].workspace;
      kept.push_back(std::move(plans[i]));
    }
  plans = std::move(kept);
}

/// remat_chain, given the function's uses.
RematChain chain_of(const Function &fn, const Uses &uses) {
  RematChain chain;
  chain.forward_end = forward_end(fn);
  if (chain.forward_end == 0)
    return chain;
  // Value i crosses the cuts after it up to its last forward reader: cut p
  // (before binding p) is where exactly one value crosses.
  size_t computing = computing_end(fn, chain.forward_end);
  std::vector<int64_t> diff(chain.forward_end + 1, 0);
  for (size_t i = 0; i < chain.forward_end; ++i) {
    size_t last = i;
    for (size_t j : uses.readers[i])
      if (j < computing)
        last = std::max(last, j);
    diff[i + 1] += 1;
    diff[last + 1] -= 1;
  }
  chain.block_begin.push_back(0);
  int64_t crossing = 0;
  for (size_t p = 1; p < chain.forward_end; ++p) {
    crossing += diff[p];
    if (crossing == 1)
      chain.block_begin.push_back(p);
  }
  return chain;
}

} // namespace

RematChain remat_chain(const Function &fn) { return chain_of(fn, Uses(fn)); }

size_t remat_candidates(const Function &fn) { return keep_set_candidates(fn, forward_end(fn)).size(); }

std::vector<RematPlan> remat_plans(const Function &fn, const std::vector<Footprint> &footprints, bool sqrt_only,
                                   size_t exhaustive_up_to) {
  size_t n = fn.body.bindings.size();
  std::vector<RematPlan> plans{
      evaluate(fn, footprints, "none", {std::vector<bool>(n), std::vector<std::vector<size_t>>(n + 1)})};
  Uses uses(fn);
  RematChain rc = chain_of(fn, uses);
  if (rc.block_begin.empty())
    return plans;
  std::map<std::pair<std::vector<bool>, std::vector<std::vector<size_t>>>, size_t> seen;
  auto add = [&](const char *strategy, RematSchedule schedule) -> RematPlan {
    dedupe(schedule.before);
    auto [it, fresh] = seen.try_emplace({schedule.reads_original, schedule.before}, plans.size());
    if (fresh)
      plans.push_back(evaluate(fn, footprints, strategy, std::move(schedule)));
    return plans[it->second];
  };
  auto chain_schedule = [n] { return RematSchedule{std::vector<bool>(n), std::vector<std::vector<size_t>>(n + 1)}; };
  Chain chain(fn, rc, uses);
  size_t L = chain.blocks();
  // √n segments (Chen et al. 2016): the first sweep keeps x at the end of
  // every segment but the last; each segment is recomputed once, kept whole.
  size_t g = std::max<size_t>(1, size_t(std::ceil(std::sqrt(double(L)))));
  RematSchedule sqrt = chain_schedule();
  for (size_t s = 0; s + g < L; s += g) {
    size_t t = s + g - 1; // x[t] is kept: the segment's last backward step has it at hand
    std::vector<size_t> &here = sqrt.before[chain.need_position(s, t)];
    for (size_t k = s; k <= t; ++k) {
      const std::vector<size_t> &b = k < t ? chain.keep(k) : chain.base(k);
      here.insert(here.end(), b.begin(), b.end());
    }
  }
  add("sqrt", std::move(sqrt));
  if (sqrt_only)
    return plans;
  int64_t total = 0;
  for (size_t k = 0; k < L; ++k)
    total += chain.keep_bytes(k);
  int64_t unit = std::max<int64_t>(kBufferAlignment, (total + kLevels - 1) / kLevels);
  ChainCosts costs = chain.costs(unit);
  Program program(costs);
  std::vector<std::vector<std::vector<size_t>>> levels; // the program's distinct schedules, leaner and leaner
  std::set<std::vector<std::vector<size_t>>> distinct;
  for (int64_t m = kLevels; m >= 0; --m)
    if (program.top(m) < kInf) {
      RematSchedule b = chain_schedule();
      program.schedule(chain, m, b.before);
      dedupe(b.before);
      if (distinct.insert(b.before).second)
        levels.push_back(std::move(b.before));
    }
  size_t allowance = std::max(kMinPlans, kWork / std::max<size_t>(n, 1)), spent = plans.size();
  // A schedule that copies more than kWork / 2 bindings (the leanest levels
  // of a long chain recompute it many times over) would take most of a
  // second to measure alone: left out.
  std::erase_if(levels, [&](const std::vector<std::vector<size_t>> &before) {
    size_t copies = 0;
    for (const std::vector<size_t> &b : before)
      copies += b.size();
    return copies > std::max(kWork / 2, 4 * n);
  });
  size_t every = std::max<size_t>(1, (levels.size() + allowance / 2 - 1) / std::max<size_t>(allowance / 2, 1));
  for (size_t l = 0; l < levels.size(); ++l)
    if (l % every == 0 || l + 1 == levels.size()) // the leanest always
      add("chain", {std::vector<bool>(n), levels[l]});
  spent = plans.size() - spent;
  keep_set_plans(fn, rc.forward_end, exhaustive_up_to, allowance - std::min(allowance, spent), add);
  drop_dominated(plans);
  return plans;
}

int64_t chain_program_cost(const ChainCosts &costs, int64_t m) {
  GRADC_CHECK(m >= 0 && m <= kLevels, "remat", "a chain program has levels 0.." + std::to_string(kLevels));
  return Program(costs).top(m);
}

const RematPlan *choose_plan(const std::vector<RematPlan> &plans, int64_t budget) {
  const RematPlan *best = nullptr;
  for (const RematPlan &p : plans)
    if (p.workspace <= budget && (!best || p.extra_flops < best->extra_flops ||
                                  (p.extra_flops == best->extra_flops && p.workspace < best->workspace)))
      best = &p;
  return best;
}

} // namespace gradc
