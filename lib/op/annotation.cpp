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
#include "gradc/op/Ops.h"
#include "gradc/op/Builder.h"
#include "gradc/op/Relations.h"

namespace gradc {
namespace {

struct OnDeviceAttrs {
  int64_t device_type = 0;
  std::optional<int64_t> virtual_device;
  bool is_fixed = false;
  bool constrain_result = true;
  bool constrain_body = true;
  template <class V> void visit(V &v) {
    v("device_type", device_type, "TVM's device type id (1: CPU, 2: CUDA); one device here.", {.min = 0});
    v("virtual_device", virtual_device, "A virtual device id (informational).", {.min = 0});
    v("is_fixed", is_fixed, "TVM: the placement is fixed (informational).");
    v("constrain_result", constrain_result, "TVM: the result is on the device (informational).");
    v("constrain_body", constrain_body, "TVM: the body is on the device (informational).");
  }
};

struct DeviceCopyAttrs {
  int64_t src_dev_type = 0;
  int64_t dst_dev_type = 0;
  std::optional<int64_t> src_virtual_device, dst_virtual_device;
  template <class V> void visit(V &v) {
    v("src_dev_type", src_dev_type, "TVM's source device type id (informational).", {.min = 0});
    v("dst_dev_type", dst_dev_type, "TVM's destination device type id (informational).", {.min = 0});
    v("src_virtual_device", src_virtual_device, "The source virtual device id (informational).", {.min = 0});
    v("dst_virtual_device", dst_virtual_device, "The destination virtual device id (informational).", {.min = 0});
  }
};

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
