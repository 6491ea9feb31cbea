//===- Type.cpp - dtypes, shapes and types --------------------------------===//
#include "gradc/ir/Type.h"

namespace gradc {

const char *dtype_name(DType dt) {
  switch (dt) {
  case DType::Float16:
    return "float16";
  case DType::Float32:
    return "float32";
  case DType::Float64:
    return "float64";
  case DType::Int32:
    return "int32";
  case DType::Int64:
    return "int64";
  case DType::Bool:
    return "bool";
  }
  return "?";
}

std::optional<DType> parse_dtype(const std::string &name) {
  for (DType dt : {DType::Float16, DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool})
    if (name == dtype_name(dt))
      return dt;
  return std::nullopt;
}

unsigned dtype_bytes(DType dt) {
  switch (dt) {
  case DType::Float16:
    return 2;
  case DType::Float32:
    return 4;
  case DType::Float64:
    return 8;
  case DType::Int32:
    return 4;
  case DType::Int64:
    return 8;
  case DType::Bool:
    return 1;
  }
  return 0;
}

bool is_float(DType dt) { return dt == DType::Float16 || dt == DType::Float32 || dt == DType::Float64; }
bool is_int(DType dt) { return dt == DType::Int32 || dt == DType::Int64; }

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

bool Type::has_unknown() const {
  if (kind == Unknown)
    return true;
  for (const Type &f : fields)
    if (f.has_unknown())
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
  }
  return "?";
}

} // namespace gradc
