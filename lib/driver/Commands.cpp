//===- Commands.cpp - compile, run, check, import and ops -----------------===//
//
// The subcommands around the pipeline: reading the model, code generation,
// writing each command's files as one set (FileSet.h) where they may go
// (OutputPaths.h), and running an entry point in-process.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Commands.h"
#include "gradc/frontend/Onnx.h"
#include "gradc/driver/MemoryPicture.h"
#include "gradc/driver/OpReference.h"
#include "gradc/driver/OutputPaths.h"
#include "gradc/loops/Verify.h"
#include "gradc/lower/Passes.h"
#include "gradc/text/Printer.h"
#include "gradc/op/Registry.h"
#include "gradc/text/Parser.h"
#include "gradc/transform/TypeInfer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

namespace gradc {

const char *gradc_version() { return GRADC_VERSION; }

namespace {

/// --report=FILE.svg / .html: the memory picture, as one file of the
/// command's set (none without it).
std::vector<OutputFile> report_picture(const CompiledModule &compiled, const PipelineOptions &opts) {
  if (opts.report_picture.empty())
    return {};
  bool html = opts.report_picture.size() > 5 && opts.report_picture.substr(opts.report_picture.size() - 5) == ".html";
  return {{opts.report_picture, memory_picture(compiled, html)}};
}

/// Whether `path` is a file that opens for reading; prints why not.
bool readable_file(const std::string &path, std::ifstream &in, std::ostream &err) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    print_error(err, "'" + path + "' is a directory, not a model file");
    return false;
  }
  in.open(path, std::ios::binary);
  if (!in) {
    int e = errno;
    print_error(err, "cannot read '" + path + "': " + std::strerror(e));
    return false;
  }
  return true;
}

/// Reads a file whole; nullopt (after printing an error) if it cannot.
std::optional<std::string> read_whole_file(const std::string &path, std::ostream &err) {
  std::ifstream in;
  if (!readable_file(path, in, err))
    return std::nullopt;
  // Spans are 32-bit offsets. The text is read in chunks into one string:
  // running out of memory is an error about the input (exit 1), never a
  // silently shortened text.
  const size_t max_size = (size_t(1) << 32) - 1;
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  std::string text;
  try {
    text.reserve(ec ? 0 : std::min<size_t>(size, max_size));
    char chunk[1 << 16];
    while (text.size() < max_size && (in.read(chunk, sizeof chunk) || in.gcount() > 0))
      text.append(chunk, size_t(in.gcount()));
  } catch (const std::bad_alloc &) {
    print_error(err, "out of memory reading '" + path + "'");
    return std::nullopt;
  }
  if (in.bad()) {
    int e = errno;
    print_error(err, "cannot read '" + path + "': " + std::strerror(e));
    return std::nullopt;
  }
  if (text.size() >= max_size) {
    print_error(err, "'" + path + "' is larger than 4 GiB");
    return std::nullopt;
  }
  return text;
}

/// A model as the pipeline reads it: Relay text, and the weights of an
/// imported ONNX model (frontend/Onnx.h).
struct ModelSource {
  std::shared_ptr<const SourceFile> source;
  std::vector<ImportedWeight> weights;
};

/// Reads a model file, Relay text or ONNX (by its extension); nullopt after
/// printing errors.
std::optional<ModelSource> read_model(const std::string &path, const OnnxImportOptions &onnx, std::ostream &err) {
  if (looks_like_onnx(path)) {
    std::ifstream in;
    if (!readable_file(path, in, err))
      return std::nullopt;
    std::optional<OnnxImport> imported = import_onnx_file(path, onnx, err);
    if (!imported)
      return std::nullopt;
    // Diagnostics about the imported text name it so.
    return ModelSource{std::make_shared<SourceFile>(path + " (imported)", std::move(imported->text)),
                       std::move(imported->weights)};
  }
  std::optional<std::string> bytes = read_whole_file(path, err);
  if (!bytes)
    return std::nullopt;
  return ModelSource{std::make_shared<SourceFile>(path, std::move(*bytes)), {}};
}

NpyArray npy_of(const ImportedWeight &w) { return NpyArray{w.dtype, w.shape, w.data.str()}; }

/// Parse, type-check, differentiate, lower; nullopt after printing errors.
std::optional<CompiledModule> front_to_loops(const std::string &model, const PipelineOptions &opts, std::ostream &err,
                                            std::vector<ImportedWeight> *weights = nullptr) {
  std::optional<ModelSource> read = read_model(model, opts.onnx, err);
  if (!read)
    return std::nullopt;
  // --train without --wrt updates an imported model's weights: the ONNX
  // model's initializers, or the arrays `gradc import` wrote beside its text.
  PipelineOptions local = opts;
  for (const ImportedWeight &w : read->weights)
    local.weights.push_back(w.name);
  std::error_code ec;
  std::filesystem::path beside = std::filesystem::path(model).replace_extension(".weights");
  if (opts.train && read->weights.empty() && std::filesystem::is_directory(beside, ec))
    for (const auto &entry : std::filesystem::directory_iterator(beside, ec))
      if (entry.path().extension() == ".npy")
        local.weights.push_back(entry.path().stem().string());
  if (weights)
    *weights = std::move(read->weights);
  std::shared_ptr<const SourceFile> source = read->source;
  DiagEngine diag(source, err);
  Dumper dumper(local, err);
  try {
    return compile_to_loops(source, local, diag, dumper);
  } catch (CompileError &) {
    return std::nullopt;
  }
}

std::string stem_of(const std::string &model) { return std::filesystem::path(model).stem().string(); }

/// A C identifier made from the output base name (the symbol prefix).
std::string symbol_prefix(const std::string &base) {
  std::string p = std::filesystem::path(base).filename().string();
  for (char &c : p)
    if (!isalnum((unsigned char)c) && c != '_')
      c = '_';
  if (p.empty() || isdigit((unsigned char)p[0]))
    p = "m_" + p;
  return p;
}

/// Prints the error and returns true if a dump file `opts` asks for is a
/// file the command reads (`--dump-dir=.` beside `01-parse.relay`, or a
/// dumped adjoint differentiated again into its own directory).
bool dumps_overwrite_reads(const PipelineOptions &opts, const std::vector<ReadFile> &reads, std::ostream &err) {
  Dumper dumper(opts, err);
  for (const std::string &stage : opts.dumps)
    if (std::string path = dumper.path(stage);
        !path.empty() && refuse_overwriting(path, false, reads, "choose another --dump-dir", err))
      return true;
  return false;
}

/// Prints the error and returns true if the --report picture is a file the
/// command reads (a model or an input array named like a picture).
bool picture_overwrites_reads(const PipelineOptions &opts, const std::vector<ReadFile> &reads, std::ostream &err) {
  return !opts.report_picture.empty() &&
         refuse_overwriting(opts.report_picture, false, reads, "choose another --report picture", err);
}

ManifestInfo manifest_info(const PipelineOptions &opts, const std::vector<std::string> &argv) {
  ManifestInfo info;
  info.tool_version = gradc_version();
  info.llvm_version = llvm_version();
  info.argv = argv;
  info.target = target_kind_name(opts.codegen.target);
  info.triple = opts.codegen.triple;
  info.cpu = opts.codegen.cpu;
  info.gpu_arch = opts.codegen.gpu_arch;
  info.gpu_tf32 = opts.codegen.gpu_tf32;
  info.opt_level = opts.codegen.opt_level;
  info.remat = opts.remat == RematMode::None   ? "none"
               : opts.remat == RematMode::Auto ? "auto"
               : opts.remat == RematMode::Sqrt ? "sqrt"
                                               : "manual";
  info.memory_budget = opts.memory_budget;
  return info;
}

} // namespace

int compile_command(const CompileCommand &cmd, std::ostream &out, std::ostream &err) {
  PipelineOptions opts = cmd.pipeline;
  bool cuda = opts.codegen.target == TargetKind::CUDA;
  // What --emit asks for, or the target's default; in table order.
  std::vector<const ArtifactKind *> emit;
  for (const ArtifactKind &a : artifact_kinds()) {
    bool asked = std::find(cmd.emit.begin(), cmd.emit.end(), a.kind) != cmd.emit.end();
    if (cmd.emit.empty() ? (cuda ? a.cuda_default : a.cpu_default) : asked)
      emit.push_back(&a);
  }
  auto wants = [&](Artifact kind) {
    return std::any_of(emit.begin(), emit.end(), [&](const ArtifactKind *a) { return a->kind == kind; });
  };
  for (const ArtifactKind *a : emit)
    if (a->cuda_only && !cuda) {
      print_error(err, std::string("--emit=") + a->name + " needs --target=cuda");
      return 2;
    }
  if (!cmd.output_base.empty() &&
      !check_output_base(cmd.output_base, "-o out/model writes out/model.o, out/model.h and out/model.json", err))
    return 2;
  std::string base = cmd.output_base.empty() ? stem_of(cmd.model) : cmd.output_base;
  if (!check_output_dir(base, err))
    return 1;
  // Never overwrite the model with an artifact (a model named m.h, -o m),
  // a dump or the picture.
  const std::vector<ReadFile> reads = {{"model", cmd.model}};
  for (const ArtifactKind *a : emit)
    if (refuse_overwriting(base + a->extension, false, reads, "choose another -o", err))
      return 1;
  if (dumps_overwrite_reads(opts, reads, err) || picture_overwrites_reads(opts, reads, err))
    return 1;
  opts.want_unrematerialized_peak = opts.report || wants(Artifact::Manifest);
  std::optional<CompiledModule> compiled = front_to_loops(cmd.model, opts, err);
  if (!compiled)
    return 1;
  CodegenOptions cg = opts.codegen;
  cg.prefix = symbol_prefix(base);

  CodegenRequest req;
  req.object = wants(Artifact::Obj);
  req.llvm_ir = wants(Artifact::Llvm) || cmd.pipeline.dumps.count("llvm");
  req.assembly = wants(Artifact::Asm) || cmd.pipeline.dumps.count("asm");
  req.ptx = cuda && (wants(Artifact::Ptx) || cmd.pipeline.dumps.count("ptx"));
  CodegenOutput code;
  auto start = std::chrono::steady_clock::now();
  try {
    code = generate_code(compiled->lowered, cg, req);
  } catch (CompileError &) {
    return 1;
  }
  if (code.times.empty()) // a target that does not time its steps
    code.times.push_back(
        {"codegen", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
  for (const auto &[step, seconds] : code.times)
    compiled->times.push_back({step, seconds});
  Dumper dumper(opts, err);
  dumper.dump("llvm", code.llvm_ir);
  dumper.dump("asm", code.assembly);
  dumper.dump("ptx", code.ptx);

  // Every artifact is produced in memory first (the header can still fail,
  // on names it cannot give), then the set, with the --report picture, is
  // written all or nothing: never a new object beside an old header, nor
  // new artifacts where the picture cannot be written.
  auto contents = [&](Artifact kind) -> std::string {
    switch (kind) {
    case Artifact::Obj:
      return std::move(code.object);
    case Artifact::Header:
      return emit_c_header(compiled->lowered, compiled->reports, cg.prefix, cg.target);
    case Artifact::Manifest:
      return build_manifest(compiled->lowered, compiled->reports, manifest_info(opts, cmd.argv), cg.prefix).dump(2) +
             "\n";
    case Artifact::Llvm:
      return std::move(code.llvm_ir);
    case Artifact::Asm:
      return std::move(code.assembly);
    case Artifact::Ptx:
      return std::move(code.ptx);
    }
    internal_error("compile", "an artifact kind with no contents");
  };
  try {
    std::vector<OutputFile> files = report_picture(*compiled, opts);
    for (const ArtifactKind *a : emit)
      files.push_back({base + a->extension, contents(a->kind)});
    write_files_atomic(files);
  } catch (FileError &e) {
    print_error(err, e.what());
    return 1;
  }
  if (opts.report)
    print_report(*compiled, err);
  (void)out;
  return 0;
}

namespace {

/// Element `i` of a packed array of T (no alignment assumed).
template <typename T> T element(const char *p, size_t i) {
  T v;
  memcpy(&v, p + sizeof(T) * i, sizeof(T));
  return v;
}

/// The value of an IEEE binary16 bit pattern, exactly (every half is a float):
/// normal numbers, subnormals (mantissa * 2^-24), signed zeros, infinities and
/// NaNs (sign and payload kept).
float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0) {
    float magnitude = std::ldexp(float(mantissa), -24); // zero or subnormal
    return sign ? -magnitude : magnitude;
  }
  uint32_t bits = exponent == 0x1f ? sign | 0x7f800000u | (mantissa << 13)            // inf, NaN
                                   : sign | ((exponent + 127 - 15) << 23) | (mantissa << 13); // normal
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::string format_values(const NpyArray &a, size_t max_values) {
  std::ostringstream os;
  os << std::setprecision(6);
  size_t n = std::min<size_t>(max_values, size_t(num_elements(a.shape)));
  const char *p = a.data.data();
  os << "[";
  for (size_t i = 0; i < n; ++i) {
    os << (i ? ", " : "");
    switch (a.dtype) {
    case DType::Float32:
      os << element<float>(p, i);
      break;
    case DType::Float64:
      os << element<double>(p, i);
      break;
    case DType::Int32:
      os << element<int32_t>(p, i);
      break;
    case DType::Int64:
      os << element<int64_t>(p, i);
      break;
    case DType::Bool:
      os << (p[i] ? "True" : "False");
      break;
    case DType::Float16:
      os << half_to_float(element<uint16_t>(p, i));
      break;
    }
  }
  if (size_t(num_elements(a.shape)) > n)
    os << ", ...";
  os << "]";
  return os.str();
}

/// What `run --output-dir` calls output `i`.
std::string output_file_name(size_t i) { return "output_" + std::to_string(i) + ".npy"; }

/// The index of a file name exactly as output_file_name writes it
/// (`output_12.npy`, not `output_012.npy` or `output_1.npy.bak`), or nullopt.
std::optional<uint64_t> output_index(const std::string &name) {
  const std::string head = "output_", tail = ".npy";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return std::nullopt;
  std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 19 || (digits.size() > 1 && digits[0] == '0'))
    return std::nullopt;
  uint64_t index = 0;
  for (char c : digits) {
    if (c < '0' || c > '9')
      return std::nullopt;
    index = index * 10 + uint64_t(c - '0');
  }
  return index;
}

/// The regular files in `dir` named like output K >= `count` of an earlier
/// run, except any of `keep` (the model and the inputs of this run).
std::vector<std::string> stale_outputs(const std::string &dir, size_t count, const std::vector<ReadFile> &keep) {
  std::vector<std::string> stale;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::optional<uint64_t> index = output_index(it->path().filename().string());
    std::error_code type_ec;
    if (!index || *index < count || !it->is_regular_file(type_ec) || it->is_symlink(type_ec))
      continue;
    std::string path = it->path().string();
    if (std::none_of(keep.begin(), keep.end(), [&](const ReadFile &k) { return same_file(path, k.path); }))
      stale.push_back(path);
  }
  std::sort(stale.begin(), stale.end());
  return stale;
}

constexpr int kGarbageByte = 0xFF;

struct AlignedFree {
  void operator()(void *p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, AlignedFree>;

/// A 64-byte aligned buffer filled with 0xFF bytes (kGarbageByte): an output
/// element or workspace byte that a kernel reads or returns unwritten shows as
/// a NaN (every float dtype) or -1, never as a plausible zero.
AlignedBuffer aligned_buffer(int64_t bytes) {
  size_t size = size_t((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
  void *p = std::aligned_alloc(64, size);
  if (!p)
    throw std::bad_alloc();
  std::memset(p, kGarbageByte, size);
  return AlignedBuffer(static_cast<char *>(p));
}

} // namespace

int run_command(const RunCommand &cmd, std::ostream &out, std::ostream &err) {
  PipelineOptions opts = cmd.pipeline;
  opts.want_unrematerialized_peak = opts.report;
  if (cmd.simulate && opts.codegen.target != TargetKind::CUDA) {
    print_error(err, "--simulate runs a GPU program on the CPU; it needs --target=cuda");
    return 2;
  }
  if (opts.codegen.target != TargetKind::CPU && !cmd.simulate) {
    print_error(err, "run executes on the host CPU; --target=cuda needs --simulate here");
    return 2;
  }
  if (!opts.codegen.cpu.empty() || !opts.codegen.triple.empty()) {
    try {
      if (std::optional<std::string> why = JitSession::cannot_run_here(opts.codegen)) {
        print_error(err, *why);
        return 2;
      }
    } catch (CompileError &) {
      return 1; // an unknown --cpu or --triple, already reported
    }
  }
  // What this run reads: the model and every input array. The --inputs-dir
  // files join once the entry's parameters are known; the dumps and the
  // picture are checked against the rest now, before compiling.
  std::vector<ReadFile> reads = {{"model", cmd.model}};
  for (const auto &input : cmd.inputs)
    reads.push_back({"input", input.second});
  if (dumps_overwrite_reads(opts, reads, err) || picture_overwrites_reads(opts, reads, err))
    return 1;
  std::vector<ImportedWeight> weights;
  std::optional<CompiledModule> compiled = front_to_loops(cmd.model, opts, err, &weights);
  if (!compiled)
    return 1;
  std::string entry = cmd.entry.empty() ? "main" : cmd.entry;
  // With --grad, the adjoint the gradient pass added; with --train, the step.
  FunctionRole added = opts.train ? FunctionRole::TrainStep : FunctionRole::Adjoint;
  if (cmd.entry.empty() && opts.grad_fn)
    for (const FunctionPtr &f : compiled->module.functions)
      if (f->attrs.role == added && f->attrs.primal == *opts.grad_fn)
        entry = f->name;
  const LoweredFunction *fn = nullptr;
  const FunctionReport *report = nullptr;
  for (size_t i = 0; i < compiled->lowered.functions.size(); ++i)
    if (compiled->lowered.functions[i].name == entry) {
      fn = &compiled->lowered.functions[i];
      report = &compiled->reports[i];
    }
  if (!fn) {
    print_error(err, "--entry names @" + entry + ", which is not defined in " + cmd.model);
    return 1;
  }

  // Inputs: every parameter exactly once, with its exact dtype and shape;
  // --inputs-dir supplies DIR/NAME.npy for those --input does not name.
  // An imported model's weight is read from there only where the file exists.
  // A training step's optimizer state (and its rate, where --train gave
  // one) may be left out: zeros, as torch.optim starts.
  std::vector<bool> train_default(fn->inputs.size(), false);
  if (FunctionPtr step = compiled->module.find(entry); step && step->attrs.role == FunctionRole::TrainStep)
    if (FunctionPtr primal = compiled->module.find(step->attrs.primal))
      for (size_t i = primal->params.size(); i < fn->inputs.size(); ++i) {
        DType dt = fn->inputs[i]->dtype;
        bool rate = i + 1 == fn->inputs.size();
        train_default[i] =
            !rate || (opts.train && opts.train->lr && (dt == DType::Float32 || dt == DType::Float64));
      }
  std::vector<std::pair<std::string, std::string>> inputs = cmd.inputs;
  if (!cmd.inputs_dir.empty())
    for (size_t i = 0; i < report->param_names.size(); ++i) {
      const std::string &p = report->param_names[i];
      std::string file = (std::filesystem::path(cmd.inputs_dir) / (p + ".npy")).string();
      bool weight = std::any_of(weights.begin(), weights.end(), [&](const ImportedWeight &w) { return w.name == p; });
      if (std::none_of(cmd.inputs.begin(), cmd.inputs.end(), [&](const auto &in) { return in.first == p; }) &&
          (!(weight || train_default[i]) || std::filesystem::exists(file)))
        inputs.emplace_back(p, file);
    }
  std::vector<NpyArray> arrays(fn->inputs.size());
  std::vector<bool> given(fn->inputs.size(), false);
  bool ok = true;
  for (const auto &[name, path] : inputs) {
    auto it = std::find(report->param_names.begin(), report->param_names.end(), name);
    if (it == report->param_names.end()) {
      std::string valid;
      for (const std::string &p : report->param_names)
        valid += (valid.empty() ? "" : ", ") + p;
      print_error(err, "--input " + name + ": @" + entry + " has no parameter %" + name + " (parameters: " + valid + ")");
      ok = false;
      continue;
    }
    size_t i = size_t(it - report->param_names.begin());
    if (given[i]) {
      print_error(err, "--input " + name + " is given more than once");
      ok = false;
      continue;
    }
    given[i] = true;
    try {
      arrays[i] = read_npy(path);
    } catch (FileError &e) {
      print_error(err, "--input " + name + ": " + e.what());
      ok = false;
      continue;
    }
    const Buffer &b = *fn->inputs[i];
    if (arrays[i].dtype != b.dtype || arrays[i].shape != b.shape) {
      print_error(err, "--input " + name + ": %" + name + " is " + Type::tensor(b.shape, b.dtype).str() + " but '" +
                           path + "' holds a " + dtype_name(arrays[i].dtype) + " array of shape " +
                           shape_str(arrays[i].shape));
      ok = false;
    }
  }
  // An imported model's weights: the parameters no --input names.
  for (const ImportedWeight &w : weights)
    for (size_t i = 0; i < given.size(); ++i)
      if (!given[i] && report->param_names[i] == w.name) {
        arrays[i] = npy_of(w);
        given[i] = true;
      }
  // A training step's optimizer state starts at zeros, as torch.optim
  // creates it, and its rate is --train's lr where one was written.
  for (size_t i = 0; i < given.size(); ++i)
    if (!given[i] && train_default[i]) {
      const Buffer &b = *fn->inputs[i];
      arrays[i] = NpyArray{b.dtype, b.shape, std::string(size_t(b.bytes()), '\0')};
      if (i + 1 == given.size() && b.dtype == DType::Float64)
        std::memcpy(arrays[i].data.data(), &*opts.train->lr, sizeof(double));
      else if (i + 1 == given.size()) {
        float lr = float(*opts.train->lr);
        std::memcpy(arrays[i].data.data(), &lr, sizeof lr);
      }
      given[i] = true;
    }
  for (size_t i = 0; i < given.size(); ++i)
    if (!given[i]) {
      print_error(err, "missing --input " + report->param_names[i] + "=FILE.npy for %" + report->param_names[i] +
                           ": " + Type::tensor(fn->inputs[i]->shape, fn->inputs[i]->dtype).str());
      ok = false;
    }
  if (!ok)
    return 1;

  // No output replaces what the run reads (an input named output_0.npy in
  // the --output-dir, a picture named like the model).
  for (size_t i = cmd.inputs.size(); i < inputs.size(); ++i)
    reads.push_back({"input", inputs[i].second});
  if (!cmd.output_dir.empty())
    for (size_t i = 0; i < fn->results.size(); ++i)
      if (refuse_overwriting((std::filesystem::path(cmd.output_dir) / output_file_name(i)).string(), false, reads,
                             "choose another --output-dir", err))
        return 1;
  if (picture_overwrites_reads(opts, reads, err))
    return 1;

  CodegenOptions cg = opts.codegen;
  cg.prefix = "gradc_run";
  std::vector<std::string> race_sites; // of the entry's simulation
  if (cmd.simulate) { // the bound GPU functions as CPU programs, for the host's code generator
    Target gpu = describe_target(opts.codegen);
    for (LoweredFunction &f : compiled->lowered.functions) {
      std::vector<std::string> sites = simulate_gpu(f, gpu);
      if (&f == fn)
        race_sites = std::move(sites);
      if (opts.verify_each)
        verify(f, {/*scheduled=*/true, /*planned=*/true}, "GPU simulation");
    }
    cg.target = TargetKind::CPU;
  }
  std::unique_ptr<JitSession> jit;
  try {
    jit = JitSession::create(compiled->lowered, cg);
  } catch (CompileError &) {
    return 1;
  }
  JitSession::Entry call = jit->lookup(entry);
  jit->set_num_threads(cmd.threads);

  std::vector<AlignedBuffer> in_bufs, out_bufs;
  std::vector<void *> in_ptrs, out_ptrs;
  for (size_t i = 0; i < arrays.size(); ++i) {
    in_bufs.push_back(aligned_buffer(int64_t(arrays[i].data.size())));
    std::memcpy(in_bufs.back().get(), arrays[i].data.data(), arrays[i].data.size());
    in_ptrs.push_back(in_bufs.back().get());
  }
  for (const BufferPtr &o : fn->outputs) {
    out_bufs.push_back(aligned_buffer(o->bytes()));
    out_ptrs.push_back(out_bufs.back().get());
  }
  AlignedBuffer workspace = aligned_buffer(fn->workspace_bytes);
  int32_t status = call(in_ptrs.data(), out_ptrs.data(), workspace.get());
  if (status == kStatusIndexOutOfRange && fn->status) {
    int64_t words[kStatusWords];
    std::memcpy(words, static_cast<char *>(workspace.get()) + fn->status->offset, sizeof words);
    print_error(err, "@" + entry + ": a class index of nn.nll_loss is out of range: element " +
                         std::to_string(words[2]) + " of its targets is " + std::to_string(words[1]) +
                         ", outside [0, " + std::to_string(words[3]) + ")");
    return 1;
  }
  if (status == kStatusGpuRace && cmd.simulate && fn->status) {
    int64_t words[kStatusWords];
    std::memcpy(words, static_cast<char *>(workspace.get()) + fn->status->offset, sizeof words);
    std::string site = words[1] >= 0 && size_t(words[1]) < race_sites.size() ? race_sites[size_t(words[1])] : "?";
    internal_error("GPU simulation", "@" + entry + ": threads of one block race on " + site + ": element " +
                                         std::to_string(words[2]) + ", thread " + std::to_string(words[3]) +
                                         " and another, with no barrier between their accesses");
  }
  if (status != 0)
    internal_error("run",
                   std::string("the entry point returned ") + std::to_string(status) + ": " + status_message(status));

  // Every output is encoded first, then written with the --report picture as
  // one set that also removes the output_K.npy files an earlier run with
  // more outputs left behind. The summary goes to stdout only once the files
  // are written: a run whose write fails prints no results it did not keep.
  std::vector<OutputFile> files = report_picture(*compiled, opts);
  size_t outputs = 0;
  std::ostringstream summary;
  // A leaf written into a parameter is read back from the input's buffer.
  for (size_t i = 0; i < fn->results.size(); ++i) {
    const Buffer &o = *fn->results[i];
    NpyArray a;
    a.dtype = o.dtype;
    a.shape = o.shape;
    const AlignedBuffer &from = o.scope == BufferScope::InOut ? in_bufs.at(size_t(o.io_index)) : out_bufs.at(size_t(o.io_index));
    a.data.assign(from.get(), size_t(o.bytes()));
    summary << "output_" << i << ": " << Type::tensor(o.shape, o.dtype).str() << " = " << format_values(a, 8) << "\n";
    if (!cmd.output_dir.empty()) {
      files.push_back({(std::filesystem::path(cmd.output_dir) / output_file_name(i)).string(), encode_npy(a)});
      ++outputs;
    }
  }
  if (!cmd.output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cmd.output_dir, ec);
    if (ec) {
      print_error(err, "cannot create '" + cmd.output_dir + "': " + ec.message());
      return 1;
    }
  }
  try {
    // Stale files are listed under the commit's lock: a concurrent run's
    // outputs are never taken for an earlier run's.
    write_files_atomic(files, [&] {
      return cmd.output_dir.empty() ? std::vector<std::string>{} : stale_outputs(cmd.output_dir, outputs, reads);
    });
  } catch (FileError &e) {
    print_error(err, e.what());
    return 1;
  }
  out << summary.str();
  if (opts.report)
    print_report(*compiled, err);
  return 0;
}

int check_command(const std::string &model, const OnnxImportOptions &onnx, std::ostream &out, std::ostream &err) {
  std::optional<ModelSource> read = read_model(model, onnx, err);
  if (!read)
    return 1;
  std::shared_ptr<const SourceFile> source = read->source;
  DiagEngine diag(source, err);
  std::optional<Module> m = parse_module(source, diag);
  if (!m)
    return 1;
  Module typed = infer_types(*m, diag);
  if (diag.error_count())
    return 1;
  out << print_module(typed, {true});
  return 0;
}

namespace {

/// `-o OUT` and `-o OUT.relay` both mean OUT (SPEC §1); no -o, the
/// model's stem in the current directory.
std::string import_output_base(const ImportCommand &cmd) {
  if (cmd.output_base.empty())
    return stem_of(cmd.model);
  const std::string ext = ".relay";
  const std::string &o = cmd.output_base;
  std::string name = std::filesystem::path(o).filename().string();
  if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
    return o.substr(0, o.size() - ext.size());
  return o;
}

} // namespace

int import_command(const ImportCommand &cmd, std::ostream &out, std::ostream &err) {
  if (!cmd.output_base.empty() &&
      !check_output_base(cmd.output_base, "-o out/model writes out/model.relay and out/model.weights/", err))
    return 2;
  std::string base = import_output_base(cmd);
  std::string relay = base + ".relay", weights_dir = base + ".weights";
  if (!check_output_dir(base, err))
    return 1;
  // The weights directory is replaced whole: the model may lie in it.
  const std::vector<ReadFile> reads = {{"model", cmd.model}};
  if (refuse_overwriting(relay, false, reads, "choose another -o", err) ||
      refuse_overwriting(weights_dir, true, reads, "choose another -o", err))
    return 1;
  std::ifstream in;
  if (!readable_file(cmd.model, in, err))
    return 1;
  std::optional<OnnxImport> imported = import_onnx_file(cmd.model, cmd.onnx, err);
  if (!imported)
    return 1;
  // import_onnx has parsed and typed the text it returns (its declared
  // outputs are checked against gradc's types): a model gradc accepts.
  // OUT.relay and OUT.weights/ are one set: a failed import changes
  // neither, and two imports to one OUT leave one model's pair.
  std::vector<OutputFile> weight_files;
  // Each weight's bytes move into its file, behind its header: held once.
  size_t count = imported->weights.size();
  for (ImportedWeight &w : imported->weights) {
    OutputFile f{w.name + ".npy", {}};
    f.prefix = npy_header(w.dtype, w.shape);
    f.tail = std::exchange(w.data, {});
    weight_files.push_back(std::move(f));
  }
  try {
    // Built in place: a braced list would copy every weight.
    std::vector<OutputFile> set;
    set.push_back({relay, std::move(imported->text)});
    set.push_back(OutputFile::directory(weights_dir, std::move(weight_files)));
    write_files_atomic(set);
  } catch (FileError &e) {
    print_error(err, e.what());
    return 1;
  }
  out << "wrote " << relay << " and " << count << " weights under " << weights_dir << "/\n";
  return 0;
}

namespace {

/// The gradient column of `gradc ops`.
const char *gradient_kind(const OpDef &d) {
  return d.no_gradient ? "zero" : d.gradient ? "yes" : d.decompose ? "composite" : "no";
}

/// The lowering column: fusable elementwise, a kernel, or a composite.
const char *lowering_kind(const OpDef &d) {
  return d.element && d.element_when ? "injective|kernel" : d.element ? "injective" : d.kernel ? "kernel" : d.decompose ? "composite" : d.lower_loop ? "time-loop" : "no";
}

} // namespace

int ops_command(const std::string &name, bool json, std::ostream &out, std::ostream &err) {
  std::vector<const OpDef *> ops;
  if (name.empty()) {
    ops = OpRegistry::global().all();
  } else if (const OpDef *d = OpRegistry::global().find(name)) {
    ops = {d};
  } else {
    print_error(err, "no operator named '" + name + "' (see `gradc ops`)");
    return 1;
  }
  if (json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const OpDef *d : ops) {
      nlohmann::json args = nlohmann::json::array(), attrs = nlohmann::json::array();
      for (const ArgInfo &a : d->args)
        args.push_back({{"name", a.name}, {"type", a.type_info}, {"doc", a.doc}});
      for (const AttrSpec &a : d->attrs)
        attrs.push_back({{"name", a.name},
                         {"type", attr_kind_name(a.kind)},
                         {"default", a.required ? "(required)" : a.default_value.str()},
                         {"required", a.required},
                         {"rule", a.rule},
                         {"doc", a.doc}});
      nlohmann::json examples = nlohmann::json::array();
      for (const GradExample &e : d->examples)
        examples.push_back(
            {{"params", e.params}, {"body", e.body}, {"positive", e.positive}, {"int_range", e.int_range}});
      arr.push_back({{"name", d->name},
                     {"summary", d->summary},
                     {"num_inputs", d->max_inputs},
                     {"min_inputs", d->min_inputs},
                     {"arguments", args},
                     {"attributes", attrs},
                     {"support_level", d->support_level},
                     {"type_relation", d->relation_name},
                     {"has_gradient", d->has_gradient()},
                     {"gradient_is_zero", d->no_gradient},
                     {"has_lowering", d->has_lowering()},
                     {"injective", d->ever_injective()},
                     {"aliases", d->aliases},
                     {"examples", examples},
                     {"gradient_formula", derived_gradient(*d)},
                     {"decomposes_into", derived_decomposition(*d)}});
    }
    out << arr.dump(2) << "\n";
    return 0;
  }
  if (name.empty()) {
    // Each column is as wide as its widest cell plus two spaces, so a long
    // name never runs into the next column.
    std::vector<std::vector<std::string>> rows{{"operator", "arity", "level", "relation", "gradient", "lowering"}};
    for (const OpDef *d : ops) {
      std::string arity = d->min_inputs == d->max_inputs
                              ? std::to_string(d->min_inputs)
                              : std::to_string(d->min_inputs) + "-" + std::to_string(d->max_inputs);
      rows.push_back({d->name, arity, std::to_string(d->support_level), d->relation_name, gradient_kind(*d),
                      lowering_kind(*d)});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto &row : rows)
      for (size_t c = 0; c < row.size(); ++c)
        width[c] = std::max(width[c], row[c].size() + 2);
    for (const auto &row : rows) {
      for (size_t c = 0; c + 1 < row.size(); ++c)
        out << std::left << std::setw(int(width[c])) << row[c];
      out << row.back() << "\n";
    }
    return 0;
  }
  const OpDef &d = *ops[0];
  out << d.name << ": " << d.summary << "\n";
  if (!d.aliases.empty()) {
    out << "  aliases:";
    for (const std::string &a : d.aliases)
      out << " " << a;
    out << "\n";
  }
  out << "  support level " << d.support_level << ", type relation " << d.relation_name << "\n";
  if (!d.notes.empty()) {
    std::istringstream lines(d.notes);
    for (std::string line; std::getline(lines, line);)
      out << (line.empty() ? "" : "  ") << line << "\n";
  }
  out << "  arguments:\n";
  for (const ArgInfo &a : d.args)
    out << "    " << a.name << ": " << a.type_info << " - " << a.doc << "\n";
  if (!d.attrs.empty()) {
    out << "  attributes:\n";
    for (const AttrSpec &a : d.attrs)
      out << "    " << a.name << ": " << attr_kind_name(a.kind) << " = "
          << (a.required ? "(required)" : a.default_value.str()) << (a.rule.empty() ? "" : " (" + a.rule + ")")
          << " - " << a.doc << "\n";
  }
  out << "  gradient: "
      << (d.no_gradient                ? "zero by definition"
          : d.gradient && d.decompose ? "a rule of its own (a composite expanded after differentiation)"
          : d.gradient                ? "yes"
          : d.decompose               ? "from its parts (a composite)"
                                      : "none")
      << "\n";
  // Derived from the operator's own rules on its first example (OpReference.h).
  if (std::string example = example_text(d); !example.empty())
    out << "  example: " << example << "\n";
  std::vector<std::string> formula = derived_gradient(d);
  if (!formula.empty())
    out << "  gradient of the example (%out its result, %grad the adjoint of %out):\n";
  for (const std::string &line : formula)
    out << "    " << line << "\n";
  if (std::string parts = derived_decomposition(d); !parts.empty())
    out << "  decomposes into: " << parts << "\n";
  std::string strategies;
  for (const auto &[target, fn] : d.strategies)
    strategies += std::string(strategies.empty() ? "; for " : ", ") + target_kind_name(target);
  out << "  lowering: "
      << (d.element && d.element_when ? "injective (fusable) for some calls, a kernel for the others"
          : d.element     ? "injective (fusable)"
          : d.kernel    ? "kernel" + (strategies.empty() ? "" : strategies + " (hand-scheduled)") +
                              (d.fuses_epilogue ? "; fuses its consumers' epilogue" : "")
          : d.decompose ? "a composite, expanded into its parts"
          : d.lower_loop ? "a time loop: its body's kernels run once per step"
                        : "none")
      << "\n";
  return 0;
}

} // namespace gradc
