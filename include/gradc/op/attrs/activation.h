//===- attrs/activation.h - typed attributes of the activations -----------===//
//
// The attributes of nn.leaky_relu, nn.prelu, nn.dropout, nn.gelu and
// nn.softplus (lib/op/activation.cpp).
// Read by the operators' relations, gradients and kernels (attrs_as<T>())
// and by the ONNX importer, which builds calls with them:
// `b.call(ops::leaky_relu, {x}, LeakyReluAttrs{.alpha = 0.2})`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/op/Attrs.h"

#include <string>

namespace gradc {

struct LeakyReluAttrs {
  double alpha = 0.01;
  template <class V> void visit(V &v) { v("alpha", alpha, "The slope for x <= 0."); }
};

struct PReluAttrs {
  int64_t axis = 1;
  template <class V> void visit(V &v) { v("axis", axis, "The channel axis alpha runs along.", {.axis_of = 0}); }
};

struct DropoutAttrs {
  double rate = 0.5;
  bool training = false;
  int64_t stream = 0;
  template <class V> void visit(V &v) {
    v("rate", rate, "The training-time drop probability (unused at inference).");
    v("training", training, "Drop elements (the seed argument keys the mask); false: the identity.");
    v("stream", stream,
      "In training, which of the seed's independent streams the mask draws from: dropout sites sharing a seed "
      "need different streams.",
      {.min = 0});
  }
};

struct GeluAttrs {
  std::string approximate = "none";
  template <class V> void visit(V &v) {
    v("approximate", approximate, "\"none\": x·Φ(x) with erf; \"tanh\": the tanh approximation.",
      {.one_of = {"none", "tanh"}});
  }
};

struct SoftplusAttrs {
  double beta = 1;
  double threshold = 20;
  template <class V> void visit(V &v) {
    v("beta", beta, "The sharpness: log(1 + e^(beta·x)) / beta.");
    v("threshold", threshold, "Above it, beta·x is returned as x (linear).");
  }
};

} // namespace gradc
