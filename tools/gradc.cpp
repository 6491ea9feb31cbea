//===- gradc.cpp - the command-line driver --------------------------------===//
//
// Parses the command line (SPEC §1) and dispatches to a subcommand. Exit
// codes: 0 ok, 1 the model or an input is wrong, 2 the command line is wrong,
// 3 an internal error. Fatal signals are turned into exit code 3 too.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Artifacts.h"
#include "gradc/driver/Commands.h"
#include "gradc/support/Log.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <unistd.h>

using namespace gradc;

namespace {

/// --memory-budget=SIZE in bytes, or nullopt after printing why not. SIZE is
/// a decimal number (digits, an optional fraction and exponent; no sign,
/// hexadecimal or space) and a unit: none or B (bytes), KB MB GB TB (powers
/// of 1000), KiB MiB GiB TiB or K M G T (powers of 1024). The planned peak
/// is a whole number of bytes, so a fraction of a byte is dropped (1.5
/// admits the peaks 1 admits); a size above 0 but under one byte is refused
/// as a likely mistake. A size beyond any int64 (1e30) means no limit.
std::optional<int64_t> parse_size(const std::string &text) {
  auto refuse = [&](const std::string &why) -> std::optional<int64_t> {
    print_error(std::cerr, "--memory-budget: " + why);
    return std::nullopt;
  };
  auto digits = [&](size_t i) {
    while (i < text.size() && std::isdigit((unsigned char)text[i]))
      ++i;
    return i;
  };
  size_t end = digits(0), mantissa_digits = end;
  if (end < text.size() && text[end] == '.') {
    size_t fraction_end = digits(end + 1);
    mantissa_digits += fraction_end - end - 1;
    end = fraction_end;
  }
  if (mantissa_digits > 0 && end < text.size() && (text[end] == 'e' || text[end] == 'E')) {
    size_t exponent = end + 1 + (end + 1 < text.size() && (text[end + 1] == '+' || text[end + 1] == '-'));
    if (digits(exponent) > exponent)
      end = digits(exponent);
  }
  // clang-format off
  const std::pair<const char *, long double> units[] = {
      {"", 1}, {"B", 1},
      {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
      {"KiB", 1024.0L}, {"MiB", 1048576.0L}, {"GiB", 1073741824.0L}, {"TiB", 1099511627776.0L},
      {"K", 1024.0L}, {"M", 1048576.0L}, {"G", 1073741824.0L}, {"T", 1099511627776.0L}};
  // clang-format on
  const std::string unit = text.substr(end);
  const auto *found = std::find_if(std::begin(units), std::end(units), [&](const auto &u) { return unit == u.first; });
  if (mantissa_digits == 0 || found == std::end(units))
    return refuse("cannot read '" + text + "' as a size (examples: 123456, 64KiB, 1.5MiB, 2GB, 1TiB)");
  long double bytes = std::strtold(text.substr(0, end).c_str(), nullptr) * found->second;
  if (bytes >= 9223372036854775807.0L)
    return std::numeric_limits<int64_t>::max(); // beyond any size: no limit
  if (bytes > 0 && bytes < 1)
    return refuse("'" + text + "' is less than one byte; a budget is a whole number of bytes (0: no workspace)");
  return int64_t(bytes);
}

std::vector<std::string> split_list(const std::string &s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty())
        out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

/// The largest --remat-exhaustive: the search keeps its 2^N plans, and on a
/// chain of N dense+tanh layers (2 shared cores) N = 14 took 2.2 s and
/// 130 MB, 15 took 4.0 s and 180 MB, 16 took 8.8 s and 300 MB, 20 more than
/// 120 s and 3.8 GB.
constexpr int kMaxRematExhaustive = 15;

struct SharedOptions {
  std::string grad = "";
  std::string train;
  std::string wrt, remat = "manual", budget, target = "cpu", dump, dump_dir, gpu_math = "exact";
  int opt = 2;
  int remat_exhaustive = -1;
  std::string report_picture;
  std::vector<std::string> input_shapes;
  bool verify_each = false;
  int verbose = 0;
  std::string log_level;
};

void add_input_shape(CLI::App *cmd, std::vector<std::string> &shapes) {
  cmd->add_option("--input-shape", shapes, "An ONNX model's input with dynamic dimensions: NAME=1,3,224,224")
      ->take_all();
}

/// --input-shape NAME=D0,D1,... into `out`; false after an error. Every
/// dimension is written out in decimal (`x=4,,2` is refused, not read as
/// (4, 2)); `NAME=` is a scalar. A name given twice is an error, not the
/// last one winning.
bool parse_input_shapes(const std::vector<std::string> &given, OnnxImportOptions &out) {
  for (const std::string &g : given) {
    size_t eq = g.find('=');
    bool ok = eq != std::string::npos && eq > 0;
    std::vector<int64_t> dims;
    for (size_t start = eq + 1; ok && start < g.size();) {
      size_t comma = std::min(g.find(',', start), g.size());
      std::string d = g.substr(start, comma - start);
      ok = !d.empty() && d.size() <= 13 &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
           std::stoll(d) < (int64_t(1) << 40) && (comma == g.size() || comma + 1 < g.size());
      if (ok)
        dims.push_back(std::stoll(d));
      start = comma + 1;
    }
    if (!ok) {
      print_error(std::cerr,
                  "--input-shape expects NAME=D0,D1,... with each dimension a number >= 0, found '" + g + "'");
      return false;
    }
    std::string name = g.substr(0, eq);
    if (out.input_shapes.count(name)) {
      print_error(std::cerr, "--input-shape gives '" + name + "' more than once");
      return false;
    }
    out.input_shapes[name] = dims;
  }
  return true;
}

/// --input-shape fixes an ONNX input; a Relay model states its shapes.
bool check_input_shapes_apply(const OnnxImportOptions &onnx, const std::string &model) {
  if (onnx.input_shapes.empty() || looks_like_onnx(model))
    return true;
  print_error(std::cerr, "--input-shape applies to an ONNX model (.onnx); '" + model +
                             "' is Relay text, whose parameters state their shapes");
  return false;
}

void add_shared(CLI::App *cmd, SharedOptions &o, CodegenOptions &cg) {
  cmd->add_option("--grad", o.grad, "Add @FN_adjoint for @FN (default main)")->expected(0, 1)->default_str("main");
  cmd->add_option("--train", o.train,
                  "Add @FN_train_step, the loss, gradients and optimizer update in place: sgd(lr=0.1, momentum=0.9, "
                  "dampening=0, weight_decay=0, nesterov=false), adam(...) or adamw(...) (PyTorch's names; the step "
                  "takes the learning rate as input %lr)");
  cmd->add_option("--wrt", o.wrt,
                  "Parameters to differentiate (or train), e.g. %a,%b (default: all floating-point; with --train, "
                  "those the model does not update itself, an imported model's weights)");
  cmd->add_option("--remat", o.remat, "none | manual | auto | sqrt")
      ->check(CLI::IsMember({"none", "manual", "auto", "sqrt"}));
  cmd->add_option("--memory-budget", o.budget,
                  "Planned peak workspace per function: 123456, 64KiB, 1.5MiB, 2GB, 1TiB (1e30: no limit)");
  cmd->add_option("--remat-exhaustive", o.remat_exhaustive,
                  "auto: search keep sets exhaustively up to N forward kernels (default 10, at most " +
                      std::to_string(kMaxRematExhaustive) + "; 2^N plans)")
      ->check(CLI::Range(0, kMaxRematExhaustive));
  add_input_shape(cmd, o.input_shapes);
  cmd->add_option("--target", o.target, "cpu | cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--cpu", cg.cpu, "Target CPU (default: the host)");
  cmd->add_option("--triple", cg.triple, "Target triple (default: the host)");
  cmd->add_option("--gpu-arch", cg.gpu_arch, "CUDA architecture, sm_XX (default sm_80)");
  cmd->add_option("--gpu-math", o.gpu_math,
                  "exact (default): float32 products in float32; tf32: on tensor cores, operands rounded to "
                  "TensorFloat-32 (PyTorch's allow_tf32; CUDA, sm_80 and later)")
      ->check(CLI::IsMember({"exact", "tf32"}));
  cmd->add_option("-O", o.opt, "Optimisation level 0-3 (default 2; 3 adds LLVM's loop and SLP vectorizers to gradc's own)")->check(CLI::Range(0, 3));
  cmd->add_option("--dump-ir", o.dump, "all, or a comma list of parse,typed,grad,remat,fused,loops,llvm,asm,ptx");
  cmd->add_option("--dump-dir", o.dump_dir, "Write dumps to numbered files NN-stage.ext here");
  cmd->add_option("--report", o.report_picture,
                  "Print functions, FLOPs, planned memory and stage times to stderr; =FILE.svg or .html also "
                  "draws the planned workspace")
      ->expected(0, 1);
  cmd->add_flag("--verify-each", o.verify_each, "Verify the IR after every pass (a failure is a gradc bug)");
  cmd->add_flag("-v,--verbose", o.verbose, "Log what the passes decide (-vv: more); same as --log-level=info");
  cmd->add_option("--log-level", o.log_level, "off | info | debug: log what the passes decide, to stderr")
      ->check(CLI::IsMember({"off", "info", "debug"}));
}

/// Validates the shared options into PipelineOptions; false after an error.
bool finish_shared(CLI::App *cmd, const SharedOptions &o, PipelineOptions &p) {
  if (cmd->count("--grad"))
    p.grad_fn = o.grad.empty() ? "main" : o.grad;
  for (std::string w : split_list(o.wrt)) {
    if (!w.empty() && w[0] == '%')
      w = w.substr(1);
    p.wrt.push_back(w);
  }
  if (cmd->count("--train")) {
    std::string why;
    p.train = parse_optimizer(o.train, &why);
    if (!p.train) {
      print_error(std::cerr, "--train=" + o.train + ": " + why);
      return false;
    }
    p.adjoint = p.grad_fn.has_value(); // --train alone adds the step, not the adjoint
    p.onnx.state_in_place = true;      // an imported model's running statistics are updated too
    if (!p.grad_fn)
      p.grad_fn = "main";
  }
  if (!p.wrt.empty() && !p.grad_fn) {
    print_error(std::cerr, "--wrt needs --grad or --train");
    return false;
  }
  p.remat = o.remat == "none"   ? RematMode::None
            : o.remat == "auto" ? RematMode::Auto
            : o.remat == "sqrt" ? RematMode::Sqrt
                                : RematMode::Manual;
  LogLevel level = o.verbose >= 2 ? LogLevel::Debug : o.verbose == 1 ? LogLevel::Info : LogLevel::Off;
  if (!o.log_level.empty())
    level = *parse_log_level(o.log_level);
  set_log_level(level);
  if (!o.budget.empty()) {
    std::optional<int64_t> budget = parse_size(o.budget);
    if (!budget)
      return false;
    p.memory_budget = *budget;
  }
  if (!parse_input_shapes(o.input_shapes, p.onnx))
    return false;
  if (o.remat_exhaustive >= 0)
    p.remat_exhaustive = size_t(o.remat_exhaustive);
  if (p.remat == RematMode::Auto && p.memory_budget < 0) {
    print_error(std::cerr, "--remat=auto needs --memory-budget");
    return false;
  }
  p.codegen.target = o.target == "cuda" ? TargetKind::CUDA : TargetKind::CPU;
  p.codegen.opt_level = o.opt;
  if (std::optional<std::string> problem = cpu_target_problem(p.codegen)) {
    print_error(std::cerr, *problem);
    return false;
  }
  if (p.codegen.gpu_arch.rfind("sm_", 0) != 0 || p.codegen.gpu_arch.size() < 5) {
    print_error(std::cerr, "--gpu-arch must look like sm_80, found '" + p.codegen.gpu_arch + "'");
    return false;
  }
  p.codegen.gpu_tf32 = o.gpu_math == "tf32";
  if (p.codegen.gpu_tf32 && p.codegen.target != TargetKind::CUDA) {
    print_error(std::cerr, "--gpu-math=tf32 applies to --target=cuda (the CPU computes float32 exactly)");
    return false;
  }
  if (p.codegen.gpu_tf32 && std::atoi(p.codegen.gpu_arch.c_str() + 3) < 80) {
    print_error(std::cerr, "--gpu-math=tf32 needs tensor cores with tf32: --gpu-arch=sm_80 or later, found '" +
                               p.codegen.gpu_arch + "'");
    return false;
  }
  const auto &stages = dump_stage_names();
  for (const std::string &s : split_list(o.dump)) {
    if (s == "all") {
      p.dumps.insert(stages.begin(), stages.end());
    } else if (std::find(stages.begin(), stages.end(), s) != stages.end()) {
      p.dumps.insert(s);
    } else {
      std::string valid = "all";
      for (const std::string &v : stages)
        valid += ", " + v;
      print_error(std::cerr, "--dump-ir: unknown stage '" + s + "' (valid: " + valid + ")");
      return false;
    }
  }
  if (p.codegen.target != TargetKind::CUDA)
    p.dumps.erase("ptx");
  p.dump_dir = o.dump_dir;
  if (!p.dump_dir.empty()) {
    // Before the front end: a dump directory that cannot exist or be written
    // is a command-line problem, not something to find after compiling.
    std::error_code ec;
    std::filesystem::create_directories(p.dump_dir, ec);
    if (ec || !std::filesystem::is_directory(p.dump_dir)) {
      print_error(std::cerr, "--dump-dir: cannot create directory '" + p.dump_dir + "'" +
                                 (ec ? ": " + ec.message() : std::string(": a file of that name exists")));
      return false;
    }
    if (access(p.dump_dir.c_str(), W_OK | X_OK) != 0) {
      print_error(std::cerr, "--dump-dir: directory '" + p.dump_dir + "' is not writable");
      return false;
    }
  }
  p.report = cmd->count("--report") > 0;
  p.report_picture = o.report_picture;
  if (!p.report_picture.empty()) {
    auto ends = [&](const std::string &ext) {
      return p.report_picture.size() > ext.size() &&
             p.report_picture.compare(p.report_picture.size() - ext.size(), ext.size(), ext) == 0;
    };
    if (!ends(".svg") && !ends(".html")) {
      print_error(std::cerr, "--report=" + p.report_picture + ": the picture is a .svg or .html file");
      return false;
    }
  }
  p.verify_each = p.verify_each || o.verify_each;
  return true;
}

extern "C" void on_fatal_signal(int sig) {
  // A crash while artifacts are being written leaves none of their temporaries.
  remove_temporary_files();
  ssize_t ignored = write(2, kFatalSignalLine.data(), kFatalSignalLine.size());
  (void)ignored;
  (void)sig;
  _exit(3);
}

void install_signal_handlers() {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sa.sa_flags = SA_ONSTACK;
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(sig, &sa, nullptr);
}

int real_main(int argc, char **argv) {
  CLI::App app{"gradc: an ahead-of-time compiler for differentiable tensor programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gradc ") + gradc_version());

  CompileCommand compile;
  SharedOptions compile_shared;
  std::string emit;
  CLI::App *c = app.add_subcommand("compile", "Write an object/PTX, a C header and a JSON manifest");
  c->add_option("model", compile.model, "The model (.relay, or .onnx: imported)")->required();
  add_shared(c, compile_shared, compile.pipeline.codegen);
  c->add_option("-o", compile.output_base,
                "Writes BASE.o, BASE.h, BASE.json (default: the model's stem, here). BASE must end in a file "
                "name: '-o .' or '-o out/' is an error, as with cc -o; write -o out/model")
      ->option_text("BASE");
  c->add_option("--emit", emit, "Comma list of " + artifact_names(","));

  RunCommand run;
  SharedOptions run_shared;
  std::vector<std::string> inputs;
  CLI::App *r = app.add_subcommand("run", "Compile in memory and run one function on .npy inputs");
  r->add_option("model", run.model, "The model (.relay, or .onnx: imported, its weights the default inputs)")
      ->required();
  add_shared(r, run_shared, run.pipeline.codegen);
  r->add_option("--entry", run.entry, "The function to run (default main, or FN_adjoint with --grad)");
  r->add_option("--input", inputs, "NAME=FILE.npy, one per parameter")->take_all();
  r->add_option("--inputs-dir", run.inputs_dir, "Read every parameter not given by --input from DIR/NAME.npy");
  r->add_option("--output-dir", run.output_dir, "Write output_i.npy files here");
  r->add_flag("--simulate", run.simulate,
              "With --target=cuda: run the GPU program on this CPU, every block and thread as the device would "
              "(shared memory per block, barriers, warp shuffles), to check GPU schedules without a GPU");
  r->add_option("--threads", run.threads, "Threads of parallel loops (default: the online CPUs; 1 starts none)")
      ->check(CLI::Range(1, 4096));

  std::string check_model;
  std::vector<std::string> check_shapes;
  CLI::App *k = app.add_subcommand("check", "Parse and type-check; print the typed module");
  k->add_option("model", check_model, "The model (.relay, or .onnx: imported)")->required();
  add_input_shape(k, check_shapes);

  ImportCommand import;
  std::vector<std::string> import_shapes;
  CLI::App *im = app.add_subcommand("import", "An ONNX model as Relay text (OUT.relay) and its weights (OUT.weights/)");
  im->add_option("model", import.model, "The model (.onnx)")->required();
  im->add_option("-o", import.output_base,
                 "Writes BASE.relay and BASE.weights/NAME.npy, replacing both together; -o BASE.relay means "
                 "the same (default: the model's stem, here). The directory must exist")
      ->option_text("BASE");
  add_input_shape(im, import_shapes);
  im->add_flag("--state-in-place", import.onnx.state_in_place,
               "Training-mode batch norm's running statistics become results of @main written into their "
               "weights in place (what --train on an .onnx does), so a training step updates them");

  std::string op_name;
  bool op_json = false;
  CLI::App *o = app.add_subcommand("ops", "List the operator registry");
  o->add_option("name", op_name, "One operator");
  o->add_flag("--json", op_json, "Machine-readable output");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    print_error(std::cerr, e.what());
    std::cerr << "run 'gradc --help' or 'gradc SUBCOMMAND --help' for usage\n";
    return 2;
  }

  if (c->parsed()) {
    if (!finish_shared(c, compile_shared, compile.pipeline) ||
        !check_input_shapes_apply(compile.pipeline.onnx, compile.model))
      return 2;
    if (c->count("-o") && compile.output_base.empty()) {
      print_error(std::cerr, "-o needs a base name (-o out/model writes out/model.o, out/model.h and out/model.json)");
      return 2;
    }
    for (const std::string &e : split_list(emit)) {
      const ArtifactKind *kind = find_artifact(e);
      if (!kind) {
        print_error(std::cerr, "--emit: unknown item '" + e + "' (valid: " + artifact_names(", ") + ")");
        return 2;
      }
      compile.emit.push_back(kind->kind);
    }
    if (!emit.empty() && compile.emit.empty()) {
      print_error(std::cerr, "--emit is empty (valid: " + artifact_names(", ") + ")");
      return 2;
    }
    compile.argv.assign(argv, argv + argc);
    return compile_command(compile, std::cout, std::cerr);
  }
  if (r->parsed()) {
    if (!finish_shared(r, run_shared, run.pipeline) || !check_input_shapes_apply(run.pipeline.onnx, run.model))
      return 2;
    for (const std::string &in : inputs) {
      size_t eq = in.find('=');
      if (eq == std::string::npos || eq == 0) {
        print_error(std::cerr, "--input expects NAME=FILE.npy, found '" + in + "'");
        return 2;
      }
      std::string name = in.substr(0, eq);
      if (name[0] == '%')
        name = name.substr(1);
      run.inputs.emplace_back(name, in.substr(eq + 1));
    }
    return run_command(run, std::cout, std::cerr);
  }
  if (k->parsed()) {
    OnnxImportOptions onnx;
    if (!parse_input_shapes(check_shapes, onnx) || !check_input_shapes_apply(onnx, check_model))
      return 2;
    return check_command(check_model, onnx, std::cout, std::cerr);
  }
  if (im->parsed()) {
    if (!parse_input_shapes(import_shapes, import.onnx))
      return 2;
    if (im->count("-o") && import.output_base.empty()) {
      print_error(std::cerr, "-o needs a base name (-o out/model writes out/model.relay and out/model.weights/)");
      return 2;
    }
    return import_command(import, std::cout, std::cerr);
  }
  return ops_command(op_name, op_json, std::cout, std::cerr);
}

} // namespace

int main(int argc, char **argv) {
  install_signal_handlers();
  try {
    return real_main(argc, argv);
  } catch (const std::bad_alloc &) {
    // Running out of memory is the input's size meeting the process's limit
    // (issue 14 item 12), not a bug: an error about the model, exit 1.
    print_error(std::cerr, "out of memory: the model needs more memory than this process may use");
    return 1;
  } catch (const std::exception &e) { // InternalError, ...
    print_internal_error(std::cerr, e);
    return 3;
  }
}
