//===- Onnx.cpp - ONNX models as typed gradc IR (gradc import) ------------===//
//
// Parse (protobuf), check (onnx::checker, in a child process), fix the
// dynamic input dimensions the user gave, then walk the nodes in order:
// Constant nodes and nodes whose inputs are all constants with a folder
// (OnnxFold.cpp: Shape, Gather, Concat, Range, Where, arithmetic... what a
// PyTorch export computes shapes and masks with) become constants; every
// other node goes through its entry of the operator table (OnnxOps.cpp),
// which builds typed calls: each call's type comes from its operator's
// relation as it is built, so a node gradc cannot type is an error naming
// the node. Errors are collected, every one at once. The graph's declared
// outputs are compared with the types computed, and the module printed.
//
// Weights are not copied: the file is mapped into memory and parsed without
// the raw data of its large initializers (OnnxProto's strip_large_tensors),
// which the weights then refer to in the mapping; a small one's bytes move
// out of the parsed message into its weight. `compile model.onnx` never
// reads a weight's pages; `import` writes each from them once.
//
//===----------------------------------------------------------------------===//
#include "gradc/frontend/Onnx.h"

#include "OnnxFold.h"
#include "OnnxOps.h"
#include "OnnxProto.h"
#include "gradc/op/Check.h"
#include "gradc/text/Printer.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace gradc {
namespace {

using namespace onnx_import;

/// A gradc identifier for an ONNX name: letters, digits and '_', not
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

/// A value of the graph: a typed expression, or a constant not yet read as
/// a tensor. Its type is Unknown where what computes it was refused: the
/// nodes reading it are skipped (but checked for a mapping).
struct Value {
  ExprPtr expr;
  Type type;
  std::optional<ConstValue> constant;
  bool weight = false; // an initializer or a large Constant: made a parameter when read as a tensor
  Decoded raw;         // a weight's bytes, until they move into its ImportedWeight
  // Computed from a ceil_mode pool, whose extent follows gradc's (PyTorch's)
  // rule where ONNX 1.12's shape inference, which exporters may declare,
  // counts one more window.
  bool pool_convention = false;
};

class Importer {
public:
  Importer(std::string path, std::ostream &err) : path_(std::move(path)), err_(err) {}

  std::optional<OnnxImport> run(std::string bytes, const OnnxImportOptions &options);
  std::optional<OnnxImport> run_file(const OnnxImportOptions &options);

  void error(const std::string &msg) {
    err_ << printable(path_) << ": error: " << msg << "\n";
    ++errors_;
  }

  // For the node context.
  ExprPtr expr_of(const std::string &name);
  /// The opset the mappings read: a node of an older opset is mapped only
  /// where its operator's definition is the one of kMinOpset (definition_problem).
  int64_t opset() const { return std::max(opset_, kMinOpset); }
  std::vector<Binding> &body() { return body_; }
  ExprPtr seed() {
    if (!seed_) {
      Type t = Type::tensor({}, DType::Int64);
      seed_ = make_var(fresh_internal("seed"), t, {}, t);
    }
    return seed_;
  }
  int64_t next_stream() { return streams_++; }
  bool keeps_state() const { return state_in_place_; }
  void update_in_place(const ExprPtr &weight, const ExprPtr &value) {
    if (std::find(weight_params_.begin(), weight_params_.end(), weight) == weight_params_.end())
      return;
    for (const auto &u : state_updates_)
      if (u.first == weight)
        return; // the first update of a shared state wins
    state_updates_.push_back({weight, value});
  }
  std::optional<Type> declared(const std::string &name) const {
    auto it = declared_.find(name);
    return it == declared_.end() ? std::nullopt : std::optional<Type>(it->second);
  }
  /// A fresh name for a value gradc makes (not an ONNX name).
  std::string fresh_internal(const std::string &base) {
    std::string name = base;
    if (used_names_.count(name)) {
      int &k = next_suffix_.try_emplace(base, 2).first->second;
      do
        name = base + "_" + std::to_string(k++);
      while (used_names_.count(name));
    }
    used_names_.insert(name);
    return name;
  }

private:
  std::string path_;
  std::ostream &err_;
  int errors_ = 0;
  int64_t opset_ = 0;
  bool input_shapes_given_ = false;
  bool state_in_place_ = false;
  std::vector<std::pair<ExprPtr, ExprPtr>> state_updates_; // (weight, its new value), see NodeCtx::update_in_place
  onnx::ModelProto model_;
  // The model file mapped into memory, and where in it each initializer's
  // raw data was left (run_file): the weights refer to those pages.
  std::shared_ptr<const void> mapping_;
  std::vector<std::optional<FileRange>> in_file_;
  static constexpr size_t kLeftInFile = 4096; // bytes of raw data from which a tensor stays in the file
  std::unordered_map<std::string, Value> values_;
  std::unordered_map<std::string, Type> declared_; // the static types the model declares for its values
  std::set<std::string> used_names_;
  std::unordered_map<std::string, int> next_suffix_; // the next _K to try for a base name
  std::vector<std::pair<std::string, std::string>> renamed_; // gradc, ONNX
  std::vector<ExprPtr> input_params_, weight_params_;
  ExprPtr seed_;        // the random seed, once an operator draws random numbers
  int64_t streams_ = 0; // the random streams given out
  std::vector<ImportedWeight> weights_;
  std::vector<Binding> body_;

  /// A fresh name for an ONNX name, recorded where it differs.
  std::string fresh_name(const std::string &onnx_name) {
    std::string name = fresh_internal(sanitize(onnx_name));
    if (name != onnx_name)
      renamed_.emplace_back(name, onnx_name);
    return name;
  }
  bool fix_inputs(const OnnxImportOptions &options);
  void walk();
  void convert(onnx::NodeProto &node, size_t index);
  bool constant_node(onnx::NodeProto &node, const std::function<void(const std::string &)> &fail);
  void name_outputs(const onnx::NodeProto &node, size_t first, Mapped &m);
  bool check_outputs(const std::vector<ExprPtr> &results);
  std::optional<OnnxImport> convert_model(const OnnxImportOptions &options);
  std::string describe(const onnx::NodeProto &node, size_t index) const {
    return "node " + std::to_string(index) + (node.name().empty() ? "" : " '" + printable(node.name()) + "'") +
           " (" + printable(node.op_type()) + ")";
  }
};

/// A value made the first time it is read as a tensor: a weight or a
/// constant of several values becomes a parameter (its bytes move into the
/// weight), a constant of one value repeated a literal (reshaped or
/// broadcast to its shape).
ExprPtr Importer::expr_of(const std::string &name) {
  Value &v = values_.at(name);
  if (v.expr)
    return v.expr;
  const ConstValue *c = v.constant ? &*v.constant : nullptr;
  if (c && c->size() > 0 && !v.weight && c->uniform()) {
    ExprPtr lit = c->is_float() ? make_constant(c->number(0), c->dtype()) : make_int_constant(c->exact(0), c->dtype());
    if (!c->shape().empty()) {
      Builder b(body_);
      b.set_hint(fresh_internal(sanitize(name)));
      lit = c->size() == 1 ? b.reshape(lit, c->shape()) : b.broadcast_to(lit, c->shape());
    }
    return v.expr = lit;
  }
  std::string pname = fresh_name(name);
  v.expr = make_var(pname, v.type, {}, v.type);
  weight_params_.push_back(v.expr);
  weights_.push_back({pname, v.type.dtype, v.type.shape, v.weight ? std::move(v.raw.data) : c->bytes()});
  v.raw.data = SharedBytes();
  return v.expr;
}

class Ctx final : public NodeCtx {
public:
  Ctx(Importer &imp, const onnx::NodeProto &node, std::vector<Value *> in, size_t outputs)
      : imp_(imp), node_(node), in_(std::move(in)), outputs_(outputs),
        builder_(imp.body(), Span{}, [this](Span, const std::string &message) { type_errors.push_back(message); }) {
    builder_.set_hint(imp.fresh_internal(sanitize(node.output_size() ? node.output(0) : node.op_type()) + "_t"));
  }
  const onnx::NodeProto &node() const override { return node_; }
  int64_t opset() const override { return imp_.opset(); }
  size_t num_inputs() const override { return in_.size(); }
  bool has_input(size_t i) const override { return i < in_.size() && in_[i]; }
  ExprPtr input(size_t i) override {
    if (!has_input(i)) {
      unsupported("input " + std::to_string(i + 1) + " is missing");
      return make_constant(0, DType::Float32);
    }
    return imp_.expr_of(node_.input(int(i)));
  }
  const Type &input_type(size_t i) const override {
    static const Type none = Type::tensor({}, DType::Float32);
    return has_input(i) ? in_[i]->type : none;
  }
  const ConstValue *constant(size_t i) const override {
    return has_input(i) && in_[i]->constant ? &*in_[i]->constant : nullptr;
  }
  size_t num_outputs() const override { return outputs_; }
  bool wants_output(size_t i) const override { return i < outputs_ && !node_.output(int(i)).empty(); }
  std::optional<Type> declared_output(size_t i) const override {
    return wants_output(i) ? imp_.declared(node_.output(int(i))) : std::nullopt;
  }
  bool has_attr(const std::string &name) const override { return find_attr(node_, name) != nullptr; }
  int64_t attr_int(const std::string &name, int64_t fallback) const override {
    const onnx::AttributeProto *a = find_attr(node_, name);
    return a ? a->i() : fallback;
  }
  double attr_float(const std::string &name, double fallback) const override {
    const onnx::AttributeProto *a = find_attr(node_, name);
    return a ? a->f() : fallback;
  }
  std::string attr_string(const std::string &name, const std::string &fallback) const override {
    const onnx::AttributeProto *a = find_attr(node_, name);
    return a ? a->s() : fallback;
  }
  std::vector<int64_t> attr_ints(const std::string &name, std::vector<int64_t> fallback) const override {
    const onnx::AttributeProto *a = find_attr(node_, name);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : fallback;
  }
  std::optional<ConstValue> attr_tensor(const std::string &name) const override {
    const onnx::AttributeProto *a = find_attr(node_, name);
    if (!a || !a->has_t())
      return std::nullopt;
    Decoded d = decode_copy(a->t());
    if (!d.error.empty() || num_elements(d.shape) > kMaxFoldedElements)
      return std::nullopt;
    return ConstValue::of(d);
  }
  Builder &b() override { return builder_; }
  ExprPtr seed() override { return imp_.seed(); }
  bool keeps_state() const override { return imp_.keeps_state(); }
  void update_in_place(const ExprPtr &weight, const ExprPtr &value) override { imp_.update_in_place(weight, value); }
  int64_t next_stream() override { return imp_.next_stream(); }
  ExprPtr literal(double v, DType dt) override {
    ConstValue c = scalar_of(v, dt);
    return c.is_float() ? make_constant(c.number(0), dt) : make_int_constant(c.exact(0), dt);
  }
  void unsupported(const std::string &what) override { problems.push_back(what); }
  std::vector<std::string> problems;
  std::vector<std::string> type_errors; // what gradc's relations say of the calls built

private:
  Importer &imp_;
  const onnx::NodeProto &node_;
  std::vector<Value *> in_;
  size_t outputs_;
  Builder builder_;
};

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

const OpEntry *find_entry(const std::string &op_type) {
  for (const OpEntry &e : op_table())
    if (op_type == e.op_type)
      return &e;
  return nullptr;
}

bool is_folded(const std::string &op_type) {
  const std::vector<std::string> &f = folded_ops();
  return std::find(f.begin(), f.end(), op_type) != f.end();
}

/// Why the table cannot map `op` at `opset`, or nothing. ONNX versions each
/// operator on its own: an opset selects, per operator, the latest version
/// defined at or before it. The table maps the versions in effect at opsets
/// kMinOpset to kMaxOpset, so an older opset's node is mapped exactly when its
/// version is one of those (an opset-8 Add is Add-7, as at opset 11; an
/// opset-6 Add, with legacy broadcasting, is Add-6 and refused).
std::optional<std::string> definition_problem(const std::string &op, int64_t opset) {
  if (opset >= kMinOpset)
    return std::nullopt;
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(op, int(opset), "");
  if (!schema)
    return "ONNX opset " + std::to_string(opset) + " does not define " + op;
  std::set<int> mapped;
  for (int64_t v = kMinOpset; v <= kMaxOpset; ++v)
    if (const onnx::OpSchema *s = onnx::OpSchemaRegistry::Schema(op, int(v), ""))
      mapped.insert(s->since_version());
  if (mapped.count(schema->since_version()))
    return std::nullopt;
  std::string versions;
  for (int v : mapped)
    versions += (versions.empty() ? "" : ", ") + std::to_string(v);
  return "not supported: ONNX opset " + std::to_string(opset) + " defines " + op + " as its version " +
         std::to_string(schema->since_version()) + ", which gradc does not map (it maps " + op + "'s version" +
         (mapped.size() == 1 ? " " : "s ") + versions + ", those of opsets " + std::to_string(kMinOpset) + " to " +
         std::to_string(kMaxOpset) + ")";
}

/// A Constant node's value; false after `fail`.
bool Importer::constant_node(onnx::NodeProto &node, const std::function<void(const std::string &)> &fail) {
  for (onnx::AttributeProto &a : *node.mutable_attribute()) {
    Value v;
    std::optional<ConstValue> c;
    if (a.name() == "value") {
      Decoded d = decode(*a.mutable_t());
      if (!d.error.empty()) {
        fail("its value cannot be read: " + d.error);
        return false;
      }
      v.type = Type::tensor(d.shape, d.dtype);
      if (num_elements(d.shape) > kMaxFoldedElements) { // kept as bytes, as a weight is
        v.weight = true;
        v.raw = std::move(d);
      } else {
        c = ConstValue::of(d);
      }
    } else if (a.name() == "value_float" || a.name() == "value_floats") {
      bool one = a.name() == "value_float";
      c = ConstValue(DType::Float32, one ? Shape{} : Shape{int64_t(a.floats_size())});
      if (one)
        c->push_number(a.f());
      for (float f : a.floats())
        c->push_number(f);
    } else if (a.name() == "value_int" || a.name() == "value_ints") {
      bool one = a.name() == "value_int";
      c = ConstValue(DType::Int64, one ? Shape{} : Shape{int64_t(a.ints_size())});
      if (one)
        c->push_int(a.i());
      for (int64_t i : a.ints())
        c->push_int(i);
    } else {
      fail("attribute '" + printable(a.name()) + "' is not supported");
      return false;
    }
    if (c)
      v.type = Type::tensor(c->shape(), c->dtype());
    v.constant = std::move(c);
    values_[node.output(0)] = std::move(v);
    return true;
  }
  fail("it has no value");
  return false;
}

/// Names each output the mapping bound in this node's bindings (from
/// `first` on) after its ONNX name, where nothing after it reads it yet.
void Importer::name_outputs(const onnx::NodeProto &node, size_t first, Mapped &m) {
  for (size_t i = 0; i < m.size() && i < size_t(node.output_size()); ++i) {
    if (!m[i] || m[i]->kind != ExprKind::Var || node.output(int(i)).empty())
      continue;
    size_t at = body_.size();
    for (size_t k = first; k < body_.size(); ++k)
      if (body_[k].var == m[i])
        at = k;
    if (at == body_.size())
      continue; // not bound here: a graph input or another node's value
    bool read = false;
    for (size_t k = at + 1; k < body_.size() && !read; ++k)
      for (const ExprPtr &arg : body_[k].value->args)
        read = read || arg == m[i];
    for (size_t j = 0; j < m.size(); ++j)
      read = read || (j != i && m[j] == m[i]);
    if (read)
      continue;
    ExprPtr named = make_var(fresh_name(node.output(int(i))), {}, {}, m[i]->type);
    body_[at].var = named;
    for (auto &update : state_updates_) // a running statistic that is also the node's output
      if (update.second == m[i])
        update.second = named;
    m[i] = named;
  }
}

void Importer::convert(onnx::NodeProto &node, size_t index) {
  std::string where = describe(node, index);
  auto unknown = [&](const std::string &out) { values_[out] = Value{}; }; // Unknown: its readers are skipped
  auto fail = [&](const std::string &msg) {
    error(where + ": " + msg);
    for (const std::string &out : node.output())
      unknown(out);
  };
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return fail("operators of domain '" + printable(node.domain()) + "' are not supported");
  const std::string &op = node.op_type();
  const OpEntry *entry = find_entry(op);
  bool mapped = entry || op == "Constant" || is_folded(op);
  if (mapped)
    if (std::optional<std::string> problem = definition_problem(op, opset_))
      return fail(*problem);
  std::vector<Value *> in;
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
    constant_node(node, fail);
    return;
  }
  // Folded where every input is a constant; a floating-point weight never
  // is one (it is a parameter, and may be trained).
  std::vector<FoldInput> fold_in;
  for (const Value *v : in) {
    bool trainable = v && v->weight && dtype_info(v->type.dtype).is_float;
    fold_in.push_back(v ? FoldInput{&v->type, v->constant && !trainable ? &*v->constant : nullptr} : FoldInput{});
  }
  if (std::optional<ConstValue> c = fold(node, fold_in, opset())) {
    Value v;
    v.type = Type::tensor(c->shape(), c->dtype());
    v.constant = std::move(c);
    values_[node.output(0)] = std::move(v);
    return;
  }
  if (!entry) {
    std::string need = op == "Shape" || op == "Size" ? "an input of known shape" : "constant inputs";
    return fail("not supported: " + printable(op) + " is computed only on " + need +
                " (gradc folds it; it has no operator)");
  }
  // Trailing optional outputs with no name are not outputs.
  size_t outputs = size_t(node.output_size());
  while (outputs > 0 && node.output(int(outputs) - 1).empty())
    --outputs;
  size_t first = body_.size();
  Ctx ctx(*this, node, in, outputs);
  Mapped m;
  try {
    m = entry->map(ctx);
  } catch (const std::exception &e) {
    ctx.unsupported(e.what());
  }
  for (size_t i = 0; ctx.problems.empty() && ctx.type_errors.empty() && i < outputs; ++i)
    if (ctx.wants_output(i) && (i >= m.size() || !m[i] || m[i]->type.kind != Type::Tensor))
      ctx.unsupported(m.empty() ? "this form of the operator" : "output " + std::to_string(i + 1));
  auto joined = [](const std::vector<std::string> &parts) {
    std::string out;
    for (const std::string &p : parts)
      out += (out.empty() ? "" : "; ") + p;
    return out;
  };
  if (!ctx.problems.empty() || !ctx.type_errors.empty()) {
    body_.resize(first); // what the mapping built before it stopped
    if (!ctx.problems.empty())
      return fail("not supported: " + joined(ctx.problems));
    return fail("its operands do not type by gradc's rules: " + joined(ctx.type_errors) +
                (input_shapes_given_ ? " (the graph's input shapes are those --input-shape gives)" : ""));
  }
  name_outputs(node, first, m);
  bool convention = (op == "MaxPool" || op == "AveragePool") && ctx.attr_int("ceil_mode", 0) == 1;
  for (const Value *v : in)
    convention = convention || (v && v->pool_convention);
  for (size_t i = 0; i < outputs; ++i) {
    if (!ctx.wants_output(i))
      continue;
    Value v;
    v.type = m[i]->type;
    v.expr = m[i];
    v.pool_convention = convention;
    values_[node.output(int(i))] = std::move(v);
  }
}

/// Converts the graph: values, parameters, weights and body.
void Importer::walk() {
  onnx::GraphProto &g = *model_.mutable_graph();
  for (const auto *infos : {&g.value_info(), &g.output()})
    for (const onnx::ValueInfoProto &vi : *infos)
      if (std::optional<Type> t = declared_type(vi.type()).type)
        declared_[vi.name()] = *t;
  // Initializers: constants (weights), parameters when read as tensors.
  for (int i = 0; i < g.initializer_size(); ++i) {
    onnx::TensorProto &t = *g.mutable_initializer(i);
    std::string name = t.name();
    std::optional<SharedBytes> mapped;
    if (size_t(i) < in_file_.size() && in_file_[size_t(i)])
      mapped = SharedBytes(mapping_, static_cast<const char *>(mapping_.get()) + in_file_[size_t(i)]->offset,
                           in_file_[size_t(i)]->size);
    Decoded d = decode(t, mapped ? &*mapped : nullptr);
    if (!d.error.empty()) {
      error("initializer '" + printable(name) + "': " + d.error);
      values_[name] = Value{};
      continue;
    }
    Value v;
    v.type = Type::tensor(d.shape, d.dtype);
    v.weight = true;
    if (num_elements(d.shape) <= kMaxFoldedElements)
      v.constant = ConstValue::of(d);
    v.raw = std::move(d);
    values_[name] = std::move(v);
  }
  // Graph inputs that are not initializers: the parameters, first.
  for (const onnx::ValueInfoProto &in : g.input()) {
    if (values_.count(in.name()))
      continue; // an initializer listed as an input too (older exporters)
    DeclaredType t = declared_type(in.type());
    if (!t.type) {
      error("input '" + printable(in.name()) + "' " + t.problem);
      values_[in.name()] = Value{};
      continue;
    }
    Value v;
    v.type = *t.type;
    v.expr = make_var(fresh_name(in.name()), v.type, {}, v.type);
    input_params_.push_back(v.expr);
    values_[in.name()] = std::move(v);
  }
  for (int i = 0; i < g.node_size(); ++i)
    convert(*g.mutable_node(i), size_t(i));
}

/// Compares each result with the graph output's declared type: its dtype,
/// and each dimension it declares. A shape that differs only through a
/// ceil_mode pool (PyTorch's extent, where ONNX 1.12's inference that an
/// exporter declares counts one more window) is a warning; any other
/// difference an error naming the output.
bool Importer::check_outputs(const std::vector<ExprPtr> &results) {
  const onnx::GraphProto &g = model_.graph();
  bool ok = true;
  for (int i = 0; i < g.output_size(); ++i) {
    const onnx::ValueInfoProto &out = g.output(i);
    const Type &got = results.at(size_t(i))->type;
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
                       ", the import computes " + dtype_name(got.dtype) + " " + shape_str(got.shape);
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

std::optional<OnnxImport> Importer::run(std::string bytes, const OnnxImportOptions &options) {
  if (bytes.empty() || bytes.size() > size_t(INT_MAX) || !model_.ParseFromString(bytes)) {
    // protobuf refuses a message nested over 100 deep: said so where the
    // file reads with a deeper limit.
    onnx::ModelProto probe;
    bool nested = false;
    if (!bytes.empty() && bytes.size() <= size_t(INT_MAX)) {
      google::protobuf::io::CodedInputStream deep(reinterpret_cast<const uint8_t *>(bytes.data()), int(bytes.size()));
      deep.SetRecursionLimit(1000);
      nested = probe.ParseFromCodedStream(&deep) && deep.ConsumedEntireMessage();
    }
    error(std::string("not an ONNX model: the file does not parse as an ONNX ModelProto (protobuf)") +
          (nested ? ": it nests messages (subgraphs) more than 100 deep, protobuf's limit" : ""));
    return std::nullopt;
  }
  bytes = std::string(); // the message holds the weights now
  return convert_model(options);
}

/// Maps the model file into memory and parses it without its large
/// weights (strip_large_tensors): they stay in the mapping, which the
/// weights then refer to, so that protobuf copies none and a compile that
/// does not read them never touches their pages. A file that cannot be
/// mapped or does not parse is read whole for run()'s diagnostics.
std::optional<OnnxImport> Importer::run_file(const OnnxImportOptions &options) {
  int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error(std::string("cannot read the file: ") + std::strerror(errno));
    return std::nullopt;
  }
  struct stat st;
  bool parsed = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    size_t size = size_t(st.st_size);
    void *p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p != MAP_FAILED) {
      mapping_ = std::shared_ptr<const void>(p, [size](const void *q) { munmap(const_cast<void *>(q), size); });
      std::string_view file(static_cast<const char *>(p), size);
      std::optional<std::string> compact = strip_large_tensors(file, kLeftInFile, in_file_);
      parsed = compact && compact->size() <= size_t(INT_MAX) && model_.ParseFromString(*compact);
    }
  }
  if (!parsed) {
    model_.Clear();
    in_file_.clear();
    mapping_.reset();
    std::string bytes;
    char chunk[1 << 16];
    ssize_t n;
    if (lseek(fd, 0, SEEK_SET) == 0)
      while ((n = read(fd, chunk, sizeof chunk)) > 0 && bytes.size() <= size_t(INT_MAX))
        bytes.append(chunk, size_t(n));
    close(fd);
    return run(std::move(bytes), options);
  }
  close(fd);
  return convert_model(options);
}

std::optional<OnnxImport> Importer::convert_model(const OnnxImportOptions &options) {
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
  if (any_opset && opset_ > kMaxOpset) {
    error("ONNX opset " + std::to_string(opset_) + " is not supported: gradc maps opsets up to " +
          std::to_string(kMaxOpset) + " (export the model at " + std::to_string(kMinOpset) + " to " +
          std::to_string(kMaxOpset) + ")");
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
  input_shapes_given_ = !options.input_shapes.empty();
  state_in_place_ = options.state_in_place;
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
  std::vector<ExprPtr> results;
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
  if (!check_outputs(results))
    return std::nullopt;
  auto fn = std::make_shared<Function>();
  fn->name = "main";
  fn->params = input_params_;
  if (seed_)
    fn->params.push_back(seed_);
  fn->params.insert(fn->params.end(), weight_params_.begin(), weight_params_.end());
  // The state the model updates itself, after its outputs, each written into its weight.
  if (!state_updates_.empty()) {
    fn->attrs.inplace.assign(results.size(), -1);
    for (const auto &[weight, value] : state_updates_) {
      results.push_back(value);
      fn->attrs.inplace.push_back(int64_t(std::find(fn->params.begin(), fn->params.end(), weight) - fn->params.begin()));
    }
  }
  fn->body.bindings = std::move(body_);
  fn->body.result = results.size() == 1 ? results[0] : make_tuple(results);
  Module module;
  module.functions.push_back(fn);
  PrintOptions print;
  print.omit_default_attrs = true;
  std::string printed = print_module(module, print);
  std::ostringstream text;
  size_t header = printed.find('\n') + 1; // the version line
  text << printed.substr(0, header);
  text << "// Imported from " << printable(path_) << " by gradc import (ONNX opset " << opset_;
  if (!model_.producer_name().empty())
    text << ", written by " << printable(model_.producer_name()) << " " << printable(model_.producer_version());
  text << ").\n";
  if (!renamed_.empty()) {
    text << "// Names (gradc <- ONNX):\n";
    for (const auto &[relay, onnx_name] : renamed_)
      text << "//   %" << relay << " <- \"" << printable(onnx_name) << "\"\n";
  }
  text << printed.substr(header);
  return OnnxImport{text.str(), std::move(weights_)};
}

} // namespace

std::optional<OnnxImport> import_onnx(const std::string &path, std::string bytes, const OnnxImportOptions &options,
                                      std::ostream &err) {
  Importer importer(path, err);
  try {
    return importer.run(std::move(bytes), options);
  } catch (const std::bad_alloc &) {
    importer.error("the model needs more memory than this machine gives gradc");
  } catch (const std::exception &e) {
    importer.error(std::string("the model cannot be read: ") + e.what());
  }
  return std::nullopt;
}

std::optional<OnnxImport> import_onnx_file(const std::string &path, const OnnxImportOptions &options,
                                           std::ostream &err) {
  Importer importer(path, err);
  try {
    return importer.run_file(options);
  } catch (const std::bad_alloc &) {
    importer.error("the model needs more memory than this machine gives gradc");
  } catch (const std::exception &e) {
    importer.error(std::string("the model cannot be read: ") + e.what());
  }
  return std::nullopt;
}

bool looks_like_onnx(const std::string &path) {
  std::string ext = path.size() >= 5 ? path.substr(path.size() - 5) : "";
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return ext == ".onnx";
}

} // namespace gradc
