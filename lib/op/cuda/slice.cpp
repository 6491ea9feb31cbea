//===- cuda/slice.cpp - the GPU's concatenate and split -------------------===//
//
// A GPU kernel is one launch over one nest: where the generic kernels
// (slice.cpp) copy part by part, these are one nest over the larger side.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../slice.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

/// A nest over the output that picks the part of each element.
StmtPtr cuda_concatenate(KernelCtx &k) {
  const Shape &out = k.out()->shape;
  auto [axis, inputs, offsets] = ConcatParts(k.call);
  return loop_nest(out, [&](const Index &o) {
    StmtPtr chain;
    for (size_t j = inputs.size(); j-- > 0;) {
      if (inputs[j].shape[axis] == 0)
        continue;
      Index i = o;
      i[axis] = clamp_index(sub(o[axis], imm(offsets[j])), inputs[j].shape[axis]); // (bounded for the verifier)
      StmtPtr copy = store(k.out(), flat_index(out, o), k.in(j, i));
      chain = chain ? if_then(compare(CompareOp::LT, o[axis], imm(offsets[j + 1])), copy, chain) : copy;
    }
    return chain;
  });
}

/// One nest over the input that stores each element into every part
/// holding it.
StmtPtr cuda_split(KernelCtx &k) {
  auto a = k.attrs_as<SplitAttrs>();
  const Shape &in = k.arg_type(0).shape;
  auto ranges = split_parts(a, in[a.axis]);
  return loop_nest(in, [&](const Index &i) {
    std::vector<StmtPtr> stores;
    for (size_t j = 0; j < ranges.size(); ++j) {
      auto [begin, end] = ranges[j];
      if (end == begin)
        continue;
      Index o = i;
      o[a.axis] = clamp_index(sub(i[a.axis], imm(begin)), end - begin);
      stores.push_back(if_then(in_range(i[a.axis], begin, end),
                               store(k.out(j), flat_index(k.out(j)->shape, o), k.in(0, i))));
    }
    return seq(stores);
  });
}

} // namespace

void register_cuda_slice(OpRegistry &reg) {
  reg.strategy("concatenate", TargetKind::CUDA, cuda_concatenate);
  reg.strategy("split", TargetKind::CUDA, cuda_split);
}

} // namespace gradc
