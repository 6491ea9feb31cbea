//===- random.cpp - nn.dropout_mask: random masks from a counter ----------===//
//
// Randomness as GPUs and JAX do it: element i of a mask is a pure function
// of (seed, stream, i) through Philox-4x32-10 (loops/Random.h), so a mask is
// the same bits on every thread count, on the CPU and the GPU, and when
// rematerialization or a gradient computes it again: the backward pass of a
// dropout recomputes its mask from the seed instead of keeping a tensor.
//
// The key is the seed plus the stream times 2^64/φ (wrapping), the counter
// the element's row-major index; element i is kept when the 32 random bits
// are at least rate · 2^32 (rounded), so it is dropped with probability
// rate to within 2^-33.
//
//===----------------------------------------------------------------------===//
#include "gradc/op/attrs/random.h"
#include "gradc/op/Kernel.h"
#include "gradc/op/Registry.h"

#include <cmath>

namespace gradc {
namespace {

/// The seed's offset for stream s: s times the 64-bit golden ratio, so that
/// the keys of the streams of one seed are far apart.
int64_t stream_offset(int64_t stream) { return int64_t(uint64_t(stream) * 0x9E3779B97F4A7C15ull); }

/// The smallest 32-bit draw that keeps an element.
int64_t keep_threshold(double rate) { return int64_t(std::llround(std::ldexp(rate, 32))); }

Type dropout_mask_rel(RelationCtx &ctx) {
  const Type *seed = ctx.tensor(0);
  if (!seed)
    return Type::unknown();
  if (seed->dtype != DType::Int64 || seed->rank() != 0)
    return ctx.fail("the seed must be a scalar int64, found " + seed->str());
  DropoutMaskAttrs a = ctx.attrs_as<DropoutMaskAttrs>();
  if (!(a.rate >= 0 && a.rate < 1))
    return ctx.fail_attr("rate", "rate must be in [0, 1), found " + ctx.attrs.get("rate").str());
  return Type::tensor(a.shape, DType::Bool);
}

} // namespace

void register_random_ops(OpRegistry &reg) {
  reg.add("nn.dropout_mask")
      .describe("A training-time dropout mask: element i is true (kept) with probability 1 - rate, drawn from "
                "Philox-4x32-10 keyed by the seed and the stream, counted by i: the same bits on every thread "
                "count, on the CPU and the GPU, and when recomputed.")
      .arg("seed", "Tensor[(), int64]", "The random key (64 bits; a training loop advances it every step).")
      .attrs<DropoutMaskAttrs>()
      .support_level(4)
      .relation("DropoutMask", dropout_mask_rel)
      .no_gradient()
      .element([](ElementCtx &c) {
        DropoutMaskAttrs a = c.attrs_as<DropoutMaskAttrs>();
        LExprPtr key = binary(BinaryOp::Add, c.in(0, {}), imm(stream_offset(a.stream)));
        LExprPtr bits = binary(BinaryOp::Philox, key, flat_index(c.type().shape, c.index));
        return compare(CompareOp::GE, bits, imm(keep_threshold(a.rate)));
      });
}

} // namespace gradc
