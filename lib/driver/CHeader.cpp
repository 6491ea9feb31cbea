//===- CHeader.cpp - the C header of a compiled module --------------------===//
//
// What `gradc compile` writes beside the object file for a C program to
// include (SPEC §8): one struct of inputs and one of outputs per function,
// the entry's prototype, the workspace and tensor-size macros. The names it
// gives are also what the manifest reports (c_field_names).
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Artifacts.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"
#include "gradc/transform/TrainStep.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <regex>
#include <set>
#include <sstream>

namespace gradc {

namespace {

/// The C type that carries one element of `dt` across the ABI.
const char *c_element_type(DType dt) { return dtype_info(dt).c_type; }

std::string upper(std::string s) {
  for (char &c : s)
    c = char(std::toupper((unsigned char)c));
  return s;
}

bool is_c_identifier(const std::string &s) {
  if (s.empty() || std::isdigit((unsigned char)s[0]))
    return false;
  for (char c : s)
    if (!std::isalnum((unsigned char)c) && c != '_')
      return false;
  return true;
}

/// Names a struct field cannot have: C and C++ keywords, macros, and the type
/// names the header uses (in C++ a member named `int64_t` breaks the
/// declarations that follow it).
bool is_reserved_word(const std::string &s) {
  // clang-format off
  static const std::set<std::string> words = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "restrict", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "typeof", "union", "unsigned",
      "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq", "int8_t",
      "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t",
      "NULL", "CUstream",
      "linux", "unix", "i386"}; // macros in the GNU dialects of C
  // clang-format on
  return words.count(s) > 0;
}

/// Names that a C library header included before ours may define as an
/// object-like macro, which would turn a struct field into a number: every
/// macro of <stdint.h> and <inttypes.h> (INT32_MAX, SIZE_WIDTH, INT64_C,
/// PRId64), <stddef.h> (NULL), <limits.h>, <float.h>, <math.h> (NAN,
/// HUGE_VAL, POSIX's M_PI), <errno.h> (errno, EDOM: C reserves E[0-9A-Z]*),
/// <stdio.h>, <stdlib.h>, <signal.h>, <locale.h>, <time.h>, <fenv.h>,
/// <stdatomic.h>, <threads.h>, <wchar.h>, <complex.h> (I, complex) and
/// <stdnoreturn.h>, as of C23 and POSIX.1-2017; and the type names of
/// <stdint.h> and <stddef.h>.
bool is_library_name(const std::string &s) {
  // clang-format off
  static const std::set<std::string> names = {
      "NULL", "offsetof", "errno", "stdin", "stdout", "stderr", "EOF", "BUFSIZ", "FILENAME_MAX",
      "FOPEN_MAX", "L_tmpnam", "TMP_MAX", "P_tmpdir", "L_ctermid", "EXIT_SUCCESS", "EXIT_FAILURE",
      "RAND_MAX", "MB_CUR_MAX", "MB_LEN_MAX", "CHAR_BIT", "BOOL_WIDTH", "BOOL_MAX", "BITINT_MAXWIDTH",
      "PATH_MAX", "NAME_MAX", "PIPE_BUF", "DECIMAL_DIG", "NAN", "INFINITY", "MATH_ERRNO",
      "MATH_ERREXCEPT", "math_errhandling", "CLOCKS_PER_SEC", "ONCE_FLAG_INIT", "TSS_DTOR_ITERATIONS",
      "WEOF", "I", "complex", "imaginary", "noreturn", "unreachable", "assert"};
  static const std::regex patterns(
      "U?INT(_LEAST|_FAST)?(8|16|32|64)_(MIN|MAX|WIDTH|C)"
      "|U?INT(PTR|MAX)_(MIN|MAX|WIDTH|C)"
      "|(PTRDIFF|SIG_ATOMIC|SIZE|SSIZE|RSIZE|WCHAR|WINT)_(MIN|MAX|WIDTH)"
      "|(PRI|SCN)[diouxXb].*"
      "|U?(CHAR|SCHAR|SHRT|INT|LONG|LLONG)_(MIN|MAX|WIDTH)"
      "|(FLT|DBL|LDBL)_[A-Z0-9_]+"
      "|HUGE_VAL[FL]?|FP_[A-Z0-9_]+|M_[A-Z0-9_]+(l|f[0-9]+x?)?"
      "|E[A-Z0-9]+|SIG[A-Z0-9_]+|LC_[A-Z_]+|(TIME|CLOCK)_[A-Z_]+|FE_[A-Z_]+|ATOMIC_[A-Z0-9_]+"
      // and the types of <stdint.h> and <stddef.h>, like int8_t above
      "|u?int(_least|_fast)?(8|16|32|64)_t|u?int(ptr|max)_t|(s?size|ptrdiff|max_align|nullptr|wint)_t",
      std::regex::optimize);
  // clang-format on
  return names.count(s) > 0 || std::regex_match(s, patterns);
}

/// One tensor of a function as the header names it.
struct CTensor {
  std::string field;  // the struct field
  std::string macro;  // the stem of its macros: PREFIX_FN_FIELD
  std::string origin; // what the user calls it: "%x" or "output_0"
  const Buffer *buffer;
  std::string updated_by = {}; // a parameter updated in place: the result leaf written into it
};

/// The header's names for one function.
struct CFunction {
  std::string symbol; // PREFIX_FN
  std::string macro;  // PREFIX_FN upper-cased
  std::vector<CTensor> inputs, outputs;
};

/// Chooses every name the header declares. Relay names may start with a digit,
/// be C keywords, or differ only in case (`%w` and `%W`), and the macros of
/// different tensors and functions share one namespace; a tensor whose name
/// would clash gets a numbered suffix, so the header always compiles.
/// Functions whose names clash after upper-casing, or with the header's own
/// functions, are a problem instead (their symbols cannot be renamed): the
/// header cannot be written, though every tensor still gets a field.
class HeaderNames {
public:
  explicit HeaderNames(const std::string &prefix) : prefix_(prefix) {
    GRADC_CHECK(is_c_identifier(prefix), "emit_c_header", "symbol prefix '" + prefix + "' is not a C identifier");
    claim(upper(prefix) + "_ALIGNMENT");
    claim("GRADC_" + upper(prefix) + "_H");
  }

  std::vector<CFunction> name(const LoweredModule &module, const std::vector<FunctionReport> &reports) {
    std::vector<CFunction> fns;
    // Function-level names first, then every output (their fields are fixed
    // by the ABI), then parameters, which absorb any clash.
    for (const LoweredFunction &fn : module.functions) {
      CFunction cf;
      cf.symbol = prefix_ + "_" + fn.name;
      cf.macro = upper(cf.symbol);
      for (const char *reserved : {"strerror", "set_num_threads", "get_num_threads", "shutdown_threads"})
        if (fn.name == reserved)
          problems.push_back(std::string("function @") + reserved + " would clash with " + prefix_ + "_" + reserved +
                             "; rename the function");
      for (const char *suffix : {"_WORKSPACE_SIZE", "_STACK_SIZE"})
        if (!claim(cf.macro + suffix))
          problems.push_back("function @" + fn.name + " needs the name " + cf.macro + suffix +
                             ", which another function has; rename one");
      fns.push_back(cf);
    }
    // An output is named for its result leaf: a leaf written into a
    // parameter has no field here (output_1 may follow output_3's absence).
    for (size_t f = 0; f < fns.size(); ++f)
      for (size_t i = 0; i < module.functions[f].results.size(); ++i)
        if (const Buffer &r = *module.functions[f].results[i]; r.scope == BufferScope::Output)
          fns[f].outputs.push_back(tensor(fns[f], "output_" + std::to_string(i), "output_" + std::to_string(i), r));
    for (size_t f = 0; f < fns.size(); ++f) {
      const LoweredFunction &fn = module.functions[f];
      for (size_t i = 0; i < fn.inputs.size(); ++i) {
        const std::string &param = reports[f].param_names[i];
        // `%0` becomes p_0, `%int` p_int, `%INT32_MAX` p_INT32_MAX, `%_x`
        // p_x (C reserves _X and __x): no field is a keyword, a type name or
        // a macro, the library's or this header's.
        std::string field = param;
        if (!is_c_identifier(field) || field[0] == '_' || is_reserved_word(field) || is_library_name(field) ||
            is_own_macro(field))
          field = (field[0] == '_' ? "p" : "p_") + field;
        fns[f].inputs.push_back(tensor(fns[f], field, "%" + param, *fn.inputs[i]));
        for (size_t r = 0; r < fn.results.size(); ++r)
          if (fn.results[r] == fn.inputs[i])
            fns[f].inputs.back().updated_by = "output_" + std::to_string(r);
      }
    }
    return fns;
  }

  /// Why the header cannot be written, in the order found; empty if it can.
  std::vector<std::string> problems;

private:
  /// True for a name spelled like a macro this header defines (all begin
  /// with PREFIX_ or GRADC_ and have no lower-case letter): a field of one
  /// function may be named like a macro of another, defined before it.
  bool is_own_macro(const std::string &s) const {
    const std::string P = upper(prefix_) + "_";
    if (s.compare(0, P.size(), P) != 0 && s.compare(0, 6, "GRADC_") != 0)
      return false;
    return std::none_of(s.begin(), s.end(), [](char c) { return std::islower((unsigned char)c); });
  }

  /// Takes a macro name; false if it is already taken.
  bool claim(const std::string &macro) { return macros_.insert(macro).second; }

  static std::vector<std::string> macro_suffixes(const Buffer &buf) {
    std::vector<std::string> suffixes = {"_RANK", "_SIZE", "_BYTES"};
    if (!buf.shape.empty())
      suffixes.push_back("_SHAPE");
    for (size_t d = 0; d < buf.shape.size(); ++d)
      suffixes.push_back("_DIM" + std::to_string(d));
    return suffixes;
  }

  /// `base`, or `base_2`, `base_3`, ...: the first whose macros are free.
  /// Two fields of a function with one name would have the same macros, so
  /// this also keeps the fields of each struct distinct.
  CTensor tensor(const CFunction &fn, const std::string &base, const std::string &origin, const Buffer &buf) {
    for (int n = 1;; ++n) {
      std::string field = n == 1 ? base : base + "_" + std::to_string(n);
      std::string stem = fn.macro + "_" + upper(field);
      bool free = true;
      for (const std::string &suffix : macro_suffixes(buf))
        free = free && !macros_.count(stem + suffix);
      if (!free)
        continue;
      for (const std::string &suffix : macro_suffixes(buf))
        claim(stem + suffix);
      return CTensor{field, stem, origin, &buf};
    }
  }

  std::string prefix_;
  std::set<std::string> macros_;
};

/// The `#define`s of one tensor: rank, dimensions, shape, elements, bytes.
void emit_tensor_macros(std::ostream &os, const CTensor &t) {
  const Buffer &b = *t.buffer;
  os << "\n/* " << t.origin << " */\n";
  os << "#define " << t.macro << "_RANK " << b.shape.size() << "\n";
  std::string shape;
  for (size_t d = 0; d < b.shape.size(); ++d) {
    os << "#define " << t.macro << "_DIM" << d << " " << b.shape[d] << "\n";
    shape += (d ? ", " : "") + std::to_string(b.shape[d]);
  }
  // A scalar has no SHAPE: C has no empty initializer list.
  if (!b.shape.empty())
    os << "#define " << t.macro << "_SHAPE {" << shape << "}\n";
  os << "#define " << t.macro << "_SIZE " << b.numel() << " /* elements */\n";
  os << "#define " << t.macro << "_BYTES " << b.bytes() << "\n";
}

/// What a training step (--train, transform/TrainStep.h) asks of its caller.
void emit_train_step_note(std::ostream &os, const FunctionAttrs &attrs, const std::string &macro) {
  std::string why;
  std::optional<Optimizer> opt = parse_optimizer(attrs.optimizer, &why);
  os << "/* One training step: the loss (output_0), the gradients, and the update of\n"
     << " * every trained parameter and of the optimizer's state, written in place\n"
     << " * into the fields marked UPDATED IN PLACE. Optimizer: " << attrs.optimizer << ".\n"
     << " * Before the first step set the optimizer state"
     << (opt && opt->needs_step() ? " and the step count" : "") << " to zeros (as\n"
     << " * torch.optim creates them); then pass the same buffers every step. The\n"
     << " * learning rate is the input `lr` (a schedule is the caller's). */\n";
  if (opt && opt->lr)
    os << "/* The learning rate --train was given. */\n"
       << "#define " << macro << "_DEFAULT_LR " << std::setprecision(17) << *opt->lr << "\n\n";
}

void emit_struct(std::ostream &os, const std::string &tag, const std::vector<CTensor> &tensors, const char *qualifier) {
  os << "struct " << tag << " {\n";
  for (const CTensor &t : tensors) {
    // A parameter the call updates is written: it is not const.
    os << "  " << (t.updated_by.empty() ? qualifier : "") << c_element_type(t.buffer->dtype) << " *" << t.field
       << "; /* ";
    if (t.origin != t.field)
      os << t.origin << ": ";
    os << Type::tensor(t.buffer->shape, t.buffer->dtype).str();
    if (!t.updated_by.empty())
      os << "; UPDATED IN PLACE: the call writes its " << t.updated_by << " here";
    os << " */\n";
  }
  if (tensors.empty())
    os << "  char unused; /* C does not allow an empty struct */\n";
  os << "};\n";
}

void check_io_order(const LoweredFunction &fn, size_t param_names) {
  GRADC_CHECK(param_names == fn.inputs.size(), "artifacts",
              "@" + fn.name + " has " + std::to_string(fn.inputs.size()) + " inputs but " +
                  std::to_string(param_names) + " parameter names");
  // The struct fields are read by position, which is the buffer's io_index.
  for (size_t i = 0; i < fn.inputs.size(); ++i)
    GRADC_CHECK(fn.inputs[i]->io_index == int(i), "artifacts", "inputs out of order");
  for (size_t i = 0; i < fn.outputs.size(); ++i)
    GRADC_CHECK(fn.outputs[i]->io_index == int(i), "artifacts", "outputs out of order");
  size_t own = 0;
  for (const BufferPtr &r : fn.results)
    own += r->scope == BufferScope::Output;
  GRADC_CHECK(own == fn.outputs.size(), "artifacts", "results and outputs disagree");
}

void check_reports(const LoweredModule &module, const std::vector<FunctionReport> &reports) {
  GRADC_CHECK(reports.size() == module.functions.size(), "artifacts", "one report per function expected");
  for (size_t f = 0; f < reports.size(); ++f)
    check_io_order(module.functions[f], reports[f].param_names.size());
}

} // namespace

std::vector<CFieldNames> c_field_names(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                                       const std::string &prefix) {
  check_reports(module, reports);
  std::vector<CFieldNames> names;
  for (const CFunction &cf : HeaderNames(prefix).name(module, reports)) {
    CFieldNames &n = names.emplace_back();
    for (const CTensor &t : cf.inputs)
      n.inputs.push_back(t.field);
    for (const CTensor &t : cf.outputs)
      n.outputs.push_back(t.field);
  }
  return names;
}

std::string emit_c_header(const LoweredModule &module, const std::vector<FunctionReport> &reports,
                          const std::string &prefix, TargetKind target) {
  check_reports(module, reports);
  HeaderNames names(prefix);
  std::vector<CFunction> fns = names.name(module, reports);
  if (!names.problems.empty())
    throw FileError("cannot write the C header: " + names.problems[0]);
  const std::string P = upper(prefix);
  const bool cuda = target == TargetKind::CUDA;
  std::ostringstream os;

  os << "/* Generated by gradc; do not edit.\n"
     << " *\n"
     << " * The C interface of the functions gradc compiled with the symbol prefix\n"
     << " * \"" << prefix << "\". To call a function FN:\n"
     << " *\n";
  if (cuda)
    os << " *   1. Allocate the workspace with cudaMalloc (or cuMemAlloc), of\n"
       << " *      " << P << "_FN_WORKSPACE_SIZE bytes (0: pass NULL).\n"
       << " *   2. Point the fields of a struct " << prefix << "_FN_inputs at the parameters and those\n"
       << " *      of a struct " << prefix << "_FN_outputs at buffers for the results, all device\n"
       << " *      memory; " << P << "_FN_<TENSOR>_BYTES says how large each one is.\n"
       << " *   3. int32_t rc = " << prefix << "_FN(&inputs, &outputs, workspace, stream);\n"
       << " *      It runs the kernels on `stream` and returns when they are done.\n"
       << " *   4. rc is 0 on success; " << prefix << "_strerror(rc) says what failed otherwise.\n"
       << " *\n"
       << " * Every pointer is a CUDA device pointer. The kernels run in the calling\n"
       << " * thread's current context, or else in the one that owns the buffers.\n"
       << " * libcuda.so.1 is opened at run time, so linking needs no CUDA library.\n"
       << " * If you include cuda.h, include it before this header.\n";
  else
    os << " *   1. Allocate the workspace: aligned_alloc(" << P << "_ALIGNMENT, " << P << "_FN_WORKSPACE_SIZE)\n"
       << " *      (the size is a multiple of " << P << "_ALIGNMENT; when it is 0, pass NULL).\n"
       << " *   2. Point the fields of a struct " << prefix << "_FN_inputs at the parameters and those\n"
       << " *      of a struct " << prefix << "_FN_outputs at buffers for the results;\n"
       << " *      " << P << "_FN_<TENSOR>_BYTES says how large each one is.\n"
       << " *   3. int32_t rc = " << prefix << "_FN(&inputs, &outputs, workspace);\n"
       << " *   4. rc is 0 on success; " << prefix << "_strerror(rc) says what failed otherwise.\n"
       << " *\n"
       << " * Threads: large loops are split across a thread pool inside the object,\n"
       << " * started on first use with one thread per online CPU. " << prefix << "_set_num_threads(n)\n"
       << " * sets its size (1: no thread is ever started; n <= 0: the default again);\n"
       << " * " << prefix << "_get_num_threads() reads it. The pool is the object's only global\n"
       << " * state. Several threads may call the functions at once, each with its own\n"
       << " * workspace; a call that finds the pool busy runs its loops on its own thread.\n"
       << " * Results never depend on the number of threads. " << prefix << "_shutdown_threads()\n"
       << " * stops and joins the workers (waiting for a call in progress); a later call\n"
       << " * starts them again. Unloading the object (dlclose) stops them by itself.\n";
  os << " *\n"
     << " * Every buffer is dense and row-major, aligned to " << P << "_ALIGNMENT bytes,\n"
     << " * and overlaps no other." << (cuda ? " Threads may call the functions at once, each with its\n"
                                               " * own workspace. The object's one piece of global state is a table of\n"
                                               " * loaded modules: the first call in a CUDA context loads the PTX, later\n"
                                               " * calls in it reuse the module (with a driver that has cuCtxGetId,\n"
                                               " * CUDA 12; an older one loads and unloads it on every call)."
                                             : "")
     << " float16 elements are passed as\n"
     << " * their IEEE bit pattern (uint16_t), bool elements as one byte, 0 or 1.\n"
     << " * A field marked UPDATED IN PLACE is a parameter the call reads and then\n"
     << " * overwrites with one of its results (that result has no output field).\n"
     << " */\n";

  const std::string guard = "GRADC_" + P + "_H";
  os << "#ifndef " << guard << "\n#define " << guard << "\n\n"
     << "#include <stddef.h>\n#include <stdint.h>\n\n"
     << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  if (cuda)
    // cuda.h declares the same typedef; C99 forbids repeating a typedef.
    os << "#ifndef __cuda_cuda_h__\ntypedef struct CUstream_st *CUstream;\n#endif\n\n";
  os << "/* The alignment, in bytes, of every buffer passed to a function. */\n"
     << "#define " << P << "_ALIGNMENT " << kBufferAlignment << "\n\n";

  // Emitted inline so that the object file needs no symbol besides the entries.
  os << "/* What a function's return code means. */\n"
     << "static inline const char *" << prefix << "_strerror(int32_t code) {\n"
     << "  switch (code) {\n";
  // Codes are dense from 0; the first code without a message of its own ends them.
  const std::string unknown = status_message(-1);
  for (int32_t code = 0; status_message(code) != unknown; ++code)
    os << "  case " << code << ": return \"" << status_message(code) << "\";\n";
  os << "  default: return \"" << unknown << "\";\n"
     << "  }\n}\n";

  if (!cuda)
    os << "\n/* The size of the object's thread pool (see above). */\n"
       << "void " << prefix << "_set_num_threads(int32_t n);\n"
       << "int32_t " << prefix << "_get_num_threads(void);\n"
       << "void " << prefix << "_shutdown_threads(void);\n";

  for (size_t f = 0; f < fns.size(); ++f) {
    const LoweredFunction &fn = module.functions[f];
    const CFunction &cf = fns[f];
    const FunctionAttrs &attrs = reports[f].attrs;
    std::string about = attrs.role == FunctionRole::Adjoint     ? " (the gradient of @" + attrs.primal + ")"
                        : attrs.role == FunctionRole::TrainStep ? " (a training step of @" + attrs.primal + ")"
                                                                : "";
    os << "\n/* ===== @" << fn.name << about << " ===== */\n\n";
    if (attrs.role == FunctionRole::TrainStep)
      emit_train_step_note(os, attrs, cf.macro);
    emit_struct(os, cf.symbol + "_inputs", cf.inputs, "const ");
    os << "\n";
    emit_struct(os, cf.symbol + "_outputs", cf.outputs, "");
    os << "\n/* The planned peak of intermediates (bytes, a multiple of " << P << "_ALIGNMENT). */\n"
       << "#define " << cf.macro << "_WORKSPACE_SIZE " << fn.workspace_bytes << "\n"
       << "/* The stack its kernels' scratch (register tiles, matrix panels) takes on the calling\n"
       << " * thread and on each pool worker, in bytes; frames add a few KiB. */\n"
       << "#define " << cf.macro << "_STACK_SIZE " << stack_bytes(fn) << "\n";
    for (const CTensor &t : cf.inputs)
      emit_tensor_macros(os, t);
    for (const CTensor &t : cf.outputs)
      emit_tensor_macros(os, t);
    std::string indent(cf.symbol.size() + 9, ' ');
    os << "\nint32_t " << cf.symbol << "(const struct " << cf.symbol << "_inputs *inputs,\n"
       << indent << "struct " << cf.symbol << "_outputs *outputs, void *workspace" << (cuda ? ", CUstream stream" : "")
       << ");\n";
  }

  os << "\n#ifdef __cplusplus\n} /* extern \"C\" */\n#endif\n\n#endif /* " << guard << " */\n";
  return os.str();
}

} // namespace gradc
