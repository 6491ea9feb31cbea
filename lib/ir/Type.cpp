//===- Type.cpp - dtypes, shapes and types --------------------------------===//
#include "gradc/ir/Type.h"

namespace gradc {

int64_t num_elements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shape_str(const Shape &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

Type Type::tensor(Shape shape, DType dtype) {
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

int64_t Type::bytes() const { return num_elements(shape) * dtype_bytes(dtype); }

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
