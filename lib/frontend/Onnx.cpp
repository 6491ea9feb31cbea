//===- Onnx.cpp - ONNX models as Relay text (gradc import) ----------------===//
//
// Parse (protobuf), check (onnx::checker), fix the dynamic input dimensions
// the user gave, infer shapes (onnx::shape_inference), then walk the nodes
// in order: Constant nodes and nodes whose inputs are all constants with a
// folder here (Shape, Gather, Unsqueeze, Concat, Cast, arithmetic: what a
// PyTorch export computes a Reshape's shape with) become constants; every
// other node goes through its entry of the operator table (OnnxOps.cpp) and
// is bound to a Relay variable. Errors are collected, every one at once.
//
//===----------------------------------------------------------------------===//
#include "gradc/frontend/Onnx.h"

#include "OnnxOps.h"

#include <onnx/checker.h>
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
namespace {

using onnx_import::ConstValue;
using onnx_import::Mapped;
using onnx_import::to_int;

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

std::optional<DType> dtype_of(int32_t elem) {
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

std::string elem_name(int32_t elem) {
  return onnx::TensorProto_DataType_IsValid(elem) ? onnx::TensorProto_DataType_Name(elem) : std::to_string(elem);
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
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
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
  auto count_error = [&](size_t have) {
    d.error = "it holds " + std::to_string(have) + " elements, not " + std::to_string(n);
  };
  d.data.resize(size_t(n) * bytes);
  char *out = d.data.data();
  switch (*dt) {
  case DType::Float32:
    if (t.float_data_size() != n)
      return count_error(size_t(t.float_data_size())), d;
    if (n)
      std::memcpy(out, t.float_data().data(), size_t(n) * 4);
    break;
  case DType::Float64:
    if (t.double_data_size() != n)
      return count_error(size_t(t.double_data_size())), d;
    if (n)
      std::memcpy(out, t.double_data().data(), size_t(n) * 8);
    break;
  case DType::Int64:
    if (t.int64_data_size() != n)
      return count_error(size_t(t.int64_data_size())), d;
    if (n)
      std::memcpy(out, t.int64_data().data(), size_t(n) * 8);
    break;
  case DType::Int32:
  case DType::Bool:
  case DType::Float16:
    if (t.int32_data_size() != n)
      return count_error(size_t(t.int32_data_size())), d;
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

ConstValue values_of(const Decoded &d) {
  ConstValue c{d.dtype, d.shape, {}};
  size_t n = d.data.size() / dtype_bytes(d.dtype);
  c.values.reserve(n);
  const char *p = d.data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (d.dtype) {
    case DType::Float32: { float v; std::memcpy(&v, p + i * 4, 4); c.values.push_back(v); break; }
    case DType::Float64: { double v; std::memcpy(&v, p + i * 8, 8); c.values.push_back(v); break; }
    case DType::Int64: { int64_t v; std::memcpy(&v, p + i * 8, 8); c.values.push_back(double(v)); break; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p + i * 4, 4); c.values.push_back(v); break; }
    case DType::Bool: c.values.push_back(p[i] ? 1 : 0); break;
    case DType::Float16: { uint16_t h; std::memcpy(&h, p + i * 2, 2); c.values.push_back(half_value(h)); break; }
    }
  }
  return c;
}

/// The bytes of `c` in its dtype (a folded constant that became a parameter).
std::string bytes_of(const ConstValue &c) {
  std::string out(c.values.size() * dtype_bytes(c.dtype), '\0');
  char *p = out.data();
  for (size_t i = 0; i < c.values.size(); ++i) {
    double v = c.values[i];
    switch (c.dtype) {
    case DType::Float32: { float f = float(v); std::memcpy(p + i * 4, &f, 4); break; }
    case DType::Float64: std::memcpy(p + i * 8, &v, 8); break;
    case DType::Int64: { int64_t x = to_int(v); std::memcpy(p + i * 8, &x, 8); break; }
    case DType::Int32: { int32_t x = int32_t(std::clamp<int64_t>(to_int(v), INT32_MIN, INT32_MAX)); std::memcpy(p + i * 4, &x, 4); break; }
    case DType::Bool: p[i] = char(v != 0); break;
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
/// starting with a digit.
std::string sanitize(const std::string &name) {
  std::string out;
  for (char ch : name)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' ? ch : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = "v" + out;
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
};

class Importer {
public:
  Importer(std::string path, std::ostream &err) : path_(std::move(path)), err_(err) {}

  std::optional<OnnxImport> run(const std::string &bytes, const OnnxImportOptions &options);

  void error(const std::string &msg) {
    if (!quiet_)
      err_ << path_ << ": error: " << msg << "\n";
    ++errors_;
  }

  // For NodeCtx.
  std::string expr_of(const std::string &name);
  std::string literal(double v, DType dt) const;
  const std::unordered_map<std::string, Value> &values() const { return values_; }
  int64_t opset() const { return opset_; }

private:
  std::string path_;
  std::ostream &err_;
  int errors_ = 0;
  int64_t opset_ = 0;
  onnx::ModelProto model_;
  std::unordered_map<std::string, Value> values_;
  std::set<std::string> used_names_;
  std::vector<std::pair<std::string, std::string>> renamed_; // relay, onnx
  std::vector<std::string> params_, input_params_;
  std::vector<ImportedWeight> weights_;
  std::vector<std::string> body_;
  std::unordered_map<std::string, Type> inferred_;
  std::unordered_map<std::string, std::string> no_dtype_; // values of an element type gradc has not
  std::map<std::string, Type> derived_;  // types found here that ONNX inference left unknown
  std::map<std::string, ConstValue> folded_; // node outputs folded to constants
  bool quiet_ = false;                   // a probing walk: errors not reported
  void infer_shapes();
  void walk();

  std::string fresh_name(const std::string &onnx_name) {
    std::string base = sanitize(onnx_name), name = base;
    for (int k = 2; used_names_.count(name); ++k)
      name = base + "_" + std::to_string(k);
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
    return "node " + std::to_string(index) + (node.name().empty() ? "" : " '" + node.name() + "'") + " (" +
           node.op_type() + ")";
  }
  friend class Ctx;
};

std::string Importer::literal(double v, DType dt) const {
  std::ostringstream s;
  if (dt == DType::Bool)
    return v != 0 ? "True" : "False";
  if (is_int(dt)) {
    s << to_int(v) << dtype_info(dt).literal_suffix;
    return s.str();
  }
  if (std::isinf(v))
    v = v > 0 ? dtype_info(dt).max_finite : -dtype_info(dt).max_finite;
  s.precision(17);
  s << v;
  std::string t = s.str();
  if (t.find_first_of(".e") == std::string::npos)
    t += ".0";
  return t + dtype_info(dt).literal_suffix;
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
    std::string lit = literal(c->values[0], c->dtype);
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
            (d.has_dim_param() ? " ('" + d.dim_param() + "')" : ""));
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
        std::string param = shape->dim(i).has_dim_param() ? " '" + shape->dim(i).dim_param() + "'" : "";
        error("input '" + in.name() + "' has a dynamic dimension" + param + " (dimension " + std::to_string(i) +
              "): fix it with --input-shape " + in.name() + "=D0,D1,...");
        ok = false;
        break;
      }
  }
  for (const auto &[name, dims] : options.input_shapes)
    if (!given.count(name)) {
      error("--input-shape names '" + name + "', which is not an input of the model");
      ok = false;
    }
  return ok;
}

/// Folds a node whose inputs are all constants, where it computes shapes.
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
    out = ConstValue{DType::Int64, {int64_t(in[0]->type.shape.size())}, {}};
    for (int64_t d : in[0]->type.shape)
      out->values.push_back(double(d));
    int64_t r = int64_t(in[0]->type.shape.size()), start = attr_int("start", 0), end = attr_int("end", r);
    start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
    end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
    out->values = std::vector<double>(out->values.begin() + start, out->values.begin() + std::max(start, end));
    out->shape = {int64_t(out->values.size())};
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
        std::optional<DType> dt = dtype_of(int32_t(attr_int("to", 1)));
        if (!dt)
          return false;
        out->dtype = *dt;
        if (is_int(*dt))
          for (double &v : out->values)
            v = std::trunc(v);
      }
    } else if ((op == "Unsqueeze" || op == "Squeeze") && !in.empty()) {
      out = a;
      out->shape = Shape(); // from the inferred output below
    } else if (op == "Gather" && in.size() == 2 && a.shape.size() == 1) {
      const ConstValue &idx = *in[1]->constant;
      out = ConstValue{a.dtype, idx.shape, {}};
      for (double i : idx.values) {
        int64_t k = to_int(i) < 0 ? to_int(i) + int64_t(a.values.size()) : to_int(i);
        if (k < 0 || k >= int64_t(a.values.size()))
          return false;
        out->values.push_back(a.values[size_t(k)]);
      }
    } else if (op == "Concat" && a.shape.size() == 1) {
      out = ConstValue{a.dtype, {0}, {}};
      for (const Value *v : in) {
        if (v->constant->shape.size() != 1)
          return false;
        out->values.insert(out->values.end(), v->constant->values.begin(), v->constant->values.end());
      }
      out->shape = {int64_t(out->values.size())};
    } else if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && in.size() == 2) {
      const ConstValue &b = *in[1]->constant;
      if (a.values.size() != b.values.size() && b.values.size() != 1 && a.values.size() != 1)
        return false;
      // The broadcast shape: the higher rank, then the more elements.
      bool take_a = a.shape.size() != b.shape.size() ? a.shape.size() > b.shape.size()
                                                     : a.values.size() >= b.values.size();
      out = take_a ? a : b;
      out->dtype = a.dtype;
      for (size_t i = 0; i < out->values.size(); ++i) {
        double x = a.values[a.values.size() == 1 ? 0 : i], y = b.values[b.values.size() == 1 ? 0 : i];
        double r = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : (y == 0 ? NAN : x / y);
        if (op == "Div" && is_int(a.dtype)) {
          if (y == 0)
            return false;
          r = std::floor(x / y) == x / y ? x / y : std::trunc(x / y);
        }
        out->values[i] = r;
      }
    } else if (op == "Slice" && a.shape.size() == 1 && in.size() >= 3) {
      std::vector<double> s = in[1]->constant->values, e = in[2]->constant->values;
      int64_t step = in.size() > 4 && !in[4]->constant->values.empty() ? to_int(in[4]->constant->values[0]) : 1, n = int64_t(a.values.size());
      if (s.size() != 1 || e.size() != 1 || step != 1)
        return false;
      int64_t b0 = to_int(s[0]), e0 = to_int(e[0]);
      b0 = std::clamp<int64_t>(b0 < 0 ? b0 + n : b0, 0, n);
      e0 = std::clamp<int64_t>(e0 < 0 ? e0 + n : e0, 0, n);
      out = ConstValue{a.dtype, {std::max<int64_t>(0, e0 - b0)}, {}};
      for (int64_t i = b0; i < e0; ++i)
        out->values.push_back(a.values[size_t(i)]);
    } else {
      return false;
    }
  }
  if (!out || node.output_size() != 1)
    return false;
  const std::string &name = node.output(0);
  Value v;
  v.onnx_name = name;
  if (out->shape.empty() && !out->values.empty() && (op == "Unsqueeze" || op == "Squeeze")) {
    auto it = inferred_.find(name);
    if (it == inferred_.end())
      return false;
    out->shape = it->second.shape;
  }
  v.type = Type::tensor(out->shape, out->dtype);
  folded_[name] = *out;
  v.constant = std::move(out);
  values_[name] = std::move(v);
  return true;
}

/// A Reshape's output type where ONNX inference left it unknown (its shape
/// computed by folded nodes).
std::optional<Type> reshape_type(const onnx::NodeProto &node, const std::vector<const Value *> &in,
                                 const std::string &out) {
  if (node.op_type() != "Reshape" || in.size() < 2 || !in[0] || !in[1] || !in[1]->constant || out != node.output(0))
    return std::nullopt;
  bool allowzero = false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "allowzero")
      allowzero = a.i() != 0;
  const Shape &from = in[0]->type.shape;
  Shape shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < in[1]->constant->values.size(); ++i) {
    int64_t d = to_int(in[1]->constant->values[i]);
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

void Importer::convert(const onnx::NodeProto &node, size_t index) {
  std::string where = describe(node, index);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    error(where + ": operators of domain '" + node.domain() + "' are not supported");
    return;
  }
  std::vector<const Value *> in;
  for (const std::string &name : node.input()) {
    if (name.empty()) {
      in.push_back(nullptr);
      continue;
    }
    auto it = values_.find(name);
    if (it == values_.end()) {
      error(where + ": input '" + name + "' is not defined before the node (a cycle, or nodes out of order)");
      return;
    }
    in.push_back(&it->second);
  }
  auto unknown = [&](const std::string &out) {
    Value v;
    v.onnx_name = out;
    v.expr = "<error>";
    values_[out] = std::move(v); // kind Unknown: its readers are skipped
  };
  for (const Value *v : in)
    if (v && v->type.kind != Type::Tensor) { // after an earlier error
      for (const std::string &out : node.output())
        unknown(out);
      return;
    }
  if (node.op_type() == "Constant") {
    for (const onnx::AttributeProto &a : node.attribute()) {
      ConstValue c;
      if (a.name() == "value") {
        Decoded d = decode(a.t());
        if (!d.error.empty()) {
          error(where + ": its value cannot be read: " + d.error);
          return unknown(node.output(0));
        }
        c = values_of(d);
      } else if (a.name() == "value_float") {
        c = {DType::Float32, {}, {a.f()}};
      } else if (a.name() == "value_int") {
        c = {DType::Int64, {}, {double(a.i())}};
      } else if (a.name() == "value_floats" || a.name() == "value_ints") {
        bool f = a.name() == "value_floats";
        c = {f ? DType::Float32 : DType::Int64, {f ? a.floats_size() : a.ints_size()}, {}};
        for (int i = 0; i < (f ? a.floats_size() : a.ints_size()); ++i)
          c.values.push_back(f ? a.floats(i) : double(a.ints(i)));
      } else {
        error(where + ": attribute '" + a.name() + "' is not supported");
        return unknown(node.output(0));
      }
      Value v;
      v.onnx_name = node.output(0);
      v.type = Type::tensor(c.shape, c.dtype);
      if (int64_t(c.values.size()) <= kMaxFoldedElements)
        folded_[node.output(0)] = c;
      v.constant = std::move(c);
      values_[node.output(0)] = std::move(v);
      return;
    }
    error(where + ": it has no value");
    return unknown(node.output(0));
  }
  if (fold(node, in))
    return;
  const onnx_import::OpEntry *entry = nullptr;
  for (const onnx_import::OpEntry &e : onnx_import::op_table())
    if (node.op_type() == e.op_type)
      entry = &e;
  if (!entry) {
    error(where + ": no mapping for ONNX operator " + node.op_type());
    for (const std::string &out : node.output())
      unknown(out);
    return;
  }
  std::vector<Type> out_types;
  for (const std::string &out : node.output()) {
    auto it = inferred_.find(out);
    if (!out.empty() && it == inferred_.end())
      if (std::optional<Type> t = reshape_type(node, in, out)) {
        inferred_[out] = *t;
        derived_[out] = *t;
        it = inferred_.find(out);
      }
    if (out.empty() || it == inferred_.end()) {
      if (auto nd = no_dtype_.find(out); nd != no_dtype_.end()) {
        error(where + ": not supported: output '" + out + "' has element type " + nd->second +
              ", which has no gradc dtype");
        for (const std::string &o : node.output())
          unknown(o);
        return;
      }
      if (!out.empty()) {
        error(where + ": the shape of output '" + out + "' is unknown after ONNX shape inference");
        for (const std::string &o : node.output())
          unknown(o);
        return;
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
    error(where + ": not supported: " + (what.empty() ? "this form of the operator" : what));
    for (const std::string &out : node.output())
      unknown(out);
    return;
  }
  if (m.tuple) {
    std::string var = fresh_name(node.name().empty() ? node.output(0) + "_parts" : node.name());
    body_.push_back("  %" + var + " = " + m.outputs[0] + ";");
    for (size_t i = 0; i < out_types.size(); ++i) {
      if (node.output(int(i)).empty())
        continue;
      Value v;
      v.onnx_name = node.output(int(i));
      v.type = out_types[i];
      v.expr = "%" + var + "." + std::to_string(i);
      values_[node.output(int(i))] = std::move(v);
    }
    return;
  }
  for (size_t i = 0; i < m.outputs.size() && i < out_types.size(); ++i) {
    const std::string &out = node.output(int(i));
    std::string var = fresh_name(out);
    body_.push_back("  %" + var + " = " + m.outputs[i] + ";");
    Value v;
    v.onnx_name = out;
    v.type = out_types[i];
    v.expr = "%" + var;
    values_[out] = std::move(v);
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

/// Shape inference on a copy of the model where the constants folded so far
/// are initializers (their nodes gone) and the types found here are known.
void Importer::infer_shapes() {
  onnx::ModelProto m = model_;
  onnx::GraphProto *graph = m.mutable_graph();
  if (!folded_.empty()) {
    google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
    for (const onnx::NodeProto &n : graph->node()) {
      bool all = n.output_size() > 0;
      for (const std::string &o : n.output())
        all = all && folded_.count(o);
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
      onnx::ValueInfoProto *in = graph->add_input();
      in->set_name(name);
      onnx::TypeProto_Tensor *tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(elem_of(c.dtype));
      tt->mutable_shape();
      for (int64_t d : c.shape)
        tt->mutable_shape()->add_dim()->set_dim_value(d);
    }
  }
  for (const auto &[name, type] : derived_) {
    onnx::ValueInfoProto *vi = graph->add_value_info();
    vi->set_name(name);
    onnx::TypeProto_Tensor *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_of(type.dtype));
    for (int64_t d : type.shape)
      tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  Isolated inferred = run_isolated([&] {
    onnx::ShapeInferenceOptions opts(false, 0, true);
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), opts);
    return m.SerializeAsString();
  });
  if (inferred.failure.empty() && !m.ParseFromString(inferred.out))
    inferred.failure = "its result does not read back";
  if (!inferred.failure.empty()) {
    if (folded_.empty() && derived_.empty())
      error("ONNX shape inference fails: " + inferred.failure);
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
}

/// Converts the graph from scratch: values, parameters, weights and body.
void Importer::walk() {
  errors_ = 0;
  values_.clear();
  used_names_.clear();
  renamed_.clear();
  params_.clear();
  input_params_.clear();
  weights_.clear();
  body_.clear();
  const onnx::GraphProto &g = model_.graph();
  // Initializers: constants (weights), parameters when read as tensors.
  for (const onnx::TensorProto &t : g.initializer()) {
    Decoded d = decode(t);
    if (!d.error.empty()) {
      error("initializer '" + t.name() + "': " + d.error);
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
    std::optional<Type> t = type_of(in.type(), "input '" + in.name() + "'");
    if (!t)
      continue;
    std::string name = fresh_name(in.name());
    input_params_.push_back("%" + name + ": Tensor[" + shape_text(t->shape) + ", " + dtype_name(t->dtype) + "]");
    Value v;
    v.onnx_name = in.name();
    v.type = *t;
    v.expr = "%" + name;
    values_[in.name()] = std::move(v);
  }
  if (errors_)
    return;
  for (int i = 0; i < g.node_size(); ++i)
    convert(g.node(i), size_t(i));
}

std::optional<OnnxImport> Importer::run(const std::string &bytes, const OnnxImportOptions &options) {
  if (bytes.empty() || !model_.ParseFromString(bytes)) {
    error("not an ONNX model: the file does not parse as an ONNX ModelProto (protobuf)");
    return std::nullopt;
  }
  if (!model_.has_graph()) {
    error("not an ONNX model: it has no graph");
    return std::nullopt;
  }
  for (const onnx::OperatorSetIdProto &o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset_ = o.version();
  Isolated checked = run_isolated([&] {
    onnx::checker::check_model(model_);
    return std::string();
  });
  if (!checked.failure.empty()) {
    // One line: the checker prints the node over several.
    std::string what;
    for (char ch : checked.failure)
      if (!std::isspace(static_cast<unsigned char>(ch)) || (!what.empty() && what.back() != ' '))
        what += std::isspace(static_cast<unsigned char>(ch)) ? ' ' : ch;
    while (!what.empty() && what.back() == ' ')
      what.pop_back();
    error("the ONNX checker rejects the model: " + what);
    return std::nullopt;
  }
  if (!fix_inputs(options))
    return std::nullopt;
  // ONNX shape inference stops where a shape is computed (Shape, Gather,
  // Concat feeding a Reshape or a Slice): a probing walk folds those, and
  // inference runs again on a copy where they are initializers, until it
  // finds nothing new.
  infer_shapes();
  if (errors_)
    return std::nullopt;
  for (int round = 0; round < 16; ++round) {
    quiet_ = true;
    size_t known = derived_.size() + folded_.size();
    walk();
    quiet_ = false;
    errors_ = 0; // a probing walk's errors are found again by the last
    if (derived_.size() + folded_.size() == known)
      break;
    infer_shapes();
    if (errors_)
      return std::nullopt;
  }
  walk();
  const onnx::GraphProto &g = model_.graph();
  std::vector<std::string> results;
  for (const onnx::ValueInfoProto &out : g.output()) {
    auto it = values_.find(out.name());
    if (it == values_.end()) {
      error("output '" + out.name() + "' is not computed by any node");
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
  text << "// Imported from " << path_ << " by gradc import (ONNX opset " << opset_;
  if (!model_.producer_name().empty())
    text << ", written by " << model_.producer_name() << " " << model_.producer_version();
  text << ").\n";
  if (!renamed_.empty()) {
    text << "// Names (gradc <- ONNX):\n";
    for (const auto &[relay, onnx_name] : renamed_)
      text << "//   %" << relay << " <- \"" << onnx_name << "\"\n";
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
  return OnnxImport{text.str(), std::move(weights_)};
}

} // namespace

std::optional<OnnxImport> import_onnx(const std::string &path, const std::string &bytes,
                                      const OnnxImportOptions &options, std::ostream &err) {
  Importer importer(path, err);
  try {
    return importer.run(bytes, options);
  } catch (const std::exception &e) {
    importer.error(std::string("the model cannot be read: ") + e.what());
    return std::nullopt;
  }
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
