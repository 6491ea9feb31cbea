//===- test_registry.cpp - the operator record and its typed handles -----===//
#include "gradc/op/Ops.h"
#include "gradc/op/Registry.h"

#include <catch2/catch.hpp>

using namespace gradc;

TEST_CASE("every typed operator handle names a registered operator", "[registry]") {
  for (const OpRef *ref : all_op_refs()) {
    INFO(ref->name());
    const OpDef *def = OpRegistry::global().find(ref->name());
    REQUIRE(def != nullptr);
    CHECK(ref->get() == def);
  }
}

TEST_CASE("checkpoint markers are properties of the operator record", "[registry]") {
  const OpDef *start = OpRegistry::global().find("grad.start_checkpoint");
  const OpDef *end = OpRegistry::global().find("grad.end_checkpoint");
  REQUIRE(start != nullptr);
  REQUIRE(end != nullptr);
  CHECK(start->checkpoint == CheckpointMarker::Start);
  CHECK(end->checkpoint == CheckpointMarker::End);
  int markers = 0;
  for (const OpDef *def : OpRegistry::global().all())
    markers += def->checkpoint != CheckpointMarker::None;
  CHECK(markers == 2);
}

TEST_CASE("a composite has no gradient rule or kernel of its own", "[registry]") {
  int composites = 0;
  for (const OpDef *def : OpRegistry::global().all()) {
    if (!def->decompose)
      continue;
    INFO(def->name);
    ++composites;
    CHECK(def->gradient == nullptr);
    CHECK(def->element == nullptr);
    CHECK(def->kernel == nullptr);
    CHECK(def->strategies.empty());
    CHECK(def->has_gradient());
    CHECK(def->has_lowering());
  }
  CHECK(composites >= 4); // rsqrt, zeros_like, ones_like, collapse_sum_like
}
