//===- cuda/index.cpp - the GPU's grad.take_backward ----------------------===//
//
// The generic kernel (index.cpp) zeroes the output, then scatters with the
// index axes serial inside. Here the zeroing is a launch of its own, a
// thread per element (an embedding table's gradient is large: a thread per
// column zeroing its whole column left the device idle), then the scatter a
// thread per column, in order.
//
//===----------------------------------------------------------------------===//
#include "Cuda.h"
#include "../take.h"
#include "gradc/op/Registry.h"

namespace gradc {
namespace {

/// out = 0 as a nest over every element of out (a launch of its own: a
/// thread per element), then out[data_index(o)] += g[o] for every o: a
/// thread per element of the axes around the taken one scatters into its
/// column in order (no two threads write one element, and every run sums in
/// the same order: no atomics).
StmtPtr cuda_take_backward(KernelCtx &k) {
  TakeShape t = take_shape(k.call, k.arg_type(1), k.arg_type(2));
  const Type &g = k.arg_type(0), &x = k.arg_type(1);
  const BufferPtr &out = k.out();
  Shape outer(t.data.begin(), t.data.begin() + t.axis);
  outer.insert(outer.end(), t.data.begin() + t.axis + 1, t.data.end());
  Shape rest(t.indices.begin() + t.batch, t.indices.end());
  auto full = [&](const Index &o, const Index &middle) {
    Index i(o.begin(), o.begin() + t.axis);
    i.insert(i.end(), middle.begin(), middle.end());
    i.insert(i.end(), o.begin() + t.axis, o.end());
    return i;
  };
  auto flat = [&](const Index &d) { return flat_index(x.shape, real_index(x.shape, t, d)); };
  StmtPtr zero = loop_nest(
      {num_elements(out->shape)}, [&](const Index &e) { return store(out, e[0], constant_of(0, out->dtype)); },
      ForKind::Spatial, "z");
  if (num_elements(rest) == 0 || num_elements(g.shape) == 0)
    return zero;
  StmtPtr scatter = loop_nest(outer, [&](const Index &o) {
    return loop_nest(
        rest,
        [&](const Index &r) {
          Index go = full(o, r);
          LExprPtr at = flat(data_index(t, go, [&](const Index &i) { return k.in(2, i); }));
          return store(out, at, add(load(out, at), k.in(0, go)));
        },
        ForKind::Reduce, "r");
  });
  return seq({zero, scatter});
}

} // namespace

void register_cuda_index(OpRegistry &reg) { reg.strategy("grad.take_backward", TargetKind::CUDA, cuda_take_backward); }

} // namespace gradc
