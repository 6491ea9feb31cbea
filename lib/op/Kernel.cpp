//===- Kernel.cpp - index arithmetic and loop nests for operator lowering -===//
#include "gradc/op/Kernel.h"
#include "gradc/support/Diagnostics.h"

#include <cmath>
#include <limits>

namespace gradc {

LExprPtr constant_of(double value, DType dtype) {
  if (is_float(dtype))
    return float_imm(value, dtype);
  if (dtype == DType::Bool)
    return int_imm(value != 0, dtype);
  double lo = dtype == DType::Int32 ? double(std::numeric_limits<int32_t>::min()) : -9.2e18;
  double hi = dtype == DType::Int32 ? double(std::numeric_limits<int32_t>::max()) : 9.2e18;
  return int_imm(int64_t(std::isnan(value) ? 0 : std::fmin(std::fmax(value, lo), hi)), dtype);
}

LExprPtr flat_index(const Shape &shape, const Index &idx) {
  GRADC_CHECK(shape.size() == idx.size(), "lowering",
              "index of rank " + std::to_string(idx.size()) + " for shape " + shape_str(shape));
  LExprPtr flat;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) // the index along a size-1 axis is always 0
      continue;
    flat = flat ? binary(BinaryOp::Add, binary(BinaryOp::Mul, flat, int_imm(shape[d])), idx[d]) : idx[d];
  }
  return flat ? flat : int_imm(0);
}

Index unravel_index(const LExprPtr &flat, const Shape &shape) {
  Index idx(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    LExprPtr q = stride == 1 ? flat : binary(BinaryOp::FloorDiv, flat, int_imm(stride));
    idx[d] = d == 0 ? q : binary(BinaryOp::FloorMod, q, int_imm(shape[d]));
    stride *= shape[d];
  }
  return idx;
}

Index broadcast_index(const Shape &in_shape, const Shape &out_shape, const Index &idx) {
  Index out;
  size_t lead = out_shape.size() - in_shape.size();
  for (size_t d = 0; d < in_shape.size(); ++d)
    out.push_back(in_shape[d] == 1 && out_shape[d + lead] != 1 ? int_imm(0) : idx[d + lead]);
  return out;
}

StmtPtr loop_nest(const Shape &shape, const std::function<StmtPtr(const Index &)> &body, ForKind axis,
                  const std::string &prefix) {
  std::vector<LVarPtr> vars;
  Index idx;
  for (size_t d = 0; d < shape.size(); ++d) {
    vars.push_back(std::make_shared<LVar>(LVar{prefix + std::to_string(d)}));
    idx.push_back(var_ref(vars.back()));
  }
  StmtPtr s = body(idx);
  for (size_t d = shape.size(); d-- > 0;)
    s = for_loop(vars[d], shape[d], axis, s);
  return s;
}

LExprPtr ElementCtx::in(size_t arg) const {
  return input(arg, broadcast_index(arg_type(arg).shape, type().shape, index));
}

BufferPtr KernelCtx::local(const std::string &name, DType dtype, int64_t size) {
  return std::make_shared<Buffer>(Buffer{name, dtype, {size}, BufferScope::Local});
}

LVarPtr KernelCtx::var(const std::string &name) { return std::make_shared<LVar>(LVar{name}); }

} // namespace gradc
