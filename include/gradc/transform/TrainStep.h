//===- TrainStep.h - a whole training step as one function (--train) ------===//
//
// `--train=sgd(...)|adam(...)|adamw(...)` adds `@FN_train_step`: the loss of
// @FN, its gradients for the trained parameters, and the optimizer's update
// of those parameters and of its state, each written in place (FunctionAttrs
// inplace_indices), so the caller keeps no gradient buffer and makes no
// second pass over the parameters. The update is PyTorch's (torch.optim.SGD,
// Adam, AdamW), hyper-parameters by PyTorch's names.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/ir/Expr.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gradc {

enum class OptimizerKind { SGD, Adam, AdamW };

/// An optimizer and its hyper-parameters, PyTorch's defaults where not given.
struct Optimizer {
  OptimizerKind kind = OptimizerKind::SGD;
  /// The learning rate written on the command line: a default the header and
  /// manifest state; the step takes the rate as a runtime input (`%lr`).
  std::optional<double> lr;
  double momentum = 0, dampening = 0, weight_decay = 0; // sgd (weight_decay: all)
  bool nesterov = false, maximize = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8; // adam, adamw
  bool amsgrad = false;

  const char *name() const;
  /// The hyper-parameters, every one (defaults included), as name and value
  /// text in the order PyTorch's constructor takes them: for the manifest.
  std::vector<std::pair<std::string, std::string>> hyper_parameters() const;
  /// `adam(lr=0.001, betas=(0.9, 0.999), ...)`: parse_optimizer reads it back.
  std::string str() const;
  /// Whether the step needs the step count (Adam's bias correction, or
  /// SGD's first step with dampening).
  bool needs_step() const;
};

/// Reads `sgd(lr=0.1, momentum=0.9)`, `adam(betas=(0.9, 0.99))`, `adamw` ...:
/// PyTorch's names and bounds (a negative rate, betas outside [0, 1),
/// Nesterov without momentum or with dampening are refused, as torch.optim
/// refuses them). nullopt and `*error` set on any problem.
std::optional<Optimizer> parse_optimizer(const std::string &text, std::string *error);

/// The parameters --train updates when --wrt does not name them: every
/// floating-point parameter `fn` does not itself update in place (its
/// inplace_indices: running statistics are state, not weights), restricted
/// to `weights` when that is not empty (an imported model's initializers:
/// its graph inputs are data).
std::vector<std::string> default_trained_params(const Function &fn, const std::vector<std::string> &weights);

/// Builds `@FN_train_step` from `adjoint` (build_adjoint's `(result, (d_p...))`
/// for the parameters `trained`, in declared order).
///
/// Parameters: the adjoint's, then the optimizer state per trained
/// parameter in its order (`%P_momentum_buffer`; `%P_exp_avg`,
/// `%P_exp_avg_sq`, `%P_max_exp_avg_sq`; all zeros before the first step, as
/// torch.optim creates them), then `%step` (int64 scalar, steps taken so far)
/// where Optimizer::needs_step, then `%lr` (a scalar of the parameters'
/// dtype). A name already taken gets a numbered suffix. Result: `(result,
/// P1', ..., state', ..., step')`, every leaf after the first written in
/// place into its parameter; `result`'s own leaves keep the primal's
/// inplace_indices (a batch norm's running statistics). Role train_step,
/// `primal` the adjoint's, `optimizer` opt.str().
FunctionPtr build_train_step(const Function &adjoint, const std::vector<std::string> &trained, const Optimizer &opt,
                             const FunctionAttrs &primal_attrs);

} // namespace gradc
