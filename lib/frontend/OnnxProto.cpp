//===- OnnxProto.cpp - ONNX protobuf messages read as gradc values --------===//
#include "OnnxProto.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace gradc::onnx_import {

std::optional<DType> dtype_of(int64_t elem) {
  switch (elem) {
  case onnx::TensorProto::FLOAT: return DType::Float32;
  case onnx::TensorProto::DOUBLE: return DType::Float64;
  case onnx::TensorProto::FLOAT16: return DType::Float16;
  case onnx::TensorProto::INT32: return DType::Int32;
  case onnx::TensorProto::INT64: return DType::Int64;
  case onnx::TensorProto::BOOL: return DType::Bool;
  default: return std::nullopt;
  }
}

std::string elem_name(int64_t elem) {
  return elem >= INT32_MIN && elem <= INT32_MAX && onnx::TensorProto_DataType_IsValid(int(elem))
             ? onnx::TensorProto_DataType_Name(int(elem))
             : std::to_string(elem);
}

int32_t elem_of(DType dt) {
  switch (dt) {
  case DType::Float64: return onnx::TensorProto::DOUBLE;
  case DType::Float16: return onnx::TensorProto::FLOAT16;
  case DType::Int64: return onnx::TensorProto::INT64;
  case DType::Int32: return onnx::TensorProto::INT32;
  case DType::Bool: return onnx::TensorProto::BOOL;
  default: return onnx::TensorProto::FLOAT;
  }
}


std::string printable(const std::string &s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

std::string one_line(const std::string &text) {
  std::string what;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch)) || (!what.empty() && what.back() != ' '))
      what += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
  while (!what.empty() && what.back() == ' ')
    what.pop_back();
  return printable(what);
}

uint16_t half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff)
    return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  int e = int(exp) - 127 + 15;
  if (e >= 31)
    return uint16_t(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10)
      return uint16_t(sign);
    man |= 0x800000;
    uint32_t shift = uint32_t(14 - e), half = man >> shift, rest = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | uint32_t(e << 10) | (man >> 13), rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return uint16_t(half);
}

float half_value(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  if (exp == 0) {
    float f = std::ldexp(float(man), -24);
    return sign ? -f : f;
  }
  if (exp == 31)
    x = sign | 0x7f800000 | (man << 13);
  else
    x = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

Decoded decode(onnx::TensorProto &t, const SharedBytes *mapped) {
  Decoded d;
  std::optional<DType> dt = dtype_of(t.data_type());
  if (!dt) {
    d.error = "its element type " + elem_name(t.data_type()) + " has no gradc dtype";
    return d;
  }
  d.dtype = *dt;
  int64_t n = 1;
  for (int64_t dim : t.dims()) {
    if (dim < 0 || (dim > 0 && n > kMaxImportElements / dim)) {
      d.error = "its dimensions are negative or too large";
      return d;
    }
    d.shape.push_back(dim);
    n *= dim;
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    d.error = "its data is stored outside the model file (external data is not read)";
    return d;
  }
  size_t bytes = dtype_bytes(*dt);
  if (t.has_raw_data()) {
    size_t have = mapped ? mapped->size() : t.raw_data().size();
    if (have != size_t(n) * bytes) {
      d.error = "its raw data holds " + std::to_string(have) + " bytes, not " + std::to_string(size_t(n) * bytes);
      return d;
    }
    d.data = mapped ? *mapped : SharedBytes(std::move(*t.mutable_raw_data()));
    t.clear_raw_data();
    return d;
  }
  // The elements present are counted before the declared size is allocated.
  int64_t have = *dt == DType::Float32   ? t.float_data_size()
                 : *dt == DType::Float64 ? t.double_data_size()
                 : *dt == DType::Int64   ? t.int64_data_size()
                                         : t.int32_data_size();
  if (have != n) {
    d.error = "it holds " + std::to_string(have) + " elements, not " + std::to_string(n);
    return d;
  }
  std::string data(size_t(n) * bytes, '\0');
  char *out = data.data();
  switch (*dt) {
  case DType::Float32:
    if (n)
      std::memcpy(out, t.float_data().data(), size_t(n) * 4);
    break;
  case DType::Float64:
    if (n)
      std::memcpy(out, t.double_data().data(), size_t(n) * 8);
    break;
  case DType::Int64:
    if (n)
      std::memcpy(out, t.int64_data().data(), size_t(n) * 8);
    break;
  case DType::Int32:
  case DType::Bool:
  case DType::Float16:
    for (int64_t i = 0; i < n; ++i) {
      int32_t v = t.int32_data(int(i));
      if (*dt == DType::Int32)
        std::memcpy(out + i * 4, &v, 4);
      else if (*dt == DType::Bool)
        out[i] = char(v != 0);
      else {
        uint16_t h = uint16_t(v);
        std::memcpy(out + i * 2, &h, 2);
      }
    }
    break;
  }
  d.data = SharedBytes(std::move(data));
  return d;
}

Decoded decode_copy(const onnx::TensorProto &t) {
  onnx::TensorProto copy = t;
  return decode(copy);
}

namespace {

/// A cursor over protobuf's wire format: tags, varints, fixed and
/// length-delimited fields (groups, long deprecated, are not read).
struct Wire {
  const char *p, *end;
  bool varint(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t b = uint8_t(*p++);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  }
  /// The next field: its number, and for a length-delimited one its payload.
  bool next(uint64_t &number, std::string_view &payload, bool &delimited) {
    uint64_t tag;
    if (!varint(tag))
      return false;
    number = tag >> 3;
    delimited = (tag & 7) == 2;
    switch (tag & 7) {
    case 0: {
      uint64_t v;
      return varint(v);
    }
    case 1:
    case 5: {
      size_t n = (tag & 7) == 1 ? 8 : 4;
      if (size_t(end - p) < n)
        return false;
      p += n;
      return true;
    }
    case 2: {
      uint64_t n;
      if (!varint(n) || n > uint64_t(end - p))
        return false;
      payload = {p, size_t(n)};
      p += n;
      return true;
    }
    default:
      return false;
    }
  }
};

void put_varint(std::string &out, uint64_t v) {
  for (; v >= 0x80; v >>= 7)
    out.push_back(char(uint8_t(v) | 0x80));
  out.push_back(char(v));
}

void put_field(std::string &out, uint64_t number, std::string_view payload) {
  put_varint(out, number << 3 | 2);
  put_varint(out, payload.size());
  out.append(payload);
}

/// Calls visit(bytes, number, delimited, payload) for each field of
/// `message` (bytes: the whole field as written; payload: a length-delimited
/// field's), until it returns false; false where the bytes do not read as
/// fields or a visit stopped the walk.
template <class F> bool for_each_field(std::string_view message, F &&visit) {
  Wire w{message.data(), message.data() + message.size()};
  while (w.p < w.end) {
    const char *start = w.p;
    uint64_t number;
    std::string_view payload;
    bool delimited = false;
    if (!w.next(number, payload, delimited) ||
        !visit(std::string_view(start, size_t(w.p - start)), number, delimited, payload))
      return false;
  }
  return true;
}

/// Copies `message`, each length-delimited field numbered `field` replaced
/// by what `rewrite` makes of its payload (nullopt: the walk failed).
template <class F>
std::optional<std::string> rewrite_fields(std::string_view message, uint64_t field, F &&rewrite) {
  std::string out;
  out.reserve(message.size());
  bool ok = for_each_field(message, [&](std::string_view bytes, uint64_t number, bool delimited, std::string_view payload) {
    if (number != field || !delimited) {
      out.append(bytes);
      return true;
    }
    std::optional<std::string> inner = rewrite(payload);
    if (inner)
      put_field(out, number, *inner);
    return inner.has_value();
  });
  return ok ? std::optional<std::string>(std::move(out)) : std::nullopt;
}

// The field numbers of onnx.proto that lead to an initializer's raw data.
constexpr uint64_t kModelGraph = 7, kGraphInitializer = 5, kTensorRawData = 9;

} // namespace

std::optional<std::string> strip_large_tensors(std::string_view file, size_t threshold,
                                               std::vector<std::optional<FileRange>> &initializers) {
  initializers.clear();
  auto tensor = [&](std::string_view t) -> std::optional<std::string> {
    // Left whole where raw data appears more than once (the last would win).
    std::optional<std::string_view> raw;
    int count = 0;
    bool read = for_each_field(t, [&](std::string_view, uint64_t number, bool delimited, std::string_view payload) {
      if (number == kTensorRawData && delimited) {
        raw = payload;
        ++count;
      }
      return true;
    });
    if (!read)
      return std::nullopt;
    if (count != 1 || raw->size() < threshold) {
      initializers.push_back(std::nullopt);
      return std::string(t);
    }
    initializers.push_back(FileRange{size_t(raw->data() - file.data()), raw->size()});
    return rewrite_fields(t, kTensorRawData, [](std::string_view) { return std::optional<std::string>(std::string(1, char(0))); });
  };
  auto graph = [&](std::string_view g) { return rewrite_fields(g, kGraphInitializer, tensor); };
  return rewrite_fields(file, kModelGraph, graph);
}

DeclaredType declared_type(const onnx::TypeProto &t) {
  if (!t.has_tensor_type())
    return {std::nullopt, "is not a tensor (sequences, maps and optionals are not supported)"};
  std::optional<DType> dt = dtype_of(t.tensor_type().elem_type());
  if (!dt)
    return {std::nullopt, "has element type " + elem_name(t.tensor_type().elem_type()) + ", which has no gradc dtype"};
  if (!t.tensor_type().has_shape())
    return {std::nullopt, "has no known shape"};
  Shape shape;
  int64_t n = 1;
  for (int i = 0; i < t.tensor_type().shape().dim_size(); ++i) {
    const onnx::TensorShapeProto_Dimension &d = t.tensor_type().shape().dim(i);
    if (!d.has_dim_value() || d.dim_value() < 0)
      return {std::nullopt, "has a dynamic dimension " + std::to_string(i) +
                                (d.has_dim_param() ? " ('" + printable(d.dim_param()) + "')" : "")};
    if (d.dim_value() > 0 && n > kMaxImportElements / d.dim_value())
      return {std::nullopt, "has more than 2^40 elements"};
    n *= d.dim_value();
    shape.push_back(d.dim_value());
  }
  return {Type::tensor(shape, *dt), ""};
}

std::string declared_text(const onnx::TypeProto_Tensor &t) {
  std::optional<DType> dt = dtype_of(t.elem_type());
  std::string out = dt ? dtype_name(*dt) : elem_name(t.elem_type());
  if (!t.has_shape())
    return out;
  out += " (";
  for (int i = 0; i < t.shape().dim_size(); ++i)
    out += (i ? ", " : "") + (t.shape().dim(i).has_dim_value() ? std::to_string(t.shape().dim(i).dim_value()) : "?");
  return out + (t.shape().dim_size() == 1 ? ",)" : ")");
}

void external_tensors(const onnx::GraphProto &g, std::vector<std::string> &out) {
  auto check = [&](const onnx::TensorProto &t) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
      out.push_back(t.name());
  };
  auto check_attr = [&](const onnx::AttributeProto &a) {
    if (a.has_t())
      check(a.t());
    for (const onnx::TensorProto &t : a.tensors())
      check(t);
    if (a.has_sparse_tensor()) {
      check(a.sparse_tensor().values());
      check(a.sparse_tensor().indices());
    }
    if (a.has_g())
      external_tensors(a.g(), out);
    for (const onnx::GraphProto &sub : a.graphs())
      external_tensors(sub, out);
  };
  for (const onnx::TensorProto &t : g.initializer())
    check(t);
  for (const onnx::SparseTensorProto &t : g.sparse_initializer()) {
    check(t.values());
    check(t.indices());
  }
  for (const onnx::NodeProto &n : g.node())
    for (const onnx::AttributeProto &a : n.attribute())
      check_attr(a);
}

namespace {
constexpr unsigned kIsolatedSeconds = 120;
} // namespace

Isolated run_isolated(const std::function<std::string()> &work) {
  int fds[2];
  if (pipe(fds) != 0)
    return {{}, std::string("cannot create a pipe: ") + std::strerror(errno)};
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {{}, std::string("cannot fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    close(fds[0]);
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM})
      std::signal(sig, SIG_DFL);
    alarm(kIsolatedSeconds);
    std::string out;
    try {
      out = "+" + work();
    } catch (const std::exception &e) {
      out = std::string("-") + e.what();
    } catch (...) {
      out = "-an unknown exception";
    }
    for (size_t at = 0; at < out.size();) {
      ssize_t n = write(fds[1], out.data() + at, out.size() - at);
      if (n <= 0)
        _exit(2);
      at += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string got;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got.append(buf, size_t(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return {{}, WTERMSIG(status) == SIGALRM ? "it did not finish in " + std::to_string(kIsolatedSeconds) + " s"
                                            : "it crashed (" + std::string(strsignal(WTERMSIG(status))) +
                                                  ": a bug of the ONNX library on this model)"};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got.empty())
    return {{}, "it failed"};
  if (got[0] == '-')
    return {{}, got.substr(1)};
  return {got.substr(1), ""};
}


} // namespace gradc::onnx_import
