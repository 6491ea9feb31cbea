//===- Onnx.cpp - ONNX models as Relay text (gradc import) ----------------===//
//
// Parse (protobuf), check (onnx::checker), fix the dynamic input dimensions
// the user gave, infer shapes (onnx::shape_inference), then walk the nodes
// in order: Constant nodes and nodes whose inputs are all constants with a
// folder here (Shape, Gather, Unsqueeze, Concat, Cast, arithmetic: what a
// PyTorch export computes a Reshape's shape with) become constants; every
// other node goes through its entry of the operator table (OnnxOps.cpp) and
// is bound to a Relay variable. Errors are collected, every one at once.
// The text is typed with gradc's relations and its results compared with
// the graph's declared outputs.
//
//===----------------------------------------------------------------------===//
#include "gradc/frontend/Onnx.h"

#include "OnnxOps.h"
#include "gradc/op/Relations.h"
#include "gradc/support/Diagnostics.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/TypeInfer.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <functional>
#include <sys/wait.h>
#include <unistd.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace gradc {

namespace onnx_import {

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

} // namespace onnx_import

namespace {

using onnx_import::ConstValue;
using onnx_import::dtype_of;
using onnx_import::elem_name;
using onnx_import::Mapped;
using onnx_import::printable;
using onnx_import::to_ints;

constexpr int64_t kMaxFoldedElements = 1 << 16; // constants kept as values, not parameters
constexpr int64_t kMaxElements = int64_t(1) << 40;

/// Runs `work` in a child process and returns what it wrote, or why it did
/// not finish: the ONNX library's checker and shape inference crash on some
/// malformed models (a null dimension merged, a pool without a kernel), and
/// a model must never crash gradc. The child dies by the default action of
/// any fatal signal, and after kIsolatedSeconds.
constexpr unsigned kIsolatedSeconds = 120;
struct Isolated {
  std::string out;
  std::string failure; // empty: finished
};
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

/// A tensor's elements as bytes of its gradc dtype, or why not.
struct Decoded {
  DType dtype = DType::Float32;
  Shape shape;
  std::string data;
  std::string error;
};

Decoded decode(const onnx::TensorProto &t) {
  Decoded d;
  std::optional<DType> dt = dtype_of(t.data_type());
  if (!dt) {
    d.error = "its element type " + elem_name(t.data_type()) + " has no gradc dtype";
    return d;
  }
  d.dtype = *dt;
  int64_t n = 1;
  for (int64_t dim : t.dims()) {
    if (dim < 0 || (dim > 0 && n > kMaxElements / dim)) {
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
    if (t.raw_data().size() != size_t(n) * bytes) {
      d.error = "its raw data holds " + std::to_string(t.raw_data().size()) + " bytes, not " +
                std::to_string(size_t(n) * bytes);
      return d;
    }
    d.data = t.raw_data();
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
  d.data.resize(size_t(n) * bytes);
  char *out = d.data.data();
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
  return d;
}

/// Appends the integer `v` to `c`, converted to c's dtype as ONNX's Cast
/// does: wrapped to int32 (numpy's astype), != 0 for bool, rounded to a
/// floating-point dtype.
void push_int(ConstValue &c, int64_t v) {
  switch (c.dtype) {
  case DType::Float32: c.values.push_back(double(float(v))); return;
  case DType::Float64: c.values.push_back(double(v)); return;
  case DType::Float16: c.values.push_back(half_value(half_bits(float(v)))); return;
  case DType::Int32: v = int32_t(uint32_t(uint64_t(v))); break;
  case DType::Bool: v = v != 0; break;
  case DType::Int64: break;
  }
  c.ints.push_back(v);
  c.values.push_back(double(v));
}

/// Appends `v` to `c`, rounded to c's dtype as a tensor of it holds it (an
/// integer dtype truncates toward zero and saturates, NaN as 0).
void push_value(ConstValue &c, double v) {
  switch (c.dtype) {
  case DType::Float32: c.values.push_back(double(float(v))); return;
  case DType::Float64: c.values.push_back(v); return;
  case DType::Float16: c.values.push_back(half_value(half_bits(float(v)))); return;
  case DType::Bool: push_int(c, v != 0); return;
  case DType::Int32:
  case DType::Int64: {
    constexpr double kTwo63 = 9223372036854775808.0;
    int64_t x = v != v ? 0 : v >= kTwo63 ? INT64_MAX : v < -kTwo63 ? INT64_MIN : int64_t(v);
    if (c.dtype == DType::Int32)
      x = std::clamp<int64_t>(x, INT32_MIN, INT32_MAX);
    push_int(c, x);
    return;
  }
  }
}

/// Appends element i of `from` (of any dtype) to `c`, converted to c's dtype.
void push_element(ConstValue &c, const ConstValue &from, size_t i) {
  if (!from.ints.empty())
    push_int(c, from.ints[i]);
  else
    push_value(c, from.values[i]);
}

ConstValue values_of(const Decoded &d) {
  ConstValue c{d.dtype, d.shape, {}, {}};
  size_t n = d.data.size() / dtype_bytes(d.dtype);
  c.values.reserve(n);
  const char *p = d.data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (d.dtype) {
    case DType::Float32: { float v; std::memcpy(&v, p + i * 4, 4); c.values.push_back(v); break; }
    case DType::Float64: { double v; std::memcpy(&v, p + i * 8, 8); c.values.push_back(v); break; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p + i * 8, 8); push_int(c, v); break; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p + i * 4, 4); push_int(c, v); break; }
    case DType::Bool: push_int(c, p[i] ? 1 : 0); break;
    case DType::Float16: { uint16_t h; std::memcpy(&h, p + i * 2, 2); c.values.push_back(half_value(h)); break; }
    }
  }
  return c;
}

/// The bytes of `c` in its dtype (a folded constant that became a parameter):
/// its integers exactly, its floating-point values as they are (already
/// rounded to the dtype).
std::string bytes_of(const ConstValue &c) {
  std::string out(c.values.size() * dtype_bytes(c.dtype), '\0');
  char *p = out.data();
  for (size_t i = 0; i < c.values.size(); ++i) {
    double v = c.values[i];
    switch (c.dtype) {
    case DType::Float32: { float f = float(v); std::memcpy(p + i * 4, &f, 4); break; }
    case DType::Float64: std::memcpy(p + i * 8, &v, 8); break;
    case DType::Int64: std::memcpy(p + i * 8, &c.ints[i], 8); break;
    case DType::Int32: { int32_t x = int32_t(c.ints[i]); std::memcpy(p + i * 4, &x, 4); break; }
    case DType::Bool: p[i] = char(c.ints[i] != 0); break;
    case DType::Float16: { uint16_t h = half_bits(float(v)); std::memcpy(p + i * 2, &h, 2); break; }
    }
  }
  return out;
}

int64_t numel(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

std::string shape_text(const Shape &s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.size() == 1 ? ",)" : ")");
}

/// A Relay identifier for an ONNX name: letters, digits and '_', not
/// starting with a digit; a long one is cut and ends in a hash of the whole
/// name, so that a weight's file name (NAME.npy and the temporary name it
/// is written under) stays within the file system's 255 bytes.
constexpr size_t kMaxNameLength = 200;
std::string sanitize(const std::string &name) {
  std::string out;
  for (char ch : name)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = "v" + out;
  if (out.size() > kMaxNameLength) {
    uint64_t hash = 1469598103934665603ull; // FNV-1a
    for (unsigned char ch : name)
      hash = (hash ^ ch) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    out = out.substr(0, kMaxNameLength - 17) + "_" + hex;
  }
  return out;
}

/// A value of the graph: a Relay expression, or a constant not yet made one.
struct Value {
  std::string expr; // empty: a constant, see `constant`
  Type type;
  std::optional<ConstValue> constant;
  std::string onnx_name;
  bool weight = false; // an initializer (made a parameter when read as a tensor)
  Decoded raw;         // its data, for a weight
  // Computed from a pool whose type follows gradc's (PyTorch's) ceil_mode
  // rule where ONNX 1.12's shape inference says otherwise.
  bool pool_convention = false;
};

class Importer {
public:
  Importer(std::string path, std::ostream &err) : path_(std::move(path)), err_(err) {}

  std::optional<OnnxImport> run(const std::string &bytes, const OnnxImportOptions &options);

  void error(const std::string &msg) {
    if (!quiet_)
      err_ << printable(path_) << ": error: " << msg << "\n";
    ++errors_;
  }
  /// An error that ends the import whatever walk it interrupts.
  void fatal(const std::string &msg) {
    quiet_ = false;
    error(msg);
  }

  // For NodeCtx.
  std::string expr_of(const std::string &name);
  std::string literal(double v, DType dt) const;
  /// The opset the mappings read: a node of an older opset is mapped only
  /// where its operator's definition is the one of kMinOpset (definition_problem).
  int64_t opset() const { return std::max(opset_, onnx_import::kMinOpset); }

private:
  std::string path_;
  std::ostream &err_;
  int errors_ = 0;
  int64_t opset_ = 0;
  onnx::ModelProto model_;
  std::unordered_map<std::string, Value> values_;
  std::set<std::string> used_names_;
  std::unordered_map<std::string, int> next_suffix_; // fresh_name: the next _K to try for a base
  std::vector<std::pair<std::string, std::string>> renamed_; // relay, onnx
  std::vector<std::string> params_, input_params_;
  std::vector<ImportedWeight> weights_;
  std::vector<std::string> body_;
  std::unordered_map<std::string, Type> inferred_;
  std::unordered_map<std::string, std::string> no_dtype_; // values of an element type gradc has not
  std::map<std::string, Type> derived_;  // types found here that ONNX inference left unknown
  std::map<std::string, Type> overridden_; // types by gradc's rule where ONNX inference differs
  std::map<std::string, ConstValue> folded_; // node outputs folded to constants
  std::optional<std::string> strict_complaint_; // what strict ONNX inference says (once asked)
  bool quiet_ = false;                   // a probing walk: errors not reported
  void infer_shapes();
  void walk();
  bool check_outputs(const std::string &text);
  std::string strict_complaint();

  /// A fresh Relay name for an ONNX name; each base name keeps the next
  /// suffix to try, so that many names sanitising alike take linear time.
  std::string fresh_name(const std::string &onnx_name) {
    std::string base = sanitize(onnx_name), name = base;
    if (used_names_.count(name)) {
      int &k = next_suffix_.try_emplace(base, 2).first->second;
      do
        name = base + "_" + std::to_string(k++);
      while (used_names_.count(name));
    }
    used_names_.insert(name);
    if (name != onnx_name)
      renamed_.emplace_back(name, onnx_name);
    return name;
  }
  std::optional<Type> type_of(const onnx::TypeProto &t, const std::string &what);
  bool fix_inputs(const OnnxImportOptions &options);
  void convert(const onnx::NodeProto &node, size_t index);
  bool fold(const onnx::NodeProto &node, const std::vector<const Value *> &in);
  std::string describe(const onnx::NodeProto &node, size_t index) const {
    return "node " + std::to_string(index) + (node.name().empty() ? "" : " '" + printable(node.name()) + "'") +
           " (" + printable(node.op_type()) + ")";
  }
  friend class Ctx;
};

/// A literal of `dt` for a value a mapping computed (an alpha, 1 - momentum),
/// rounded to the dtype as a constant of it holds it.
std::string Importer::literal(double v, DType dt) const {
  ConstValue c{dt, {}, {}, {}};
  push_value(c, v);
  return onnx_import::literal_of(c, 0);
}

/// The Relay expression of a value: a weight or a large constant becomes a
/// parameter the first time it is read as a tensor; a scalar constant a
/// literal (reshaped to its rank).
std::string Importer::expr_of(const std::string &name) {
  Value &v = values_.at(name);
  if (!v.expr.empty())
    return v.expr;
  const ConstValue *c = v.constant ? &*v.constant : nullptr;
  if (c && c->values.size() == 1 && !v.weight) {
    std::string lit = onnx_import::literal_of(*c, 0);
    std::string dims = shape_text(c->shape);
    dims = "[" + dims.substr(1, dims.size() - (c->shape.size() == 1 ? 3 : 2)) + "]";
    return c->shape.empty() ? lit : "reshape(" + lit + ", newshape=" + dims + ")";
  }
  std::string pname = fresh_name(name);
  params_.push_back("%" + pname + ": Tensor[" + shape_text(v.type.shape) + ", " + dtype_name(v.type.dtype) + "]");
  ImportedWeight w{pname, v.type.dtype, v.type.shape, v.weight ? v.raw.data : bytes_of(*c)};
  weights_.push_back(std::move(w));
  v.raw.data.clear();
  v.expr = "%" + pname;
  return v.expr;
}

class Ctx final : public onnx_import::NodeCtx {
public:
  Ctx(Importer &imp, const onnx::NodeProto &node, std::vector<const Value *> in, std::vector<Type> out)
      : imp_(imp), node_(node), in_(std::move(in)), out_(std::move(out)) {}
  const onnx::NodeProto &node() const override { return node_; }
  int64_t opset() const override { return imp_.opset(); }
  size_t num_inputs() const override { return in_.size(); }
  bool has_input(size_t i) const override { return i < in_.size() && in_[i]; }
  std::string input(size_t i) override {
    if (!has_input(i)) {
      unsupported("input " + std::to_string(i + 1) + " is missing");
      return "0f";
    }
    return imp_.expr_of(node_.input(int(i)));
  }
  const Type &input_type(size_t i) const override {
    static const Type none = Type::tensor({}, DType::Float32);
    return has_input(i) ? in_[i]->type : none;
  }
  std::optional<ConstValue> constant(size_t i) const override {
    return has_input(i) ? in_[i]->constant : std::nullopt;
  }
  const Type &output_type(size_t i) const override { return out_.at(i); }
  size_t num_outputs() const override { return out_.size(); }
  const onnx::AttributeProto *attr(const std::string &name) const {
    for (const onnx::AttributeProto &a : node_.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  bool has_attr(const std::string &name) const override { return attr(name) != nullptr; }
  int64_t attr_int(const std::string &name, int64_t fallback) const override {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->i() : fallback;
  }
  double attr_float(const std::string &name, double fallback) const override {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const std::string &name, const std::string &fallback) const override {
    const onnx::AttributeProto *a = attr(name);
    return a ? a->s() : fallback;
  }
  std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback) const override {
    const onnx::AttributeProto *a = attr(name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }
  std::optional<ConstValue> attr_tensor(const std::string &name) const override {
    const onnx::AttributeProto *a = attr(name);
    if (!a || !a->has_t())
      return std::nullopt;
    Decoded d = decode(a->t());
    if (!d.error.empty())
      return std::nullopt;
    return values_of(d);
  }
  void unsupported(const std::string &what) override { problems.push_back(what); }
  std::string literal(double v, DType dt) const override { return imp_.literal(v, dt); }
  std::vector<std::string> problems;

private:
  Importer &imp_;
  const onnx::NodeProto &node_;
  std::vector<const Value *> in_;
  std::vector<Type> out_;
};

std::optional<Type> Importer::type_of(const onnx::TypeProto &t, const std::string &what) {
  if (!t.has_tensor_type()) {
    error(what + " is not a tensor (sequences, maps and optionals are not supported)");
    return std::nullopt;
  }
  std::optional<DType> dt = dtype_of(t.tensor_type().elem_type());
  if (!dt) {
    error(what + " has element type " + elem_name(t.tensor_type().elem_type()) + ", which has no gradc dtype");
    return std::nullopt;
  }
  if (!t.tensor_type().has_shape()) {
    error(what + " has no known shape");
    return std::nullopt;
  }
  Shape shape;
  for (int i = 0; i < t.tensor_type().shape().dim_size(); ++i) {
    const onnx::TensorShapeProto_Dimension &d = t.tensor_type().shape().dim(i);
    if (!d.has_dim_value() || d.dim_value() < 0) {
      error(what + " has a dynamic dimension " + std::to_string(i) +
            (d.has_dim_param() ? " ('" + printable(d.dim_param()) + "')" : ""));
      return std::nullopt;
    }
    if (d.dim_value() > 0 && numel(shape) > kMaxElements / d.dim_value()) {
      error(what + " has more than 2^40 elements");
      return std::nullopt;
    }
    shape.push_back(d.dim_value());
  }
  return Type::tensor(shape, *dt);
}

bool Importer::fix_inputs(const OnnxImportOptions &options) {
  std::set<std::string> initializers;
  for (const onnx::TensorProto &t : model_.graph().initializer())
    initializers.insert(t.name());
  std::set<std::string> given;
  bool ok = true;
  for (onnx::ValueInfoProto &in : *model_.mutable_graph()->mutable_input()) {
    if (initializers.count(in.name()))
      continue;
    auto it = options.input_shapes.find(in.name());
    onnx::TensorShapeProto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (it != options.input_shapes.end()) {
      given.insert(it->first);
      shape->clear_dim();
      for (int64_t d : it->second)
        shape->add_dim()->set_dim_value(d);
      continue;
    }
    for (int i = 0; i < shape->dim_size(); ++i)
      if (!shape->dim(i).has_dim_value()) {
        std::string param = shape->dim(i).has_dim_param() ? " '" + printable(shape->dim(i).dim_param()) + "'" : "";
        error("input '" + printable(in.name()) + "' has a dynamic dimension" + param + " (dimension " +
              std::to_string(i) + "): fix it with --input-shape " + printable(in.name()) + "=D0,D1,...");
        ok = false;
        break;
      }
  }
  for (const auto &[name, dims] : options.input_shapes)
    if (!given.count(name)) {
      error("--input-shape names '" + printable(name) + "', which is not an input of the model");
      ok = false;
    }
  return ok;
}

/// The flat index, in a tensor of shape `s` broadcast to `out`, of the element
/// that output element `flat` reads.
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

/// x op y for integers as ONNX computes them: wrapping, Div truncating toward
/// zero (the reference's numpy divide, then astype); nullopt for a division
/// by zero, which is left to run time.
std::optional<int64_t> int_arith(const std::string &op, int64_t x, int64_t y) {
  uint64_t ux = uint64_t(x), uy = uint64_t(y);
  if (op == "Add")
    return int64_t(ux + uy);
  if (op == "Sub")
    return int64_t(ux - uy);
  if (op == "Mul")
    return int64_t(ux * uy);
  if (y == 0)
    return std::nullopt;
  return x == INT64_MIN && y == -1 ? x : x / y;
}

/// x op y for floating-point values in the precision of `dt` (float16 is
/// computed in float32 and rounded once, as numpy does).
double float_arith(const std::string &op, double x, double y, DType dt) {
  auto apply = [&](auto a, auto b) {
    return op == "Add" ? a + b : op == "Sub" ? a - b : op == "Mul" ? a * b : a / b;
  };
  return dt == DType::Float64 ? apply(x, y) : double(apply(float(x), float(y)));
}

/// Folds a node whose inputs are all constants, where it computes shapes:
/// exactly what the operator computes, in the tensor's own dtype.
bool Importer::fold(const onnx::NodeProto &node, const std::vector<const Value *> &in) {
  const std::string &op = node.op_type();
  auto attr_int = [&](const char *name, int64_t fallback) {
    for (const onnx::AttributeProto &a : node.attribute())
      if (a.name() == name)
        return a.i();
    return fallback;
  };
  std::optional<ConstValue> out;
  if (op == "Shape" && in.size() == 1 && in[0]) {
    int64_t r = int64_t(in[0]->type.shape.size()), start = attr_int("start", 0), end = attr_int("end", r);
    start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
    end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
    out = ConstValue{DType::Int64, {std::max<int64_t>(0, end - start)}, {}, {}};
    for (int64_t d = start; d < end; ++d)
      push_int(*out, in[0]->type.shape[size_t(d)]);
  } else {
    if (in.empty())
      return false;
    for (const Value *v : in)
      if (!v || !v->constant || v->weight || numel(v->type.shape) > kMaxFoldedElements)
        return false;
    const ConstValue &a = *in[0]->constant;
    if ((op == "Identity" || op == "Cast") && in.size() == 1) {
      out = a;
      if (op == "Cast") {
        std::optional<DType> dt = dtype_of(attr_int("to", 0));
        if (!dt)
          return false; // the mapping says why
        out = ConstValue{*dt, a.shape, {}, {}};
        for (size_t i = 0; i < a.values.size(); ++i)
          push_element(*out, a, i);
      }
    } else if ((op == "Unsqueeze" || op == "Squeeze") && !in.empty()) {
      out = a;
      out->shape = Shape(); // from the inferred output below
    } else if (op == "Gather" && in.size() == 2 && a.shape.size() == 1) {
      const ConstValue &idx = *in[1]->constant;
      out = ConstValue{a.dtype, idx.shape, {}, {}};
      for (int64_t i : to_ints(idx)) {
        int64_t k = i < 0 ? i + int64_t(a.values.size()) : i;
        if (k < 0 || k >= int64_t(a.values.size()))
          return false;
        push_element(*out, a, size_t(k));
      }
    } else if (op == "Concat" && a.shape.size() == 1) {
      out = ConstValue{a.dtype, {0}, {}, {}};
      for (const Value *v : in) {
        if (v->constant->shape.size() != 1 || v->constant->dtype != a.dtype)
          return false;
        for (size_t i = 0; i < v->constant->values.size(); ++i)
          push_element(*out, *v->constant, i);
      }
      out->shape = {int64_t(out->values.size())};
    } else if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
      // numpy broadcasting, in the operands' dtype.
      const ConstValue &b = *in[1]->constant;
      std::optional<Shape> shape = broadcast_shapes(a.shape, b.shape);
      if (!shape || a.dtype != b.dtype || a.dtype == DType::Bool || numel(*shape) > kMaxFoldedElements)
        return false; // the mapping or its operator says why
      out = ConstValue{a.dtype, *shape, {}, {}};
      for (int64_t i = 0; i < numel(*shape); ++i) {
        size_t ia = broadcast_source(a.shape, *shape, i), ib = broadcast_source(b.shape, *shape, i);
        if (is_int(a.dtype)) {
          std::optional<int64_t> r = int_arith(op, a.ints[ia], b.ints[ib]);
          if (!r)
            return false;
          push_int(*out, *r);
        } else {
          push_value(*out, float_arith(op, a.values[ia], b.values[ib], a.dtype));
        }
      }
    } else if (op == "Slice" && a.shape.size() == 1 && in.size() >= 3) {
      std::vector<int64_t> s = to_ints(*in[1]->constant), e = to_ints(*in[2]->constant);
      int64_t step = 1, n = int64_t(a.values.size());
      if (in.size() > 4 && in[4] && !in[4]->constant->values.empty())
        step = to_ints(*in[4]->constant)[0];
      if (s.size() != 1 || e.size() != 1 || step != 1)
        return false;
      int64_t b0 = std::clamp<int64_t>(s[0] < 0 ? s[0] + n : s[0], 0, n);
      int64_t e0 = std::clamp<int64_t>(e[0] < 0 ? e[0] + n : e[0], 0, n);
      out = ConstValue{a.dtype, {std::max<int64_t>(0, e0 - b0)}, {}, {}};
      for (int64_t i = b0; i < e0; ++i)
        push_element(*out, a, size_t(i));
    } else {
      return false;
    }
  }
  if (!out || node.output_size() != 1)
    return false;
  const std::string &name = node.output(0);
  Value v;
  v.onnx_name = name;
  if (op == "Unsqueeze" || op == "Squeeze") {
    auto it = inferred_.find(name);
    if (it == inferred_.end() || numel(it->second.shape) != int64_t(out->values.size()))
      return false;
    out->shape = it->second.shape;
  }
  v.type = Type::tensor(out->shape, out->dtype);
  folded_[name] = *out;
  v.constant = std::move(out);
  values_[name] = std::move(v);
  return true;
}

/// The type of output `out` of `node` where ONNX inference left it unknown:
/// a Reshape's (its shape computed by folded nodes), and the statistics
/// outputs of a training BatchNormalization before opset 14 (one per
/// channel, as its running mean).
std::optional<Type> derived_type(const onnx::NodeProto &node, const std::vector<const Value *> &in, size_t out) {
  if (node.op_type() == "BatchNormalization" && out >= 1 && in.size() >= 4 && in[0] && in[3] && in[3]->type.rank() == 1)
    return Type::tensor(in[3]->type.shape, out <= 2 ? in[3]->type.dtype : in[0]->type.dtype);
  if (node.op_type() != "Reshape" || in.size() < 2 || !in[0] || !in[1] || !in[1]->constant || out != 0)
    return std::nullopt;
  bool allowzero = false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "allowzero")
      allowzero = a.i() != 0;
  const Shape &from = in[0]->type.shape;
  Shape shape;
  int64_t known = 1, infer = -1;
  std::vector<int64_t> dims = to_ints(*in[1]->constant);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = dims[i];
    if (d == 0 && !allowzero) {
      if (i >= from.size())
        return std::nullopt;
      d = from[i];
    }
    if (d == -1) {
      if (infer >= 0)
        return std::nullopt;
      infer = int64_t(i);
      d = 1;
    } else if (d < 0) {
      return std::nullopt;
    }
    if (d > kMaxElements || (d > 0 && known > kMaxElements / d))
      return std::nullopt;
    shape.push_back(d);
    known *= d;
  }
  int64_t total = numel(from);
  if (infer >= 0) {
    if (known == 0 || total % known)
      return std::nullopt;
    shape[size_t(infer)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return Type::tensor(shape, in[0]->type.dtype);
}

const onnx_import::OpEntry *find_entry(const std::string &op_type) {
  for (const onnx_import::OpEntry &e : onnx_import::op_table())
    if (op_type == e.op_type)
      return &e;
  return nullptr;
}

/// Why the table cannot map `op` at `opset`, or nothing. ONNX versions each
/// operator on its own: an opset selects, per operator, the latest version
/// defined at or before it. The table maps the versions in effect at opsets
/// kMinOpset to kMaxOpset, so an older opset's node is mapped exactly when its
/// version is one of those (an opset-8 Add is Add-7, as at opset 11; an
/// opset-6 Add, with legacy broadcasting, is Add-6 and refused).
std::optional<std::string> definition_problem(const std::string &op, int64_t opset) {
  if (opset >= onnx_import::kMinOpset)
    return std::nullopt;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(op, int(opset), "");
  if (!schema)
    return "ONNX opset " + std::to_string(opset) + " does not define " + op;
  std::set<int> mapped;
  for (int64_t v = onnx_import::kMinOpset; v <= onnx_import::kMaxOpset; ++v)
    if (const onnx::OpSchema *s = onnx::OpSchemaRegistry::Schema(op, int(v), ""))
      mapped.insert(s->since_version());
  if (mapped.count(schema->since_version()))
    return std::nullopt;
  std::string versions;
  for (int v : mapped)
    versions += (versions.empty() ? "" : ", ") + std::to_string(v);
  return "not supported: ONNX opset " + std::to_string(opset) + " defines " + op + " as its version " +
         std::to_string(schema->since_version()) + ", which gradc does not map (it maps " + op + "'s version" +
         (mapped.size() == 1 ? " " : "s ") + versions + ", those of opsets " + std::to_string(onnx_import::kMinOpset) +
         " to " + std::to_string(onnx_import::kMaxOpset) + ")";
}

void Importer::convert(const onnx::NodeProto &node, size_t index) {
  std::string where = describe(node, index);
  auto unknown = [&](const std::string &out) {
    Value v;
    v.onnx_name = out;
    v.expr = "<error>";
    values_[out] = std::move(v); // kind Unknown: its readers are skipped
  };
  auto fail = [&](const std::string &msg) {
    error(where + ": " + msg);
    for (const std::string &out : node.output())
      unknown(out);
  };
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return fail("operators of domain '" + printable(node.domain()) + "' are not supported");
  const std::string &op = node.op_type();
  const onnx_import::OpEntry *entry = find_entry(op);
  bool mapped = entry || op == "Constant" || op == "Shape";
  if (mapped)
    if (std::optional<std::string> problem = definition_problem(op, opset_))
      return fail(*problem);
  std::vector<const Value *> in;
  bool after_error = false;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    auto it = values_.find(name);
    if (it == values_.end())
      return fail("input '" + printable(name) + "' is not defined before the node (a cycle, or nodes out of order)");
    in.push_back(&it->second);
    after_error = after_error || it->second.type.kind != Type::Tensor;
  }
  // A node downstream of an error is still checked for a mapping, so that
  // every unmapped operator is reported at once.
  if (after_error || !mapped) {
    if (!mapped)
      error(where + ": no mapping for ONNX operator " + printable(op));
    for (const std::string &out : node.output())
      unknown(out);
    return;
  }
  if (op == "Constant") {
    for (const onnx::AttributeProto &a : node.attribute()) {
      Value v;
      v.onnx_name = node.output(0);
      ConstValue c;
      if (a.name() == "value") {
        Decoded d = decode(a.t());
        if (!d.error.empty())
          return fail("its value cannot be read: " + d.error);
        if (numel(d.shape) > kMaxFoldedElements) { // kept as bytes, as a weight is
          v.type = Type::tensor(d.shape, d.dtype);
          v.weight = true;
          v.raw = std::move(d);
          values_[node.output(0)] = std::move(v);
          return;
        }
        c = values_of(d);
      } else if (a.name() == "value_float" || a.name() == "value_floats") {
        c.dtype = DType::Float32;
        if (a.name() == "value_float")
          push_value(c, a.f());
        else
          for (float f : a.floats())
            push_value(c, f);
        c.shape = a.name() == "value_float" ? Shape{} : Shape{int64_t(c.values.size())};
      } else if (a.name() == "value_int" || a.name() == "value_ints") {
        c.dtype = DType::Int64;
        if (a.name() == "value_int")
          push_int(c, a.i());
        else
          for (int64_t i : a.ints())
            push_int(c, i);
        c.shape = a.name() == "value_int" ? Shape{} : Shape{int64_t(c.values.size())};
      } else {
        return fail("attribute '" + printable(a.name()) + "' is not supported");
      }
      v.type = Type::tensor(c.shape, c.dtype);
      folded_[node.output(0)] = c;
      v.constant = std::move(c);
      values_[node.output(0)] = std::move(v);
      return;
    }
    return fail("it has no value");
  }
  if (fold(node, in))
    return;
  if (!entry)
    return fail("no mapping for ONNX operator " + printable(op));
  std::vector<Type> out_types;
  for (size_t i = 0; i < size_t(node.output_size()); ++i) {
    const std::string &out = node.output(int(i));
    auto it = inferred_.find(out);
    if (!out.empty() && it == inferred_.end())
      if (std::optional<Type> t = derived_type(node, in, i)) {
        inferred_[out] = *t;
        derived_[out] = *t;
        it = inferred_.find(out);
      }
    if (out.empty() || it == inferred_.end()) {
      if (auto nd = no_dtype_.find(out); nd != no_dtype_.end())
        return fail("not supported: output '" + printable(out) + "' has element type " + nd->second +
                    ", which has no gradc dtype");
      if (!out.empty()) {
        std::string why = quiet_ ? "" : strict_complaint();
        return fail("the shape of output '" + printable(out) + "' is unknown after ONNX shape inference" +
                    (why.empty() ? "" : " (strict inference says: " + why + ")"));
      }
      out_types.push_back(Type::tensor({}, DType::Float32));
      continue;
    }
    out_types.push_back(it->second);
  }
  // Trailing optional outputs with no name are not outputs.
  while (!out_types.empty() && node.output(int(out_types.size()) - 1).empty())
    out_types.pop_back();
  Ctx ctx(*this, node, in, out_types);
  Mapped m;
  try {
    m = entry->map(ctx);
  } catch (const std::exception &e) {
    ctx.unsupported(e.what());
  }
  if (!ctx.problems.empty() || m.outputs.empty()) {
    std::string what;
    for (const std::string &p : ctx.problems)
      what += (what.empty() ? "" : "; ") + p;
    return fail("not supported: " + (what.empty() ? "this form of the operator" : what));
  }
  // Where gradc's rule gives another type than ONNX's inference (a ceil_mode
  // pool), gradc's stands, and inference reruns with it.
  bool convention = false;
  for (const Value *v : in)
    convention = convention || (v && v->pool_convention);
  for (size_t i = 0; i < m.types.size() && i < out_types.size(); ++i)
    if (m.types[i] != out_types[i] || overridden_.count(node.output(int(i)))) {
      out_types[i] = m.types[i];
      overridden_[node.output(int(i))] = m.types[i];
      convention = true;
    }
  auto bind = [&](size_t i, std::string expr) {
    Value v;
    v.onnx_name = node.output(int(i));
    v.type = out_types[i];
    v.expr = std::move(expr);
    v.pool_convention = convention;
    values_[node.output(int(i))] = std::move(v);
  };
  if (m.tuple) {
    std::string var = fresh_name(node.name().empty() ? node.output(0) + "_parts" : node.name());
    body_.push_back("  %" + var + " = " + m.outputs[0] + ";");
    for (size_t i = 0; i < out_types.size(); ++i)
      if (!node.output(int(i)).empty())
        bind(i, "%" + var + "." + std::to_string(i));
    return;
  }
  for (size_t i = 0; i < m.outputs.size() && i < out_types.size(); ++i) {
    if (node.output(int(i)).empty())
      continue;
    std::string var = fresh_name(node.output(int(i)));
    body_.push_back("  %" + var + " = " + m.outputs[i] + ";");
    bind(i, "%" + var);
  }
}

/// ONNX's type for a gradc dtype.
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

/// `vi` declared as a tensor of `type`.
void declare(onnx::ValueInfoProto *vi, const std::string &name, const Type &type) {
  vi->set_name(name);
  onnx::TypeProto_Tensor *tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_of(type.dtype));
  tt->mutable_shape()->clear_dim();
  for (int64_t d : type.shape)
    tt->mutable_shape()->add_dim()->set_dim_value(d);
}

/// A message of the ONNX library on one line (the checker prints a node over
/// several), its control characters escaped.
std::string one_line(const std::string &text) {
  std::string what;
  for (char ch : text)
    if (!std::isspace(static_cast<unsigned char>(ch)) || (!what.empty() && what.back() != ' '))
      what += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
  while (!what.empty() && what.back() == ' ')
    what.pop_back();
  return printable(what);
}

/// ONNX shape inference of `model` in a child process, in place (unchanged
/// where it fails); why it failed, or empty. Lenient (`strict` false): a node it cannot infer is
/// skipped, and the graph's declared types stand for its outputs.
std::string infer_isolated(onnx::ModelProto &model, bool strict) {
  Isolated r = run_isolated([&] {
    onnx::ShapeInferenceOptions opts(false, strict ? 1 : 0, true);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(), opts);
    return model.SerializeAsString();
  });
  onnx::ModelProto inferred;
  if (r.failure.empty() && !inferred.ParseFromString(r.out))
    r.failure = "its result does not read back";
  if (r.failure.empty())
    model.Swap(&inferred);
  return r.failure;
}

/// Shape inference on a copy of the model where the constants folded so far
/// are initializers, the values whose type gradc's rule gives otherwise are
/// inputs of that type (their nodes gone in both cases), and the types
/// derived here are known.
void Importer::infer_shapes() {
  onnx::ModelProto m = model_;
  onnx::GraphProto *graph = m.mutable_graph();
  if (!folded_.empty() || !overridden_.empty()) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (const onnx::NodeProto &n : graph->node()) {
      bool all = n.output_size() > 0;
      for (const std::string &o : n.output())
        all = all && (folded_.count(o) || overridden_.count(o));
      if (!all)
        *kept.Add() = n;
    }
    graph->mutable_node()->Swap(&kept);
    for (const auto &[name, c] : folded_) {
      onnx::TensorProto *t = graph->add_initializer();
      t->set_name(name);
      t->set_data_type(elem_of(c.dtype));
      for (int64_t d : c.shape)
        t->add_dims(d);
      t->set_raw_data(bytes_of(c));
      // Listed as an input too: before IR version 4 an initializer must be.
      declare(graph->add_input(), name, Type::tensor(c.shape, c.dtype));
    }
    for (const auto &[name, type] : overridden_)
      declare(graph->add_input(), name, type);
    // What the model declares of them is ONNX's reading.
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> infos;
    for (const onnx::ValueInfoProto &vi : graph->value_info())
      if (!overridden_.count(vi.name()))
        *infos.Add() = vi;
    graph->mutable_value_info()->Swap(&infos);
    for (onnx::ValueInfoProto &out : *graph->mutable_output())
      if (overridden_.count(out.name()) && out.type().has_tensor_type())
        out.mutable_type()->mutable_tensor_type()->clear_shape();
  }
  for (const auto &[name, type] : derived_)
    declare(graph->add_value_info(), name, type);
  std::string failure = infer_isolated(m, false);
  if (!failure.empty()) {
    // A graph output declared with another type than ONNX infers (PyTorch
    // declares a ceil_mode pool's shape): inferred without the declared
    // types, which are compared with what the import computes at the end.
    for (onnx::ValueInfoProto &out : *m.mutable_graph()->mutable_output())
      if (out.type().has_tensor_type()) {
        out.mutable_type()->mutable_tensor_type()->clear_shape();
        out.mutable_type()->mutable_tensor_type()->clear_elem_type();
      }
    if (infer_isolated(m, false).empty())
      failure.clear();
  }
  if (!failure.empty()) {
    if (folded_.empty() && derived_.empty() && overridden_.empty())
      error("ONNX shape inference fails: " + one_line(failure));
    // Else what the substitution added is at fault: the types stand as found.
    return;
  }
  inferred_.clear();
  no_dtype_.clear();
  const onnx::GraphProto &g = m.graph();
  auto record = [&](const onnx::ValueInfoProto &vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape())
      return;
    std::optional<DType> dt = dtype_of(vi.type().tensor_type().elem_type());
    if (!dt) {
      no_dtype_[vi.name()] = elem_name(vi.type().tensor_type().elem_type());
      return;
    }
    Shape shape;
    int64_t n = 1;
    for (const onnx::TensorShapeProto_Dimension &d : vi.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0 || (d.dim_value() > 0 && n > kMaxElements / d.dim_value()))
        return; // unknown, or too large for gradc: the node's mapping says so
      n *= d.dim_value();
      shape.push_back(d.dim_value());
    }
    inferred_[vi.name()] = Type::tensor(shape, *dt);
  };
  for (const onnx::ValueInfoProto &vi : g.value_info())
    record(vi);
  for (const onnx::ValueInfoProto &vi : g.output())
    record(vi);
  for (const auto &[name, c] : folded_) // initializers in the copy
    inferred_[name] = Type::tensor(c.shape, c.dtype);
  for (const auto &[name, type] : overridden_) // inputs in the copy
    inferred_[name] = type;
}

/// Why strict ONNX shape inference rejects the model (after --input-shape),
/// or empty: said where a shape stays unknown, which a wrong --input-shape
/// causes. Asked once.
std::string Importer::strict_complaint() {
  if (!strict_complaint_) {
    onnx::ModelProto m = model_;
    strict_complaint_ = one_line(infer_isolated(m, true));
  }
  return *strict_complaint_;
}

/// Converts the graph from scratch: values, parameters, weights and body.
/// A value whose initializer or input is refused is unknown: the nodes
/// reading it are skipped (but checked for a mapping).
void Importer::walk() {
  errors_ = 0;
  values_.clear();
  used_names_.clear();
  next_suffix_.clear();
  renamed_.clear();
  params_.clear();
  input_params_.clear();
  weights_.clear();
  body_.clear();
  auto unknown = [&](const std::string &name) {
    Value v;
    v.onnx_name = name;
    v.expr = "<error>";
    values_[name] = std::move(v);
  };
  const onnx::GraphProto &g = model_.graph();
  // Initializers: constants (weights), parameters when read as tensors.
  for (const onnx::TensorProto &t : g.initializer()) {
    Decoded d = decode(t);
    if (!d.error.empty()) {
      error("initializer '" + printable(t.name()) + "': " + d.error);
      unknown(t.name());
      continue;
    }
    Value v;
    v.onnx_name = t.name();
    v.type = Type::tensor(d.shape, d.dtype);
    v.weight = true;
    if (numel(d.shape) <= kMaxFoldedElements)
      v.constant = values_of(d);
    v.raw = std::move(d);
    values_[t.name()] = std::move(v);
  }
  // Graph inputs that are not initializers: the parameters, first.
  for (const onnx::ValueInfoProto &in : g.input()) {
    if (values_.count(in.name()))
      continue; // an initializer listed as an input too (older exporters)
    std::optional<Type> t = type_of(in.type(), "input '" + printable(in.name()) + "'");
    if (!t) {
      unknown(in.name());
      continue;
    }
    std::string name = fresh_name(in.name());
    input_params_.push_back("%" + name + ": Tensor[" + shape_text(t->shape) + ", " + dtype_name(t->dtype) + "]");
    Value v;
    v.onnx_name = in.name();
    v.type = *t;
    v.expr = "%" + name;
    values_[in.name()] = std::move(v);
  }
  for (int i = 0; i < g.node_size(); ++i)
    convert(g.node(i), size_t(i));
}

/// Tensors of the graph (and of its subgraphs) whose data is stored outside
/// the model file. They are refused before the ONNX checker runs, which
/// would look for the file: its message would tell whether a path exists.
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

/// A declared graph output's type as text ("float32 (3, ?)"), `?` for a
/// dimension it leaves open.
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

/// Types the Relay text the import wrote (gradc's own relations, errors
/// located in it) and compares each result with the graph output's declared
/// type: its dtype, and each dimension it declares. A shape that differs
/// only through a ceil_mode pool (PyTorch's extent, where ONNX 1.12's
/// inference that an exporter declares counts one more window) is a
/// warning; any other difference an error naming the output.
bool Importer::check_outputs(const std::string &text) {
  auto source = std::make_shared<SourceFile>(path_ + " (imported)", text);
  DiagEngine diag(source, err_);
  std::optional<Module> parsed = parse_module(source, diag);
  if (!parsed)
    return false;
  Module typed = infer_types(*parsed, diag);
  if (diag.error_count())
    return false;
  const Type &result = typed.find("main")->body.result->type;
  const onnx::GraphProto &g = model_.graph();
  bool ok = true;
  for (int i = 0; i < g.output_size(); ++i) {
    const onnx::ValueInfoProto &out = g.output(i);
    const Type &got = g.output_size() == 1 ? result : result.fields.at(size_t(i));
    if (!out.type().has_tensor_type() || !got.is_tensor())
      continue;
    const onnx::TypeProto_Tensor &declared = out.type().tensor_type();
    bool dtype_differs = declared.elem_type() != 0 && dtype_of(declared.elem_type()) != got.dtype;
    bool shape_differs = declared.has_shape() && declared.shape().dim_size() != got.rank();
    for (int d = 0; !shape_differs && declared.has_shape() && d < declared.shape().dim_size(); ++d)
      shape_differs = declared.shape().dim(d).has_dim_value() && declared.shape().dim(d).dim_value() != got.shape[size_t(d)];
    if (!dtype_differs && !shape_differs)
      continue;
    std::string what = "output '" + printable(out.name()) + "': the graph declares " + declared_text(declared) +
                       ", the import computes " + dtype_name(got.dtype) + " " + shape_text(got.shape);
    if (!dtype_differs && values_.at(out.name()).pool_convention) {
      err_ << printable(path_) << ": warning: " << what
           << " (a ceil_mode pool's last window starting in the padding is dropped, as PyTorch does; ONNX 1.12's "
              "shape inference keeps it)\n";
      continue;
    }
    error(what);
    ok = false;
  }
  return ok;
}

std::optional<OnnxImport> Importer::run(const std::string &bytes, const OnnxImportOptions &options) {
  if (bytes.empty() || !model_.ParseFromString(bytes)) {
    // protobuf refuses a message nested over 100 deep: said so where the
    // file reads with a deeper limit.
    google::protobuf::io::CodedInputStream deep(reinterpret_cast<const uint8_t *>(bytes.data()), int(bytes.size()));
    deep.SetRecursionLimit(1000);
    onnx::ModelProto probe;
    bool nested = !bytes.empty() && bytes.size() <= size_t(INT_MAX) && probe.ParseFromCodedStream(&deep) &&
                  deep.ConsumedEntireMessage();
    error(std::string("not an ONNX model: the file does not parse as an ONNX ModelProto (protobuf)") +
          (nested ? ": it nests messages (subgraphs) more than 100 deep, protobuf's limit" : ""));
    return std::nullopt;
  }
  if (!model_.has_graph()) {
    error("not an ONNX model: it has no graph");
    return std::nullopt;
  }
  std::vector<std::string> external;
  external_tensors(model_.graph(), external);
  for (const std::string &name : external)
    error("tensor '" + printable(name) + "': its data is stored outside the model file (external data is not read)");
  if (!external.empty())
    return std::nullopt;
  // Every import of the default domain must name an opset the table maps.
  bool any_opset = false;
  for (const onnx::OperatorSetIdProto &o : model_.opset_import()) {
    if (!o.domain().empty() && o.domain() != "ai.onnx")
      continue;
    if (any_opset && o.version() != opset_) {
      error("the model imports the default domain at two opsets, " + std::to_string(opset_) + " and " +
            std::to_string(o.version()));
      return std::nullopt;
    }
    opset_ = o.version();
    any_opset = true;
  }
  // Newer opsets may redefine any operator; older ones are checked node by
  // node (definition_problem).
  if (any_opset && opset_ > onnx_import::kMaxOpset) {
    error("ONNX opset " + std::to_string(opset_) + " is not supported: gradc maps opsets up to " +
          std::to_string(onnx_import::kMaxOpset) + " (export the model at " + std::to_string(onnx_import::kMinOpset) +
          " to " + std::to_string(onnx_import::kMaxOpset) + ")");
    return std::nullopt;
  }
  Isolated checked = run_isolated([&] {
    onnx::checker::check_model(model_);
    return std::string();
  });
  if (!checked.failure.empty()) {
    error("the ONNX checker rejects the model: " + one_line(checked.failure));
    return std::nullopt;
  }
  if (!fix_inputs(options))
    return std::nullopt;
  // ONNX shape inference stops where a shape is computed (Shape, Gather,
  // Concat feeding a Reshape or a Slice): a probing walk folds those, and
  // inference runs again on a copy where they are initializers, until it
  // finds nothing new. Types gradc's rules give otherwise (a ceil_mode
  // pool) enter the next round the same way.
  infer_shapes();
  if (errors_)
    return std::nullopt;
  auto found = [&] { return derived_.size() + folded_.size() + overridden_.size(); };
  for (int round = 0; round < 16; ++round) {
    quiet_ = true;
    size_t known = found();
    walk();
    quiet_ = false;
    errors_ = 0; // a probing walk's errors are found again by the last
    if (found() == known)
      break;
    infer_shapes();
    if (errors_)
      return std::nullopt;
  }
  walk();
  const onnx::GraphProto &g = model_.graph();
  // Names something defines (a refused initializer or input, a node that
  // failed): an output missing for them was reported already.
  std::set<std::string> defined;
  for (const onnx::TensorProto &t : g.initializer())
    defined.insert(t.name());
  for (const onnx::ValueInfoProto &in : g.input())
    defined.insert(in.name());
  for (const onnx::NodeProto &n : g.node())
    defined.insert(n.output().begin(), n.output().end());
  std::vector<std::string> results;
  for (const onnx::ValueInfoProto &out : g.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end()) {
      if (!defined.count(out.name()))
        error("output '" + printable(out.name()) + "' is not computed by any node");
      continue;
    }
    if (it->second.type.kind != Type::Tensor)
      continue;
    results.push_back(expr_of(out.name()));
  }
  if (errors_)
    return std::nullopt;
  if (results.empty()) {
    error("the graph has no outputs");
    return std::nullopt;
  }
  std::ostringstream text;
  text << "#[version = \"0.0.5\"]\n";
  text << "// Imported from " << printable(path_) << " by gradc import (ONNX opset " << opset_;
  if (!model_.producer_name().empty())
    text << ", written by " << printable(model_.producer_name()) << " " << printable(model_.producer_version());
  text << ").\n";
  if (!renamed_.empty()) {
    text << "// Names (gradc <- ONNX):\n";
    for (const auto &[relay, onnx_name] : renamed_)
      text << "//   %" << relay << " <- \"" << printable(onnx_name) << "\"\n";
  }
  text << "def @main(";
  std::vector<std::string> all = input_params_;
  all.insert(all.end(), params_.begin(), params_.end());
  for (size_t i = 0; i < all.size(); ++i)
    text << (i ? ",\n          " : "") << all[i];
  text << ") {\n";
  for (const std::string &line : body_)
    text << line << "\n";
  if (results.size() == 1)
    text << "  " << results[0] << "\n";
  else {
    text << "  (";
    for (size_t i = 0; i < results.size(); ++i)
      text << (i ? ", " : "") << results[i];
    text << ")\n";
  }
  text << "}\n";
  if (!check_outputs(text.str()))
    return std::nullopt;
  return OnnxImport{text.str(), std::move(weights_)};
}

} // namespace

std::optional<OnnxImport> import_onnx(const std::string &path, const std::string &bytes,
                                      const OnnxImportOptions &options, std::ostream &err) {
  Importer importer(path, err);
  try {
    return importer.run(bytes, options);
  } catch (const std::bad_alloc &) {
    importer.fatal("the model needs more memory than this machine gives gradc");
  } catch (const std::exception &e) {
    importer.fatal(std::string("the model cannot be read: ") + e.what());
  }
  return std::nullopt;
}

bool looks_like_onnx(const std::string &path) {
  std::string ext = path.size() >= 5 ? path.substr(path.size() - 5) : "";
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".onnx";
}

std::vector<std::string> onnx_supported_ops() {
  std::vector<std::string> out{"Constant", "Shape"};
  for (const onnx_import::OpEntry &e : onnx_import::op_table())
    out.push_back(e.op_type);
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace gradc
