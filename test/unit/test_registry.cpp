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
  CHECK(ops::start_checkpoint->checkpoint == CheckpointMarker::Start);
  CHECK(ops::end_checkpoint->checkpoint == CheckpointMarker::End);
  int markers = 0;
  for (const OpDef *def : OpRegistry::global().all())
    markers += def->checkpoint != CheckpointMarker::None;
  CHECK(markers == 2);
}
