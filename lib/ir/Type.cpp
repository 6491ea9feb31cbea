//===- Type.cpp - shapes and types of the tensor IR -----------------------===//
#include "gradc/ir/Type.h"
#include "gradc/support/Diagnostics.h"

namespace gradc {

int64_t num_elements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t num_rows(const Shape &shape) {
  return shape.empty() ? 1 : num_elements(Shape(shape.begin(), shape.end() - 1));
}

std::string shape_str(const Shape &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

std::optional<std::string> shape_problem(const Shape &shape) {
  if (shape.size() > kMaxRank)
    return "rank " + std::to_string(shape.size()) + " is over the maximum of " + std::to_string(kMaxRank);
  __int128 n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return "a shape cannot have negative dimensions";
    n *= d;
    if (n > kMaxElements) {
      // Keep scanning for a 0, which makes any shape small.
      bool zero = false;
      for (int64_t e : shape)
        zero |= e == 0;
      if (!zero)
        return "a tensor of shape " + shape_str(shape) + " has more than 2^44 elements";
      n = 0;
    }
  }
  return std::nullopt;
}

std::optional<std::string> type_problem(const Type &type) {
  if (type.is_tensor())
    return shape_problem(type.shape);
  for (const Type &f : type.fields)
    if (auto problem = type_problem(f))
      return problem;
  return std::nullopt;
}

Type Type::tensor(Shape shape, DType dtype) {
  for (int64_t d : shape)
    GRADC_CHECK(d >= 0, "tensor IR", "a tensor type with a negative dimension: " + shape_str(shape));
  Type t;
  t.kind = Tensor;
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

Type Type::tuple(std::vector<Type> fields) {
  Type t;
  t.kind = Tuple;
  t.fields = std::move(fields);
  return t;
}

Type Type::function(std::vector<Type> params, Type result) {
  Type t;
  t.kind = Func;
  t.fields = std::move(params);
  t.result = {std::move(result)};
  return t;
}

bool Type::has_unknown() const {
  if (kind == Unknown)
    return true;
  for (const Type &f : fields)
    if (f.has_unknown())
      return true;
  for (const Type &r : result)
    if (r.has_unknown())
      return true;
  return false;
}


bool Type::operator==(const Type &o) const {
  if (kind != o.kind)
    return false;
  if (kind == Tensor)
    return shape == o.shape && dtype == o.dtype;
  if (kind == Tuple)
    return fields == o.fields;
  if (kind == Func)
    return fields == o.fields && result == o.result;
  return true;
}

std::string Type::str() const {
  switch (kind) {
  case Unknown:
    return "?";
  case Tensor:
    return "Tensor[" + shape_str(shape) + ", " + dtype_name(dtype) + "]";
  case Tuple: {
    std::string s = "(";
    for (size_t i = 0; i < fields.size(); ++i)
      s += (i ? ", " : "") + fields[i].str();
    if (fields.size() == 1)
      s += ",";
    return s + ")";
  }
  case Func: {
    std::string s = "fn (";
    for (size_t i = 0; i < fields.size(); ++i)
      s += (i ? ", " : "") + fields[i].str();
    return s + ") -> " + result[0].str();
  }
  }
  return "?";
}

} // namespace gradc
