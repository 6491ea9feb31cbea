//===- Pipeline.h - the compiler pipeline, stage by stage -----------------===//
#pragma once

#include "gradc/codegen/Codegen.h"
#include "gradc/driver/Artifacts.h"
#include "gradc/ir/Expr.h"
#include "gradc/loops/LoopIR.h"
#include "gradc/transform/AutoRemat.h"
#include "gradc/transform/TrainStep.h"
#include "gradc/frontend/Onnx.h"

#include <chrono>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace gradc {

/// none keeps everything; manual obeys checkpoint markers; auto chooses
/// under --memory-budget (transform/AutoRemat.h); sqrt is the √n-segments
/// baseline. auto and sqrt obey the markers too, then plan the rest.
enum class RematMode { None, Manual, Auto, Sqrt };

/// Debug builds, or GRADC_VERIFY_EACH=1 in the environment (how the tests run).
bool verify_each_by_default();

/// The stages `--dump-ir` can show, in pipeline order.
const std::vector<std::string> &dump_stage_names();

struct PipelineOptions {
  std::optional<std::string> grad_fn; // --grad[=FN], or the function --train trains
  bool adjoint = true;                // add @FN_adjoint (--grad given; --train alone adds the step only)
  std::optional<Optimizer> train;     // --train: add @FN_train_step
  std::vector<std::string> wrt;       // --wrt, without '%'
  /// An imported model's weights (its initializers): what --train updates
  /// without --wrt (a graph input is data). Empty for Relay text.
  std::vector<std::string> weights;
  RematMode remat = RematMode::Manual;
  int64_t memory_budget = -1;
  size_t remat_exhaustive = kRematExhaustiveCandidates; // auto: --remat-exhaustive
  OnnxImportOptions onnx;                                // --input-shape, for a .onnx model
  CodegenOptions codegen;
  std::set<std::string> dumps; // stages to dump
  std::string dump_dir;        // empty: stderr
  bool report = false;
  /// --report=FILE.svg or .html: where the memory picture goes (MemoryPicture.h).
  std::string report_picture;
  /// Also plan every function as if --remat=none (for --report and the manifest).
  bool want_unrematerialized_peak = false;
  /// Run the IR verifiers after every pass (--verify-each; the default in
  /// debug builds and where the environment sets GRADC_VERIFY_EACH=1).
  bool verify_each = verify_each_by_default();
};

/// Writes dumps to stderr or to numbered files `NN-stage.ext` in a directory.
class Dumper {
public:
  Dumper(const PipelineOptions &opts, std::ostream &err) : opts_(opts), err_(err) {}
  bool wants(const std::string &stage) const { return opts_.dumps.count(stage) > 0; }
  void dump(const std::string &stage, const std::string &text);
  /// The file `dump(stage, ...)` writes (`DIR/NN-stage.ext`), or "" when it
  /// writes to stderr.
  std::string path(const std::string &stage) const;

private:
  const PipelineOptions &opts_;
  std::ostream &err_;
};

struct StageTime {
  std::string stage;
  double seconds;
};

struct CompiledModule {
  Module module;         // after the last tensor-level pass (fused)
  LoweredModule lowered; // loop IR with planned workspaces
  /// The same planned with --remat=none (PipelineOptions::want_unrematerialized_peak).
  LoweredModule unrematerialized;
  std::vector<FunctionReport> reports;
  std::vector<StageTime> times;
};

/// Parse to loop IR for the target that opts.codegen describes: the tensor
/// stages, lowering (with the target's strategies), the CPU schedule or GPU
/// binding, and memory planning. Throws CompileError after reporting user errors.
CompiledModule compile_to_loops(std::shared_ptr<const SourceFile> source, const PipelineOptions &opts, DiagEngine &diag,
                                Dumper &dumper);

/// The `--report` table.
void print_report(const CompiledModule &compiled, std::ostream &out);

} // namespace gradc
