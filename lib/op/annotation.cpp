//===- annotation.cpp - on_device, device_copy ----------------------------===//
//
// TVM's device annotations. gradc compiles a function for one device (the
// CPU, or one GPU), so placing a value on a device or copying it between
// devices is the identity: both are compositions that return their operand
// (no kernel, no buffer), and the gradient passes straight through. Their
// attributes are accepted with TVM's names (device ids as integers; TVM's
// `meta[VirtualDevice]` references are rejected by the parser like every
// `meta`) so that TVM programs that carry them compile.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/annotation.h"
#include "gradc/op/Ops.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

ExprPtr identity(Builder &, const std::vector<ExprPtr> &a, const Attrs &) { return a[0]; }

} // namespace

void register_annotation_ops(OpRegistry &reg) {
  reg.add("on_device")
      .describe("TVM's device placement annotation: the identity on one device.")
      .arg("data", "Tensor", "The value placed.")
      .attrs<OnDeviceAttrs>()
      .support_level(10)
      .relation("Identity", identity_rel)
      .decompose(identity)
      .example("%x: Tensor[(2, 3), float64]", "on_device(%x, device_type=1, constrain_result=False)");

  reg.add("device_copy")
      .describe("TVM's copy between devices: the identity on one device.")
      .arg("data", "Tensor", "The value copied.")
      .attrs<DeviceCopyAttrs>()
      .support_level(10)
      .relation("Identity", identity_rel)
      .decompose(identity)
      .example("%x: Tensor[(2, 3), float64]", "device_copy(%x, src_dev_type=1, dst_dev_type=2)");
}

} // namespace gradc
