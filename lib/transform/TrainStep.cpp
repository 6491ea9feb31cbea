//===- TrainStep.cpp - the optimizer's update after the adjoint -----------===//
//
// The update is written on the adjoint's gradients in the order torch.optim's
// single-tensor loops apply it, so the step is IR like any other: a plain SGD
// update is elementwise operators, which fusion puts into the kernel that
// finishes the gradient; an update with state is one optim.sgd_momentum or
// optim.adam call per parameter (lib/op/optim.cpp), one kernel writing the
// state and the parameter; lowering writes every result in place.
//
//===----------------------------------------------------------------------===//
#include "gradc/transform/TrainStep.h"

#include "gradc/op/Builder.h"
#include "gradc/op/attrs/optim.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

namespace gradc {

const char *Optimizer::name() const {
  switch (kind) {
  case OptimizerKind::SGD:
    return "sgd";
  case OptimizerKind::Adam:
    return "adam";
  case OptimizerKind::AdamW:
    return "adamw";
  }
  return "?";
}

namespace {

/// Shortest text that reads back as the same double.
std::string number_text(double v) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::ostringstream os;
    os.precision(precision);
    os << v;
    if (std::strtod(os.str().c_str(), nullptr) == v)
      return os.str();
  }
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

const char *bool_text(bool b) { return b ? "true" : "false"; }

} // namespace

std::vector<std::pair<std::string, std::string>> Optimizer::hyper_parameters() const {
  std::vector<std::pair<std::string, std::string>> out;
  if (lr)
    out.push_back({"lr", number_text(*lr)});
  if (kind == OptimizerKind::SGD) {
    out.push_back({"momentum", number_text(momentum)});
    out.push_back({"dampening", number_text(dampening)});
    out.push_back({"weight_decay", number_text(weight_decay)});
    out.push_back({"nesterov", bool_text(nesterov)});
  } else {
    out.push_back({"betas", "(" + number_text(beta1) + ", " + number_text(beta2) + ")"});
    out.push_back({"eps", number_text(eps)});
    out.push_back({"weight_decay", number_text(weight_decay)});
    out.push_back({"amsgrad", bool_text(amsgrad)});
  }
  out.push_back({"maximize", bool_text(maximize)});
  return out;
}

std::string Optimizer::str() const {
  std::string s = std::string(name()) + "(";
  bool first = true;
  for (const auto &[k, v] : hyper_parameters()) {
    s += (first ? "" : ", ") + k + "=" + v;
    first = false;
  }
  return s + ")";
}

bool Optimizer::needs_step() const {
  return kind != OptimizerKind::SGD || (momentum != 0 && dampening != 0);
}

namespace {

/// A small reader for `name(key=value, ...)`; values are numbers, booleans
/// or a parenthesised pair of numbers.
class OptimizerReader {
public:
  explicit OptimizerReader(const std::string &text) : s_(text) {}

  std::optional<Optimizer> read(std::string *error) {
    std::string name = word();
    Optimizer opt;
    if (name == "sgd")
      opt.kind = OptimizerKind::SGD;
    else if (name == "adam")
      opt.kind = OptimizerKind::Adam;
    else if (name == "adamw") {
      opt.kind = OptimizerKind::AdamW;
      opt.weight_decay = 1e-2; // torch.optim.AdamW's default
    } else
      return fail(error, "unknown optimizer '" + name + "' (valid: sgd, adam, adamw)");
    if (opt.kind != OptimizerKind::SGD)
      opt.lr = 1e-3; // torch.optim.Adam's and AdamW's default
    std::unordered_set<std::string> given;
    if (eat('(')) {
      while (!eat(')')) {
        std::string key = word();
        if (key.empty() || !eat('='))
          return fail(error, "expected key=value at " + rest());
        if (!given.insert(key).second)
          return fail(error, "'" + key + "' is given twice");
        if (!value(opt, key, error))
          return std::nullopt;
        if (!eat(',') && !(peek() == ')'))
          return fail(error, "expected ',' or ')' after " + key + "'s value at " + rest());
      }
    }
    skip();
    if (pos_ != s_.size())
      return fail(error, "unexpected " + rest() + " after the optimizer");
    return check(opt, error);
  }

private:
  /// The text not read yet, for messages.
  std::string rest() const { return pos_ < s_.size() ? "'" + s_.substr(pos_) + "'" : "the end"; }
  std::optional<Optimizer> fail(std::string *error, const std::string &why) {
    *error = why;
    return std::nullopt;
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace((unsigned char)s_[pos_]))
      ++pos_;
  }
  char peek() {
    skip();
    return pos_ < s_.size() ? s_[pos_] : '\0';
  }
  bool eat(char c) {
    if (peek() != c)
      return false;
    ++pos_;
    return true;
  }
  std::string word() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum((unsigned char)s_[pos_]) || s_[pos_] == '_'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::optional<double> number() {
    skip();
    const char *begin = s_.c_str() + pos_;
    char *end = nullptr;
    double v = std::strtod(begin, &end);
    if (end == begin || !std::isfinite(v))
      return std::nullopt;
    pos_ += size_t(end - begin);
    return v;
  }
  std::optional<bool> boolean() {
    size_t at = pos_;
    std::string w = word();
    if (w == "true" || w == "True" || w == "1")
      return true;
    if (w == "false" || w == "False" || w == "0")
      return false;
    pos_ = at;
    return std::nullopt;
  }

  bool value(Optimizer &opt, const std::string &key, std::string *error) {
    bool sgd = opt.kind == OptimizerKind::SGD;
    auto bad = [&](const std::string &what) {
      *error = key + ": expected " + what + " at " + rest();
      return false;
    };
    auto real = [&](double &into) {
      std::optional<double> v = number();
      if (!v)
        return bad("a number");
      into = *v;
      return true;
    };
    auto flag = [&](bool &into) {
      std::optional<bool> v = boolean();
      if (!v)
        return bad("true or false");
      into = *v;
      return true;
    };
    if (key == "lr") {
      double v;
      if (!real(v))
        return false;
      opt.lr = v;
      return true;
    }
    if (key == "weight_decay")
      return real(opt.weight_decay);
    if (key == "maximize")
      return flag(opt.maximize);
    if (sgd && key == "momentum")
      return real(opt.momentum);
    if (sgd && key == "dampening")
      return real(opt.dampening);
    if (sgd && key == "nesterov")
      return flag(opt.nesterov);
    if (!sgd && key == "betas") {
      if (!eat('('))
        return bad("a pair (beta1, beta2)");
      if (!real(opt.beta1))
        return false;
      if (!eat(','))
        return bad("',' between the betas");
      if (!real(opt.beta2))
        return false;
      return eat(')') || bad("')' after the betas");
    }
    if (!sgd && key == "beta1")
      return real(opt.beta1);
    if (!sgd && key == "beta2")
      return real(opt.beta2);
    if (!sgd && key == "eps")
      return real(opt.eps);
    if (!sgd && key == "amsgrad")
      return flag(opt.amsgrad);
    *error = std::string(opt.name()) + " has no hyper-parameter '" + key + "' (it takes " +
             (sgd ? "lr, momentum, dampening, weight_decay, nesterov, maximize"
                  : "lr, betas (or beta1, beta2), eps, weight_decay, amsgrad, maximize") +
             ")";
    return false;
  }

  /// torch.optim's own checks.
  std::optional<Optimizer> check(const Optimizer &opt, std::string *error) {
    if (opt.lr && *opt.lr < 0)
      return fail(error, "invalid learning rate: " + number_text(*opt.lr) + " (at least 0)");
    if (opt.momentum < 0)
      return fail(error, "invalid momentum: " + number_text(opt.momentum) + " (at least 0)");
    if (opt.weight_decay < 0)
      return fail(error, "invalid weight_decay: " + number_text(opt.weight_decay) + " (at least 0)");
    if (opt.eps < 0)
      return fail(error, "invalid eps: " + number_text(opt.eps) + " (at least 0)");
    for (double beta : {opt.beta1, opt.beta2})
      if (!(beta >= 0 && beta < 1))
        return fail(error, "invalid beta: " + number_text(beta) + " (in [0, 1))");
    if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0))
      return fail(error, "nesterov momentum needs a momentum above 0 and zero dampening");
    return opt;
  }

  const std::string &s_;
  size_t pos_ = 0;
};

} // namespace

std::optional<Optimizer> parse_optimizer(const std::string &text, std::string *error) {
  return OptimizerReader(text).read(error);
}

std::vector<std::string> default_trained_params(const Function &fn, const std::vector<std::string> &weights) {
  std::unordered_set<std::string> weight_names(weights.begin(), weights.end());
  std::vector<std::string> out;
  for (size_t i = 0; i < fn.params.size(); ++i) {
    const ExprPtr &p = fn.params[i];
    if (!p->type.is_tensor() || !is_float(p->type.dtype) || fn.attrs.updates(i))
      continue;
    if (weights.empty() || weight_names.count(p->name))
      out.push_back(p->name);
  }
  return out;
}

namespace {

/// Builds one parameter's update: its scalars (the rate in the parameter's
/// dtype, bias corrections, factors) with `scalars`, which the step runs
/// first, the rest with `b`, after the gradients.
class UpdateBuilder {
public:
  UpdateBuilder(Builder &scalars, Builder &b, const Optimizer &opt, ExprPtr lr, ExprPtr step_after)
      : s_(scalars), b_(b), opt_(opt), lr_(std::move(lr)), step_after_(std::move(step_after)) {}

  /// The new value of `p` given its gradient `g` and its state (in the
  /// order build_train_step declares it); the new state is appended to
  /// `new_state` in the same order.
  ExprPtr update(ExprPtr p, ExprPtr g, const std::vector<ExprPtr> &state, ExprPtr step_before,
                 std::vector<ExprPtr> &new_state) {
    DType dt = p->type.dtype;
    ExprPtr lr = lr_->type.dtype == dt ? lr_ : s_.cast(lr_, dt);
    if (opt_.maximize)
      g = b_.neg(g);
    if (opt_.kind == OptimizerKind::SGD)
      return sgd(p, g, state, step_before, lr, new_state);
    return adam(p, g, state, lr, new_state);
  }

private:
  ExprPtr c(double v, DType dt) { return b_.constant(v, dt); }

  /// torch.optim.SGD: d = g + wd p; with momentum one optim.sgd_momentum
  /// call (the buffer, then the parameter, in one kernel); else p - lr d.
  ExprPtr sgd(ExprPtr p, ExprPtr g, const std::vector<ExprPtr> &state, ExprPtr step_before, ExprPtr lr,
              std::vector<ExprPtr> &new_state) {
    DType dt = p->type.dtype;
    if (opt_.weight_decay != 0)
      g = b_.add(g, b_.mul(p, c(opt_.weight_decay, dt)));
    if (opt_.momentum == 0)
      return b_.sub(p, b_.mul(g, lr));
    // The buffer starts at zeros: momentum * 0 + d is d exactly on the first
    // step, except that with dampening the first step's factor is 1.
    ExprPtr factor = c(1 - opt_.dampening, dt);
    if (opt_.dampening != 0) {
      ExprPtr first = s_.call(ops::equal, {step_before, s_.constant(0, step_before->type.dtype)});
      factor = s_.call(ops::where, {first, c(1, dt), factor});
    }
    ExprPtr both = b_.call(ops::sgd_momentum, {p, g, state[0], lr, factor},
                           SgdMomentumAttrs{.momentum = opt_.momentum, .nesterov = opt_.nesterov});
    new_state.push_back(b_.get(both, 1));
    return b_.get(both, 0);
  }

  /// torch.optim.Adam / AdamW: one optim.adam call (the moments, then the
  /// parameter, in one kernel) with t counted from 1: step_size = lr / (1 -
  /// b1^t), bias2_sqrt = sqrt(1 - b2^t). Adam adds wd p to g; AdamW
  /// multiplies p by decay = 1 - lr wd first.
  ExprPtr adam(ExprPtr p, ExprPtr g, const std::vector<ExprPtr> &state, ExprPtr lr, std::vector<ExprPtr> &new_state) {
    DType dt = p->type.dtype;
    ExprPtr decay = c(1, dt);
    if (opt_.weight_decay != 0 && opt_.kind == OptimizerKind::AdamW)
      decay = s_.sub(c(1, dt), s_.mul(lr, c(opt_.weight_decay, dt)));
    else if (opt_.weight_decay != 0)
      g = b_.add(g, b_.mul(p, c(opt_.weight_decay, dt)));
    ExprPtr t = s_.cast(step_after_, dt);
    ExprPtr bias1 = s_.sub(c(1, dt), s_.call(ops::power, {c(opt_.beta1, dt), t}));
    ExprPtr bias2 = s_.sub(c(1, dt), s_.call(ops::power, {c(opt_.beta2, dt), t}));
    std::vector<ExprPtr> args{p, g, state[0], state[1], s_.div(lr, bias1), s_.call(ops::sqrt, {bias2}), decay};
    if (opt_.amsgrad)
      args.push_back(state[2]);
    ExprPtr all = b_.call(ops::adam, args, AdamAttrs{.beta1 = opt_.beta1, .beta2 = opt_.beta2, .eps = opt_.eps});
    for (int i = 1; i < (opt_.amsgrad ? 4 : 3); ++i) // the moments (and the maximum)
      new_state.push_back(b_.get(all, i));
    return b_.get(all, 0);
  }

  Builder &s_, &b_;
  const Optimizer &opt_;
  ExprPtr lr_, step_after_;
};

/// The optimizer state's names, after PyTorch's state keys.
std::vector<std::string> state_names(const Optimizer &opt) {
  if (opt.kind == OptimizerKind::SGD)
    return opt.momentum != 0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  if (opt.amsgrad)
    return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

/// Depth-first leaf count of a type.
size_t leaf_count(const Type &t) {
  if (!t.is_tuple())
    return 1;
  size_t n = 0;
  for (const Type &f : t.fields)
    n += leaf_count(f);
  return n;
}

} // namespace

FunctionPtr build_train_step(const Function &adjoint, const std::vector<std::string> &trained, const Optimizer &opt,
                             const FunctionAttrs &primal_attrs) {
  auto fn = std::make_shared<Function>(*clone_function(adjoint));
  fn->name = adjoint.attrs.primal + "_train_step";
  fn->ret_type = Type::unknown();
  fn->attrs = {};
  fn->attrs.role = FunctionRole::TrainStep;
  fn->attrs.primal = adjoint.attrs.primal;
  fn->attrs.optimizer = opt.str();

  std::unordered_set<std::string> taken;
  for (const ExprPtr &p : fn->params)
    taken.insert(p->name);
  auto fresh = [&](const std::string &base) {
    std::string name = base;
    for (int i = 1; taken.count(name); ++i)
      name = base + "_" + std::to_string(i);
    taken.insert(name);
    return name;
  };

  // The trained parameters in declared order (the adjoint's gradient order).
  std::vector<size_t> trained_index;
  for (size_t i = 0; i < fn->params.size(); ++i)
    for (const std::string &name : trained)
      if (fn->params[i]->name == name) {
        trained_index.push_back(i);
        break;
      }

  // New parameters: the state per trained parameter, the step count, the rate.
  const std::vector<std::string> kinds = state_names(opt);
  std::vector<std::vector<ExprPtr>> state(trained_index.size());
  for (size_t t = 0; t < trained_index.size(); ++t) {
    ExprPtr p = fn->params[trained_index[t]]; // a copy: the loop appends to fn->params
    for (const std::string &k : kinds) {
      state[t].push_back(make_var(fresh(p->name + "_" + k), p->type, fn->span, p->type));
      fn->params.push_back(state[t].back());
    }
  }
  ExprPtr step;
  if (opt.needs_step()) {
    step = make_var(fresh("step"), Type::tensor({}, DType::Int64), fn->span, Type::tensor({}, DType::Int64));
    fn->params.push_back(step);
  }
  DType rate_dtype = trained_index.empty() ? DType::Float32 : fn->params[trained_index[0]]->type.dtype;
  ExprPtr lr = make_var(fresh("lr"), Type::tensor({}, rate_dtype), fn->span, Type::tensor({}, rate_dtype));
  fn->params.push_back(lr);

  // The scalars every update reads (the step count, bias corrections) come
  // first, so each update can run as soon as its gradient is computed
  // (order_in_place_updates); the updates follow the adjoint's bindings.
  std::vector<Binding> &body = fn->body.bindings;
  std::vector<Binding> first;
  Builder b(body, fn->span), scalars(first, fn->span);
  ExprPtr adjoint_result = fn->body.result;
  ExprPtr result = b.get(adjoint_result, 0);
  ExprPtr grads = b.get(adjoint_result, 1);
  ExprPtr step_after;
  if (step)
    step_after = scalars.add(step, scalars.constant(1, DType::Int64));

  UpdateBuilder updates(scalars, b, opt, lr, step_after);
  std::vector<ExprPtr> fields{result}, new_params, new_state;
  std::vector<int64_t> inplace = primal_attrs.inplace;
  if (inplace.empty())
    inplace.assign(leaf_count(result->type), -1);
  for (size_t t = 0; t < trained_index.size(); ++t) {
    ExprPtr p = fn->params[trained_index[t]];
    b.set_hint(p->name + "_next");
    new_params.push_back(updates.update(p, b.get(grads, int(t)), state[t], step, new_state));
  }
  b.set_hint("t");
  for (size_t t = 0; t < trained_index.size(); ++t) {
    fields.push_back(new_params[t]);
    inplace.push_back(int64_t(trained_index[t]));
  }
  size_t param = adjoint.params.size();
  for (const ExprPtr &s : new_state) {
    fields.push_back(s);
    inplace.push_back(int64_t(param++));
  }
  if (step) {
    fields.push_back(step_after);
    inplace.push_back(int64_t(param++));
  }
  fn->body.result = b.tuple(fields);
  body.insert(body.begin(), first.begin(), first.end());
  fn->attrs.inplace = std::move(inplace);
  return fn;
}

} // namespace gradc
