//===- attrs/annotation.h - typed attributes of the device annotations ----===//
//
// The attributes of on_device and device_copy (lib/op/annotation.cpp), with
// TVM's names; gradc reads none of them but checks their ranges.
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::on_device, {x}, OnDeviceAttrs{.device_type = 1})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <optional>

namespace gradc {

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

} // namespace gradc
