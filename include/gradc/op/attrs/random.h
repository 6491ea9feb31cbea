//===- attrs/random.h - typed attributes of the random operators ----------===//
//
// The attributes of nn.dropout_mask (lib/op/random.cpp). Read by its
// relation and kernel (attrs_as<T>()) and by the ONNX importer, which builds
// a training-mode Dropout with them:
// `b.call(ops::dropout_mask, {seed}, DropoutMaskAttrs{.shape = s, .rate = 0.1, .stream = 3})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <vector>

namespace gradc {

struct DropoutMaskAttrs {
  std::vector<int64_t> shape;
  double rate = 0.5;
  int64_t stream = 0;
  template <class V> void visit(V &v) {
    v("shape", shape, "The mask's shape.", {.required = true, .shape = true});
    v("rate", rate, "The probability that an element is dropped (false), in [0, 1).");
    v("stream", stream,
      "Which of the seed's independent streams the mask draws from: one per dropout site, so that two sites "
      "of one shape get different masks.",
      {.min = 0});
  }
};

} // namespace gradc
