//===- OnnxMapping.h - what the mapping files share -------------------------===//
//
// The ONNX operator table (OnnxOps.cpp) maps most operators itself; the
// windowed ones (Conv, ConvTranspose and the pools in 1-D, 2-D and 3-D:
// OnnxWindow.cpp) and the index ones (Gather, GatherElements, GatherND,
// ScatterND, Einsum: OnnxIndex.cpp) live in files of their own. This header
// declares those mappings and the small helpers every mapping file reads
// attributes and builds slices with.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "OnnxOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gradc::onnx_import {

/// "[1, 2, 3]", for messages.
std::string ints(const std::vector<int64_t> &v);
inline int64_t rank(const Type &t) { return int64_t(t.shape.size()); }
inline int64_t norm_axis(int64_t axis, int64_t r) { return axis < 0 ? axis + r : axis; }
/// `axis` of a rank-`r` input, in [-r, r) (or [-r, r] where `end` is allowed:
/// Flatten), made non-negative; nullopt after reporting it.
std::optional<int64_t> checked_axis(NodeCtx &ctx, const char *name, int64_t axis, int64_t r, bool end = false);
/// A 0/1 attribute (keepdims): another value is an error, not "true".
std::optional<bool> flag(NodeCtx &ctx, const char *name, int64_t fallback);
/// The attribute `name`, or from opset `moved` on, the constant input `input`.
std::optional<std::vector<int64_t>> ints_attr_or_input(NodeCtx &ctx, const std::string &name, size_t input,
                                                       int64_t moved);
/// Input i's scalar constant value, or nullopt after reporting it as `what`.
std::optional<double> scalar_input(NodeCtx &ctx, size_t i, const std::string &what);
/// 0, 1, ..., n - 1 in `dtype` (computed at run time: gradc has no tensor
/// literals): positions for Range, Resize and Trilu.
ExprPtr iota(Builder &b, int64_t n, DType dtype);
/// x[begin:end:step] along `axis`.
ExprPtr slice_axis(Builder &b, ExprPtr x, int64_t axis, int64_t begin, int64_t end, int64_t step = 1);

// OnnxWindow.cpp
Mapped conv(NodeCtx &ctx, bool transposed);
Mapped pool(NodeCtx &ctx, bool average);
Mapped global_pool(NodeCtx &ctx, bool average);

// OnnxIndex.cpp
Mapped gather(NodeCtx &ctx);
Mapped gather_elements(NodeCtx &ctx);
Mapped gather_nd(NodeCtx &ctx);
Mapped scatter_nd(NodeCtx &ctx);
Mapped einsum(NodeCtx &ctx);

} // namespace gradc::onnx_import
