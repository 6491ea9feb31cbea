//===- OnnxFold.cpp - constant tensors and the nodes folded over them -----===//
#include "OnnxFold.h"
#include "gradc/op/Relations.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <type_traits>

namespace gradc::onnx_import {

bool ConstValue::is_float() const { return dtype_info(dtype_).is_float; }

int64_t ConstValue::integer(size_t i) const {
  constexpr int64_t kLimit = int64_t(1) << 62;
  if (!is_float())
    return std::clamp(ints_[i], -kLimit, kLimit);
  double v = floats_[i];
  return v != v ? 0 : v >= double(kLimit) ? kLimit : v <= -double(kLimit) ? -kLimit : int64_t(v);
}

bool ConstValue::uniform() const {
  for (size_t i = 1; i < size(); ++i)
    if (is_float() ? !(floats_[i] == floats_[0] || (floats_[i] != floats_[i] && floats_[0] != floats_[0]))
                   : ints_[i] != ints_[0])
      return false;
  return true;
}

std::vector<int64_t> ConstValue::integers() const {
  std::vector<int64_t> out;
  out.reserve(size());
  for (size_t i = 0; i < size(); ++i)
    out.push_back(integer(i));
  return out;
}

void ConstValue::push_int(int64_t v) {
  switch (dtype_) {
  case DType::Float32: floats_.push_back(double(float(v))); return;
  case DType::Float64: floats_.push_back(double(v)); return;
  case DType::Float16: floats_.push_back(half_value(half_bits(float(v)))); return;
  case DType::Int32: ints_.push_back(int32_t(uint32_t(uint64_t(v)))); return;
  case DType::Bool: ints_.push_back(v != 0); return;
  case DType::Int64: ints_.push_back(v); return;
  }
}

void ConstValue::push_number(double v) {
  switch (dtype_) {
  case DType::Float32: floats_.push_back(double(float(v))); return;
  case DType::Float64: floats_.push_back(v); return;
  case DType::Float16: floats_.push_back(half_value(half_bits(float(v)))); return;
  case DType::Bool: ints_.push_back(v != 0); return;
  case DType::Int32:
  case DType::Int64: {
    constexpr double kTwo63 = 9223372036854775808.0;
    int64_t x = v != v ? 0 : v >= kTwo63 ? INT64_MAX : v < -kTwo63 ? INT64_MIN : int64_t(v);
    ints_.push_back(dtype_ == DType::Int32 ? std::clamp<int64_t>(x, INT32_MIN, INT32_MAX) : x);
    return;
  }
  }
}

void ConstValue::push_element(const ConstValue &from, size_t i) {
  if (from.is_float())
    push_number(from.floats_[i]);
  else
    push_int(from.ints_[i]);
}

ConstValue ConstValue::of(const Decoded &d) {
  ConstValue c(d.dtype, d.shape);
  size_t n = d.data.size() / dtype_bytes(d.dtype);
  const char *p = d.data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (d.dtype) {
    case DType::Float32: { float v; std::memcpy(&v, p + i * 4, 4); c.floats_.push_back(v); break; }
    case DType::Float64: { double v; std::memcpy(&v, p + i * 8, 8); c.floats_.push_back(v); break; }
    case DType::Float16: { uint16_t h; std::memcpy(&h, p + i * 2, 2); c.floats_.push_back(half_value(h)); break; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p + i * 8, 8); c.ints_.push_back(v); break; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p + i * 4, 4); c.ints_.push_back(v); break; }
    case DType::Bool: c.ints_.push_back(p[i] ? 1 : 0); break;
    }
  }
  return c;
}

std::string ConstValue::bytes() const {
  std::string out(size() * dtype_bytes(dtype_), '\0');
  char *p = out.data();
  for (size_t i = 0; i < size(); ++i) {
    switch (dtype_) {
    case DType::Float32: { float f = float(floats_[i]); std::memcpy(p + i * 4, &f, 4); break; }
    case DType::Float64: std::memcpy(p + i * 8, &floats_[i], 8); break;
    case DType::Float16: { uint16_t h = half_bits(float(floats_[i])); std::memcpy(p + i * 2, &h, 2); break; }
    case DType::Int64: std::memcpy(p + i * 8, &ints_[i], 8); break;
    case DType::Int32: { int32_t x = int32_t(ints_[i]); std::memcpy(p + i * 4, &x, 4); break; }
    case DType::Bool: p[i] = char(ints_[i] != 0); break;
    }
  }
  return out;
}

ConstValue scalar_of(double v, DType dtype) {
  ConstValue c(dtype, {});
  c.push_number(v);
  return c;
}

const onnx::AttributeProto *find_attr(const onnx::NodeProto &node, const std::string &name) {
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

namespace {

/// Whether a tensor of `shape` may be folded (no negative dimension, at most
/// kMaxFoldedElements elements), checked before anything is allocated.
bool foldable(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > kMaxFoldedElements)
      return false;
    n *= d;
    if (n > kMaxFoldedElements)
      return false;
  }
  return true;
}

std::vector<int64_t> strides_of(const Shape &s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t k = s.size(); k-- > 1;)
    st[k - 1] = st[k] * s[k];
  return st;
}

/// The flat index, in a tensor of shape `s` broadcast to `out`, of the
/// element that output element `flat` reads.
size_t broadcast_source(const Shape &s, const Shape &out, int64_t flat) {
  int64_t index = 0, stride = 1;
  for (size_t k = out.size(); k-- > out.size() - s.size();) {
    int64_t coord = flat % out[k], dim = s[k + s.size() - out.size()];
    flat /= out[k];
    if (dim != 1)
      index += coord * stride;
    stride *= dim;
  }
  return size_t(index);
}

/// `axis` of rank `r` made non-negative, if it is in [-r, r).
std::optional<int64_t> axis_in(int64_t axis, int64_t r) {
  if (axis < -r || axis >= r)
    return std::nullopt;
  return axis < 0 ? axis + r : axis;
}

/// A tensor of `shape` whose element at each index (c_0, ..., c_r-1) is the
/// element of `a` at flat offset Σ_k term(k, c_k): a slice, a transpose, a
/// tile of `a`.
template <class Term> ConstValue remapped(const ConstValue &a, const Shape &shape, Term term) {
  ConstValue out(a.dtype(), shape);
  for (int64_t i = 0; i < num_elements(shape); ++i) {
    int64_t rest = i, src = 0;
    for (size_t k = shape.size(); k-- > 0;) {
      src += term(k, rest % shape[k]);
      rest /= shape[k];
    }
    out.push_element(a, size_t(src));
  }
  return out;
}

class Folder {
public:
  Folder(const onnx::NodeProto &node, const std::vector<FoldInput> &in, int64_t opset)
      : node_(node), in_(in), opset_(opset), op_(node.op_type()) {}
  std::optional<ConstValue> run();

private:
  const onnx::NodeProto &node_;
  const std::vector<FoldInput> &in_;
  int64_t opset_;
  const std::string &op_;

  int64_t attr_int(const char *name, int64_t fallback) const {
    const onnx::AttributeProto *a = find_attr(node_, name);
    return a ? a->i() : fallback;
  }
  std::optional<std::vector<int64_t>> attr_ints(const char *name) const {
    const onnx::AttributeProto *a = find_attr(node_, name);
    if (!a)
      return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  const ConstValue *c(size_t i) const { return i < in_.size() ? in_[i].constant : nullptr; }
  /// Axes from the attribute (before opset `moved`) or from input 1.
  std::optional<std::vector<int64_t>> axes(int64_t moved) const {
    if (opset_ >= moved)
      return c(1) ? std::optional(c(1)->integers()) : std::nullopt;
    return attr_ints("axes");
  }

  std::optional<ConstValue> reshaped(const ConstValue &a, Shape shape) const {
    if (num_elements(shape) != int64_t(a.size()))
      return std::nullopt;
    ConstValue out = a;
    out.set_shape(std::move(shape));
    return out;
  }
  std::optional<ConstValue> elementwise(size_t arity);
  std::optional<ConstValue> gather();
  std::optional<ConstValue> concat();
  std::optional<ConstValue> slice();
  std::optional<ConstValue> reshape();
  std::optional<ConstValue> transpose();
  std::optional<ConstValue> tile();
  std::optional<ConstValue> scatter_nd();
  std::optional<ConstValue> range();
  std::optional<ConstValue> constant_of_shape();
  std::optional<ConstValue> expand();
  std::optional<ConstValue> flatten();
  std::optional<ConstValue> unsqueeze();
  std::optional<ConstValue> squeeze();
  std::optional<ConstValue> trilu();

public:
  /// The operators folded by a method of their own (the elementwise ones by elementwise()).
  using Fold = std::optional<ConstValue> (Folder::*)();
  static const std::vector<std::pair<std::string, Fold>> kFolds;
};

const std::vector<std::pair<std::string, Folder::Fold>> Folder::kFolds = {
    {"Gather", &Folder::gather},       {"Concat", &Folder::concat},       {"Slice", &Folder::slice},
    {"Reshape", &Folder::reshape},     {"Transpose", &Folder::transpose}, {"Tile", &Folder::tile},
    {"ScatterND", &Folder::scatter_nd}, {"Range", &Folder::range},        {"ConstantOfShape", &Folder::constant_of_shape},
    {"Expand", &Folder::expand},       {"Flatten", &Folder::flatten},     {"Unsqueeze", &Folder::unsqueeze},
    {"Squeeze", &Folder::squeeze},     {"Trilu", &Folder::trilu}};

/// x op y for integers as ONNX computes them: wrapping, Div truncating
/// toward zero, Mod with the divisor's sign (fmod: the dividend's); nothing
/// for a division by zero, which is left to run time.
std::optional<int64_t> int_binary(const std::string &op, int64_t x, int64_t y, bool fmod) {
  uint64_t ux = uint64_t(x), uy = uint64_t(y);
  if (op == "Add" || op == "Sum")
    return int64_t(ux + uy);
  if (op == "Sub")
    return int64_t(ux - uy);
  if (op == "Mul")
    return int64_t(ux * uy);
  if (op == "Min")
    return std::min(x, y);
  if (op == "Max")
    return std::max(x, y);
  if (y == 0)
    return std::nullopt;
  if (x == INT64_MIN && y == -1)
    return op == "Div" ? x : 0;
  if (op == "Div")
    return x / y;
  int64_t r = x % y; // Mod
  return !fmod && r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}

std::optional<double> float_binary(const std::string &op, double x, double y, bool fmod) {
  if (op == "Add" || op == "Sum")
    return x + y;
  if (op == "Sub")
    return x - y;
  if (op == "Mul")
    return x * y;
  if (op == "Div")
    return x / y;
  if (op == "Min")
    return x != x || y != y ? NAN : std::min(x, y);
  if (op == "Max")
    return x != x || y != y ? NAN : std::max(x, y);
  if (op == "Mod" && fmod)
    return std::fmod(x, y);
  return std::nullopt;
}

/// A comparison (or, for integers, a logical operator) of x and y.
template <class T> std::optional<bool> compare(const std::string &op, T x, T y) {
  if (op == "Equal")
    return x == y;
  if (op == "Less")
    return x < y;
  if (op == "Greater")
    return x > y;
  if (op == "LessOrEqual")
    return x <= y;
  if (op == "GreaterOrEqual")
    return x >= y;
  if constexpr (std::is_integral_v<T>) {
    if (op == "And" || op == "Or" || op == "Xor")
      return op == "And" ? x && y : op == "Or" ? x || y : bool(x) != bool(y);
  }
  return std::nullopt;
}

const std::vector<std::string> kUnary = {"Identity", "Neg", "Abs", "Not", "Floor", "Ceil", "Cast"};
const std::vector<std::string> kBinary = {"Add", "Sub", "Mul", "Div", "Mod", "Min", "Max", "Sum",
                                          "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                          "And", "Or", "Xor"};

std::optional<ConstValue> Folder::elementwise(size_t arity) {
  const ConstValue &a = *c(0);
  if (arity == 1) {
    DType dt = a.dtype();
    if (op_ == "Cast") {
      std::optional<DType> to = dtype_of(attr_int("to", 0));
      if (!to)
        return std::nullopt; // the mapping says why
      dt = *to;
    }
    if (op_ == "Not" && dt != DType::Bool)
      return std::nullopt;
    ConstValue out(dt, a.shape());
    for (size_t i = 0; i < a.size(); ++i) {
      if (op_ == "Identity" || op_ == "Cast") {
        out.push_element(a, i);
      } else if (!a.is_float()) {
        int64_t x = a.integer(i);
        out.push_int(op_ == "Neg" ? int64_t(0 - uint64_t(x)) : op_ == "Abs" ? (x < 0 ? int64_t(0 - uint64_t(x)) : x)
                     : op_ == "Not" ? !x : x);
      } else {
        double x = a.number(i);
        out.push_number(op_ == "Neg" ? -x : op_ == "Abs" ? std::fabs(x) : op_ == "Floor" ? std::floor(x)
                        : op_ == "Ceil" ? std::ceil(x) : x);
      }
    }
    return out;
  }
  // Binary (Min, Max and Sum of two), and Where: numpy broadcasting.
  std::vector<const ConstValue *> args;
  for (size_t i = 0; i < in_.size(); ++i)
    args.push_back(c(i));
  if (args.size() != arity)
    return std::nullopt;
  Shape shape = args[0]->shape();
  for (size_t i = 1; i < arity; ++i) {
    std::optional<Shape> s = broadcast_shapes(shape, args[i]->shape());
    if (!s)
      return std::nullopt; // the operator says why
    shape = *s;
  }
  if (!foldable(shape))
    return std::nullopt;
  if (arity == 3) { // Where
    const ConstValue &cond = *args[0], &x = *args[1], &y = *args[2];
    if (cond.dtype() != DType::Bool || x.dtype() != y.dtype())
      return std::nullopt;
    ConstValue out(x.dtype(), shape);
    for (int64_t i = 0; i < num_elements(shape); ++i)
      if (cond.integer(broadcast_source(cond.shape(), shape, i)))
        out.push_element(x, broadcast_source(x.shape(), shape, i));
      else
        out.push_element(y, broadcast_source(y.shape(), shape, i));
    return out;
  }
  const ConstValue &x = *args[0], &y = *args[1];
  if (x.dtype() != y.dtype())
    return std::nullopt;
  bool logical = op_ == "And" || op_ == "Or" || op_ == "Xor";
  if (logical != (x.dtype() == DType::Bool))
    return std::nullopt;
  bool cmp = compare<int64_t>(op_, 0, 0).has_value();
  bool fmod = attr_int("fmod", 0) != 0;
  ConstValue out(cmp ? DType::Bool : x.dtype(), shape);
  for (int64_t i = 0; i < num_elements(shape); ++i) {
    size_t ix = broadcast_source(x.shape(), shape, i), iy = broadcast_source(y.shape(), shape, i);
    if (!x.is_float()) {
      int64_t a = x.exact(ix), b = y.exact(iy);
      std::optional<int64_t> r = cmp ? std::optional<int64_t>(*compare(op_, a, b))
                                     : int_binary(op_, a, b, fmod);
      if (!r || (!cmp && x.dtype() == DType::Bool))
        return std::nullopt;
      out.push_int(*r);
    } else if (cmp) {
      out.push_int(*compare(op_, x.number(ix), y.number(iy)));
    } else {
      std::optional<double> r = float_binary(op_, x.number(ix), y.number(iy), fmod);
      if (!r)
        return std::nullopt;
      out.push_number(*r);
    }
  }
  return out;
}

std::optional<ConstValue> Folder::gather() {
  if (!c(1))
    return std::nullopt;
  const ConstValue &data = *c(0), &idx = *c(1);
  if (idx.is_float() || data.shape().empty())
    return std::nullopt;
  int64_t r = int64_t(data.shape().size());
  std::optional<int64_t> axis = axis_in(attr_int("axis", 0), r);
  if (!axis)
    return std::nullopt;
  Shape shape(data.shape().begin(), data.shape().begin() + *axis);
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), data.shape().begin() + *axis + 1, data.shape().end());
  if (!foldable(shape))
    return std::nullopt;
  int64_t dim = data.shape()[size_t(*axis)];
  int64_t inner = num_elements(Shape(data.shape().begin() + *axis + 1, data.shape().end()));
  int64_t outer = num_elements(Shape(data.shape().begin(), data.shape().begin() + *axis));
  ConstValue out(data.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t j = 0; j < idx.size(); ++j) {
      int64_t k = idx.integer(j);
      k = k < 0 ? k + dim : k;
      if (k < 0 || k >= dim)
        return std::nullopt; // the operator says why
      for (int64_t e = 0; e < inner; ++e)
        out.push_element(data, size_t((o * dim + k) * inner + e));
    }
  return out;
}

std::optional<ConstValue> Folder::concat() {
  const ConstValue &a = *c(0);
  int64_t r = int64_t(a.shape().size());
  std::optional<int64_t> axis = axis_in(attr_int("axis", 0), r);
  if (!axis)
    return std::nullopt;
  Shape shape = a.shape();
  shape[size_t(*axis)] = 0;
  for (size_t i = 0; i < in_.size(); ++i) {
    const ConstValue *v = c(i);
    if (!v || v->dtype() != a.dtype() || v->shape().size() != a.shape().size())
      return std::nullopt;
    for (int64_t d = 0; d < r; ++d)
      if (d != *axis && v->shape()[size_t(d)] != a.shape()[size_t(d)])
        return std::nullopt;
    shape[size_t(*axis)] += v->shape()[size_t(*axis)];
  }
  if (!foldable(shape))
    return std::nullopt;
  int64_t outer = num_elements(Shape(a.shape().begin(), a.shape().begin() + *axis));
  ConstValue out(a.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < in_.size(); ++i) {
      const ConstValue &v = *c(i);
      int64_t block = num_elements(Shape(v.shape().begin() + *axis, v.shape().end()));
      for (int64_t e = 0; e < block; ++e)
        out.push_element(v, size_t(o * block + e));
    }
  return out;
}

std::optional<ConstValue> Folder::slice() {
  const ConstValue &a = *c(0);
  if (!c(1) || !c(2))
    return std::nullopt;
  int64_t r = int64_t(a.shape().size());
  std::vector<int64_t> starts = c(1)->integers(), ends = c(2)->integers(), axes, steps;
  if (c(3))
    axes = c(3)->integers();
  else
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  steps = c(4) ? c(4)->integers() : std::vector<int64_t>(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return std::nullopt;
  std::vector<int64_t> begin(size_t(r), 0), step(size_t(r), 1);
  Shape shape = a.shape();
  std::vector<bool> seen(size_t(r), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    std::optional<int64_t> ax = axis_in(axes[i], r);
    if (!ax || seen[size_t(*ax)] || steps[i] == 0)
      return std::nullopt;
    seen[size_t(*ax)] = true;
    int64_t dim = a.shape()[size_t(*ax)], s = starts[i], e = ends[i], st = steps[i];
    s = s < 0 ? s + dim : s;
    e = e < 0 ? e + dim : e;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      shape[size_t(*ax)] = e > s ? (e - s + st - 1) / st : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      shape[size_t(*ax)] = s > e ? (s - e + (-st) - 1) / (-st) : 0;
    }
    begin[size_t(*ax)] = s;
    step[size_t(*ax)] = st;
  }
  if (!foldable(shape))
    return std::nullopt;
  std::vector<int64_t> from = strides_of(a.shape());
  return remapped(a, shape, [&](size_t k, int64_t coord) { return (begin[k] + coord * step[k]) * from[k]; });
}

std::optional<ConstValue> Folder::reshape() {
  const ConstValue &a = *c(0);
  if (!c(1))
    return std::nullopt;
  bool allowzero = attr_int("allowzero", 0) != 0;
  std::vector<int64_t> dims = c(1)->integers();
  Shape shape;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == 0 && !allowzero) {
      if (i >= a.shape().size())
        return std::nullopt;
      d = a.shape()[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return std::nullopt;
      infer = int64_t(i);
      d = 1;
    } else if (d < 0 || d > kMaxFoldedElements) {
      return std::nullopt;
    }
    shape.push_back(d);
    known *= d;
    if (known > kMaxFoldedElements)
      return std::nullopt;
  }
  if (infer >= 0) {
    if (known == 0 || int64_t(a.size()) % known)
      return std::nullopt;
    shape[size_t(infer)] = int64_t(a.size()) / known;
  }
  return reshaped(a, shape);
}

std::optional<ConstValue> Folder::transpose() {
  const ConstValue &a = *c(0);
  size_t r = a.shape().size();
  std::vector<int64_t> perm;
  if (std::optional<std::vector<int64_t>> p = attr_ints("perm"))
    perm = *p;
  else
    for (size_t k = r; k-- > 0;)
      perm.push_back(int64_t(k));
  if (perm.size() != r)
    return std::nullopt;
  std::vector<bool> seen(r, false);
  Shape shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(r) || seen[size_t(p)])
      return std::nullopt;
    seen[size_t(p)] = true;
    shape.push_back(a.shape()[size_t(p)]);
  }
  std::vector<int64_t> from = strides_of(a.shape());
  return remapped(a, shape, [&](size_t k, int64_t coord) { return coord * from[size_t(perm[k])]; });
}

std::optional<ConstValue> Folder::tile() {
  const ConstValue &a = *c(0);
  if (!c(1))
    return std::nullopt;
  std::vector<int64_t> reps = c(1)->integers();
  size_t r = a.shape().size();
  if (reps.size() != r)
    return std::nullopt;
  Shape shape;
  for (size_t k = 0; k < r; ++k) {
    if (reps[k] < 0 || reps[k] > kMaxFoldedElements)
      return std::nullopt;
    shape.push_back(a.shape()[k] * reps[k]);
  }
  if (!foldable(shape))
    return std::nullopt;
  std::vector<int64_t> from = strides_of(a.shape());
  return remapped(a, shape, [&](size_t k, int64_t coord) { return coord % a.shape()[k] * from[k]; });
}

/// Trilu: the upper (column - row >= k) or lower (column - row <= k)
/// triangle of each matrix of the last two axes, zeros elsewhere (a causal
/// attention mask from torch.triu).
std::optional<ConstValue> Folder::trilu() {
  const ConstValue &a = *c(0);
  if (a.shape().size() < 2 || (in_.size() > 1 && in_[1].type && !c(1)) || (c(1) && c(1)->size() != 1))
    return std::nullopt;
  int64_t k = c(1) ? c(1)->integer(0) : 0;
  bool upper = attr_int("upper", 1) != 0;
  int64_t rows = a.shape()[a.shape().size() - 2], cols = a.shape().back();
  ConstValue out(a.dtype(), a.shape());
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t col = int64_t(i) % std::max<int64_t>(cols, 1), row = int64_t(i) / std::max<int64_t>(cols, 1) % rows;
    bool keep = upper ? col - row >= k : col - row <= k;
    if (keep)
      out.push_element(a, i);
    else
      out.push_int(0);
  }
  return out;
}

std::optional<ConstValue> Folder::scatter_nd() {
  const ConstValue &data = *c(0);
  if (!c(1) || !c(2) || c(1)->is_float() || c(2)->dtype() != data.dtype())
    return std::nullopt;
  const ConstValue &idx = *c(1), &upd = *c(2);
  const onnx::AttributeProto *red = find_attr(node_, "reduction");
  if ((red && red->s() != "none") || idx.shape().empty())
    return std::nullopt;
  size_t k = size_t(idx.shape().back()), r = data.shape().size();
  if (k < 1 || k > r)
    return std::nullopt;
  int64_t n = num_elements(Shape(idx.shape().begin(), idx.shape().end() - 1));
  int64_t block = num_elements(Shape(data.shape().begin() + int64_t(k), data.shape().end()));
  // updates: indices.shape[:-1] + data.shape[k:]
  Shape want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), data.shape().begin() + int64_t(k), data.shape().end());
  if (upd.shape() != want)
    return std::nullopt;
  std::vector<int64_t> from = strides_of(data.shape());
  std::vector<size_t> target(data.size());
  for (size_t i = 0; i < target.size(); ++i)
    target[i] = SIZE_MAX;
  for (int64_t j = 0; j < n; ++j) {
    int64_t base = 0;
    for (size_t d = 0; d < k; ++d) {
      int64_t v = idx.integer(size_t(j) * k + d), dim = data.shape()[d];
      v = v < 0 ? v + dim : v;
      if (v < 0 || v >= dim)
        return std::nullopt;
      base += v * from[d];
    }
    for (int64_t e = 0; e < block; ++e)
      target[size_t(base + e)] = size_t(j * block + e);
  }
  ConstValue out(data.dtype(), data.shape());
  for (size_t i = 0; i < target.size(); ++i)
    if (target[i] == SIZE_MAX)
      out.push_element(data, i);
    else
      out.push_element(upd, target[i]);
  return out;
}

std::optional<ConstValue> Folder::range() {
  const ConstValue *s = c(0), *l = c(1), *d = c(2);
  if (!s || !l || !d || s->size() != 1 || l->size() != 1 || d->size() != 1 || s->dtype() != l->dtype() ||
      s->dtype() != d->dtype() || s->dtype() == DType::Bool)
    return std::nullopt;
  DType dt = s->dtype();
  double n;
  if (!s->is_float()) {
    int64_t a = s->integer(0), b = l->integer(0), st = d->integer(0);
    if (st == 0)
      return std::nullopt;
    __int128 span = __int128(b) - a;
    __int128 cnt = st > 0 ? (span + st - 1) / st : (span + st + 1) / st;
    n = double(std::max<__int128>(0, std::min<__int128>(cnt, kMaxFoldedElements + 1)));
  } else {
    if (d->number(0) == 0)
      return std::nullopt;
    n = std::max(0.0, std::ceil((l->number(0) - s->number(0)) / d->number(0)));
  }
  if (!(n <= double(kMaxFoldedElements)))
    return std::nullopt;
  ConstValue out(dt, {int64_t(n)});
  for (int64_t i = 0; i < int64_t(n); ++i)
    if (s->is_float())
      out.push_number(s->number(0) + double(i) * d->number(0));
    else
      out.push_int(int64_t(uint64_t(s->integer(0)) + uint64_t(i) * uint64_t(d->integer(0))));
  return out;
}

std::optional<ConstValue> Folder::constant_of_shape() {
  const ConstValue &dims = *c(0);
  if (dims.is_float() || dims.shape().size() != 1)
    return std::nullopt;
  Shape shape = dims.integers();
  if (!foldable(shape))
    return std::nullopt;
  ConstValue fill = scalar_of(0, DType::Float32);
  if (const onnx::AttributeProto *a = find_attr(node_, "value"); a && a->has_t()) {
    Decoded d = decode_copy(a->t());
    if (!d.error.empty() || d.data.size() != dtype_bytes(d.dtype))
      return std::nullopt;
    fill = ConstValue::of(d);
  }
  ConstValue out(fill.dtype(), shape);
  for (int64_t i = 0; i < num_elements(shape); ++i)
    out.push_element(fill, 0);
  return out;
}

std::optional<ConstValue> Folder::run() {
  if (node_.output_size() != 1)
    return std::nullopt;
  if ((op_ == "Shape" || op_ == "Size") && in_.size() == 1 && in_[0].type && in_[0].type->is_tensor()) {
    const Shape &s = in_[0].type->shape;
    if (op_ == "Size") {
      ConstValue out(DType::Int64, {});
      out.push_int(num_elements(s));
      return out;
    }
    int64_t r = int64_t(s.size()), start = attr_int("start", 0), end = attr_int("end", r);
    start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
    end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
    ConstValue out(DType::Int64, {std::max<int64_t>(0, end - start)});
    for (int64_t d = start; d < end; ++d)
      out.push_int(s[size_t(d)]);
    return out;
  }
  if (in_.empty() || !c(0))
    return std::nullopt;
  for (const FoldInput &i : in_)
    if (i.type && !i.constant)
      return std::nullopt;
  if (std::find(kUnary.begin(), kUnary.end(), op_) != kUnary.end())
    return in_.size() == 1 ? elementwise(1) : std::nullopt;
  if (std::find(kBinary.begin(), kBinary.end(), op_) != kBinary.end())
    return elementwise(2);
  if (op_ == "Where")
    return elementwise(3);
  for (const auto &[name, method] : kFolds)
    if (op_ == name)
      return (this->*method)();
  return std::nullopt;
}

std::optional<ConstValue> Folder::expand() {
  const ConstValue &a = *c(0);
  if (!c(1))
    return std::nullopt;
  std::optional<Shape> shape = broadcast_shapes(a.shape(), c(1)->integers());
  if (!shape || !foldable(*shape))
    return std::nullopt;
  ConstValue out(a.dtype(), *shape);
  for (int64_t i = 0; i < num_elements(*shape); ++i)
    out.push_element(a, broadcast_source(a.shape(), *shape, i));
  return out;
}

std::optional<ConstValue> Folder::flatten() {
  const ConstValue &a = *c(0);
  int64_t r = int64_t(a.shape().size()), axis = attr_int("axis", 1);
  if (axis < -r || axis > r)
    return std::nullopt;
  axis = axis < 0 ? axis + r : axis;
  return reshaped(a, {num_elements(Shape(a.shape().begin(), a.shape().begin() + axis)),
                      num_elements(Shape(a.shape().begin() + axis, a.shape().end()))});
}

std::optional<ConstValue> Folder::unsqueeze() {
  const ConstValue &a = *c(0);
  std::optional<std::vector<int64_t>> ax = axes(13);
  if (!ax)
    return std::nullopt;
  int64_t r = int64_t(a.shape().size() + ax->size());
  std::vector<bool> unit(size_t(r), false);
  for (int64_t x : *ax) {
    std::optional<int64_t> k = axis_in(x, r);
    if (!k || unit[size_t(*k)])
      return std::nullopt;
    unit[size_t(*k)] = true;
  }
  Shape shape;
  size_t from = 0;
  for (int64_t k = 0; k < r; ++k)
    shape.push_back(unit[size_t(k)] ? 1 : a.shape()[from++]);
  return reshaped(a, shape);
}

std::optional<ConstValue> Folder::squeeze() {
  const ConstValue &a = *c(0);
  std::optional<std::vector<int64_t>> ax = axes(13);
  int64_t r = int64_t(a.shape().size());
  std::vector<bool> drop(size_t(r), false);
  if (!ax || ax->empty())
    for (int64_t k = 0; k < r; ++k)
      drop[size_t(k)] = a.shape()[size_t(k)] == 1;
  else
    for (int64_t x : *ax) {
      std::optional<int64_t> k = axis_in(x, r);
      if (!k || a.shape()[size_t(*k)] != 1)
        return std::nullopt;
      drop[size_t(*k)] = true;
    }
  Shape shape;
  for (int64_t k = 0; k < r; ++k)
    if (!drop[size_t(k)])
      shape.push_back(a.shape()[size_t(k)]);
  return reshaped(a, shape);
}

} // namespace

std::optional<ConstValue> fold(const onnx::NodeProto &node, const std::vector<FoldInput> &in, int64_t opset) {
  std::optional<ConstValue> out = Folder(node, in, opset).run();
  if (out && !foldable(out->shape()))
    return std::nullopt;
  return out;
}

const std::vector<std::string> &folded_ops() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {"Shape", "Size", "Where"};
    for (const auto &[name, method] : Folder::kFolds)
      v.push_back(name);
    v.insert(v.end(), kUnary.begin(), kUnary.end());
    v.insert(v.end(), kBinary.begin(), kBinary.end());
    return v;
  }();
  return ops;
}

} // namespace gradc::onnx_import
