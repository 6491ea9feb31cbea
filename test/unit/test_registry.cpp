//===- test_registry.cpp - the operator record and its typed handles -----===//
#include "gradc/op/Ops.h"
#include "gradc/op/Registry.h"

#include <catch2/catch.hpp>

#include <set>
#include <string>

using namespace gradc;

TEST_CASE("every typed operator handle names a registered operator", "[registry]") {
  for (const OpRef *ref : all_op_refs()) {
    INFO(ref->name());
    const OpDef *def = OpRegistry::global().find(ref->name());
    REQUIRE(def != nullptr);
    CHECK(ref->get() == def);
  }
}

TEST_CASE("every registered operator has a typed handle", "[registry]") {
  std::set<std::string> handled;
  for (const OpRef *ref : all_op_refs())
    handled.insert(ref->name());
  for (const OpDef *def : OpRegistry::global().all()) {
    INFO(def->name << " has no line in include/gradc/op/Ops.def");
    CHECK(handled.count(def->name) == 1);
  }
}

TEST_CASE("checkpoint markers are properties of the operator record", "[registry]") {
  CHECK(ops::start_checkpoint.get()->checkpoint == CheckpointMarker::Start);
  CHECK(ops::end_checkpoint.get()->checkpoint == CheckpointMarker::End);
  int markers = 0;
  for (const OpDef *def : OpRegistry::global().all())
    markers += def->checkpoint != CheckpointMarker::None;
  CHECK(markers == 2);
}

TEST_CASE("a composite has no kernel of its own; a gradient rule only where its parts' would waste work",
          "[registry]") {
  int composites = 0;
  std::vector<std::string> with_rule;
  for (const OpDef *def : OpRegistry::global().all()) {
    if (!def->decompose)
      continue;
    INFO(def->name);
    ++composites;
    if (def->gradient) {
      with_rule.push_back(def->name);
      CHECK(!def->examples.empty()); // the finite-difference test checks the rule
    }
    CHECK(def->element == nullptr);
    CHECK(def->kernel == nullptr);
    CHECK(def->strategies.empty());
    CHECK(def->has_gradient());
    CHECK(def->has_lowering());
  }
  CHECK(composites >= 4); // rsqrt, zeros_like, ones_like, collapse_sum_like
  // variance: the parts' gradient sums x - mean(x), zero, once more
  CHECK(with_rule == std::vector<std::string>{"variance"});
}
