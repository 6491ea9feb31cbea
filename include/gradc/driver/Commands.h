//===- Commands.h - the gradc subcommands ---------------------------------===//
//
// Each returns the process exit code of SPEC §1: 0 ok, 1 the model or an input
// is wrong, 2 the command line is wrong (the checks only a subcommand can
// make). Internal errors propagate as InternalError (exit 3, in main).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "gradc/driver/ArtifactKinds.h"
#include "gradc/driver/Pipeline.h"
#include "gradc/frontend/Onnx.h"

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace gradc {

struct CompileCommand {
  std::string model;
  PipelineOptions pipeline;
  std::string output_base;       // -o; empty: model stem in the current directory
  std::vector<Artifact> emit;    // empty: the target's default
  std::vector<std::string> argv; // for the manifest
};

struct RunCommand {
  std::string model;
  PipelineOptions pipeline;
  std::string entry;                                       // empty: main, or FN_adjoint with --grad
  std::vector<std::pair<std::string, std::string>> inputs; // name -> .npy path
  std::string inputs_dir;                                  // --inputs-dir: DIR/NAME.npy for the others
  std::string output_dir;
  int threads = 0; // --threads: the pool's thread count (0: the online CPUs)
  /// --simulate (with --target=cuda): the GPU loop program run on this CPU,
  /// block by block, thread by thread (lower/Passes.h: simulate_gpu).
  bool simulate = false;
};

struct ImportCommand {
  std::string model;       // MODEL.onnx
  std::string output_base; // -o; empty: the model's stem in the current directory
  OnnxImportOptions onnx;  // --input-shape
};

/// gradc's version (project() in CMakeLists.txt): `--version` and the manifest.
const char *gradc_version();

int compile_command(const CompileCommand &cmd, std::ostream &out, std::ostream &err);
int run_command(const RunCommand &cmd, std::ostream &out, std::ostream &err);
int check_command(const std::string &model, const OnnxImportOptions &onnx, std::ostream &out, std::ostream &err);
/// gradc import: OUT.relay and OUT.weights/NAME.npy (SPEC §1).
int import_command(const ImportCommand &cmd, std::ostream &out, std::ostream &err);
int ops_command(const std::string &name, bool json, std::ostream &out, std::ostream &err);

} // namespace gradc
