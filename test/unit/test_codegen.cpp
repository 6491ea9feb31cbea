//===- test_codegen.cpp - LLVM code generators, CPU (JIT, object) and CUDA -===//
//
// Builds small loop-IR modules by hand, runs them through JitSession and
// compares with C++ (bit for bit where both call the same libm), checks the
// ABI's return codes, links the CPU object and the CUDA host stub with `cc`,
// and feeds the PTX to ptxas when the CUDA toolkit is installed.
//
//===----------------------------------------------------------------------===//
#include "gradc/codegen/Codegen.h"
#include "gradc/loops/Lanes.h"
#include "gradc/loops/Templates.h"
#include "gradc/loops/Verify.h"
#include "gradc/lower/Passes.h"
#include "gradc/support/Diagnostics.h"

#include <catch2/catch.hpp>
#include <llvm/Support/CommandLine.h>

#include <regex>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>

using namespace gradc;
namespace fs = std::filesystem;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

BufferPtr buffer(const std::string &name, DType dt, int64_t n, BufferScope scope, int io_index) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = dt;
  b->shape = {n};
  b->scope = scope;
  b->io_index = io_index;
  return b;
}
BufferPtr input(const std::string &name, DType dt, int64_t n, int index) {
  return buffer(name, dt, n, BufferScope::Input, index);
}
BufferPtr output(const std::string &name, DType dt, int64_t n, int index) {
  return buffer(name, dt, n, BufferScope::Output, index);
}

/// for i in [0, n) kind: body(i)
StmtPtr loop(int64_t n, ForKind kind, const std::function<StmtPtr(LExprPtr)> &body, const std::string &name = "i") {
  auto i = std::make_shared<LVar>(LVar{name});
  return for_loop(i, n, kind, body(var_ref(i)));
}

/// One function `main` whose single kernel touches all of its buffers.
LoweredModule single_kernel(std::vector<BufferPtr> inputs, std::vector<BufferPtr> outputs, StmtPtr body) {
  LoweredFunction fn;
  fn.name = "main";
  fn.inputs = inputs;
  fn.outputs = outputs;
  fn.results = fn.outputs;
  std::vector<BufferPtr> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  fn.kernels.push_back(Kernel{"k", all, std::move(body)});
  LoweredModule m;
  m.functions.push_back(std::move(fn));
  return m;
}

/// 64-byte-aligned storage, as the ABI requires of every buffer.
template <typename T> class Aligned {
public:
  explicit Aligned(std::vector<T> values)
      : n_(values.size()), p_(static_cast<T *>(std::aligned_alloc(64, (n_ * sizeof(T) / 64 + 1) * 64))) {
    std::copy(values.begin(), values.end(), p_);
  }
  /// `n` elements of garbage (0xAB bytes): outputs a kernel leaves unwritten
  /// never pass as zeros.
  explicit Aligned(size_t n) : Aligned(std::vector<T>(n)) { std::memset(p_, 0xAB, (n_ * sizeof(T) / 64 + 1) * 64); }
  Aligned(const Aligned &) = delete;
  ~Aligned() { std::free(p_); }
  T *data() { return p_; }
  T &operator[](size_t i) { return p_[i]; }
  size_t size() const { return n_; }

private:
  size_t n_;
  T *p_;
};

int32_t call(JitSession &jit, std::vector<void *> inputs, std::vector<void *> outputs, void *workspace = nullptr) {
  return jit.lookup("main")(inputs.data(), outputs.data(), workspace);
}

std::unique_ptr<JitSession> jit(const LoweredModule &m, int opt_level = 2) {
  CodegenOptions opts;
  opts.opt_level = opt_level;
  return JitSession::create(m, opts);
}

/// Bitwise equality, so that NaN == NaN and -0.0 != +0.0.
template <typename T> bool same_bits(T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; }

template <typename T> LoweredModule exp_add_module(DType dt, int64_t n) {
  auto a = input("a", dt, n, 0), b = input("b", dt, n, 1), out = output("out", dt, n, 0);
  return single_kernel({a, b}, {out}, loop(n, ForKind::Vectorized, [&](LExprPtr i) {
                         return store(out, i, binary(BinaryOp::Add, unary(UnaryOp::Exp, load(a, i)), load(b, i)));
                       }));
}

template <typename T> void check_exp_add(DType dt) {
  const int64_t n = 37; // not a multiple of any vector width
  LoweredModule m = exp_add_module<T>(dt, n);
  for (int opt_level : {0, 2, 3}) {
    auto session = jit(m, opt_level);
    Aligned<T> a(n), b(n), out(n);
    for (int64_t i = 0; i < n; ++i) {
      a[i] = T(0.37 * double(i) - 6.0);
      b[i] = T(1.0 / double(i + 1));
    }
    REQUIRE(call(*session, {a.data(), b.data()}, {out.data()}) == 0);
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, double>) {
        CHECK(same_bits(out[i], T(std::exp(a[i]) + b[i]))); // libm's exp
      } else { // inline vector arithmetic (codegen/VectorMath.h): exp within 1 ulp of libm's expf
        T e = std::exp(a[i]);
        bool near = false;
        for (T c : {std::nextafter(e, T(-INFINITY)), e, std::nextafter(e, T(INFINITY))})
          near = near || same_bits(out[i], T(c + b[i]));
        CHECK(near);
      }
    }
  }
}

/// Python's floor division and modulo; x // 0 and x % 0 give 0 as in numpy.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  int64_t q = a / b;
  return (a % b != 0 && ((a % b < 0) != (b < 0))) ? q - 1 : q;
}
int64_t floor_mod(int64_t a, int64_t b) { return b == 0 ? 0 : a - floor_div(a, b) * b; }

std::string temp_dir() {
  std::string pattern = (fs::temp_directory_path() / "gradc_codegen_XXXXXX").string();
  REQUIRE(mkdtemp(pattern.data()) != nullptr);
  return pattern;
}

void write_file(const std::string &path, const std::string &bytes) { std::ofstream(path, std::ios::binary) << bytes; }

bool have_cc() { return std::system("cc --version >/dev/null 2>&1") == 0; }

/// Exit status of a shell command.
int run_shell(const std::string &command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// CUDA code for `m` (what `what` asks for), or nothing where libdevice is
/// missing (a warning: the caller's CUDA checks are skipped).
std::optional<CodegenOutput> cuda_code(const LoweredModule &m, const CodegenRequest &what) {
  CodegenOptions opts;
  opts.target = TargetKind::CUDA;
  try {
    return generate_code(m, opts, what);
  } catch (const CompileError &) {
    WARN("no libdevice: CUDA code generation skipped");
    return std::nullopt;
  }
}
} // namespace

TEST_CASE("codegen: exp + add matches libm (float64 bit for bit, float32 within 1 ulp)", "[codegen]") {
  check_exp_add<float>(DType::Float32);
  check_exp_add<double>(DType::Float64);
}

TEST_CASE("codegen: unary math functions and pow", "[codegen]") {
  const int64_t n = 9;
  auto x = input("x", DType::Float64, n, 0), y = input("y", DType::Float64, n, 1);
  const UnaryOp ops[] = {UnaryOp::Tanh, UnaryOp::Erf, UnaryOp::Log, UnaryOp::Sqrt,
                         UnaryOp::Sin,  UnaryOp::Cos, UnaryOp::Abs, UnaryOp::Neg};
  double (*const ref[])(double) = {[](double v) { return std::tanh(v); }, [](double v) { return std::erf(v); },
                                   [](double v) { return std::log(v); },  [](double v) { return std::sqrt(v); },
                                   [](double v) { return std::sin(v); },  [](double v) { return std::cos(v); },
                                   [](double v) { return std::fabs(v); }, [](double v) { return -v; }};
  const size_t num_ops = std::size(ops);
  std::vector<BufferPtr> outs;
  for (size_t k = 0; k <= num_ops; ++k)
    outs.push_back(output("o" + std::to_string(k), DType::Float64, n, int(k)));
  LoweredModule m =
      single_kernel({x, y}, outs, loop(n, ForKind::Serial, [&](LExprPtr i) {
                      std::vector<StmtPtr> stores;
                      for (size_t k = 0; k < num_ops; ++k)
                        stores.push_back(store(outs[k], i, unary(ops[k], load(x, i))));
                      stores.push_back(store(outs[num_ops], i, binary(BinaryOp::Pow, load(x, i), load(y, i))));
                      return seq(stores);
                    }));
  auto session = jit(m);
  Aligned<double> xs({0.25, 1.5, 3.0, 0.001, 7.5, 2.0, 0.5, 10.0, 1e-300});
  Aligned<double> ys({2.0, -1.5, 0.5, 3.0, 0.1, 10.0, -2.0, 1.0 / 3, 2.0});
  std::vector<std::unique_ptr<Aligned<double>>> results;
  std::vector<void *> out_ptrs;
  for (size_t k = 0; k <= num_ops; ++k) {
    results.push_back(std::make_unique<Aligned<double>>(n));
    out_ptrs.push_back(results.back()->data());
  }
  REQUIRE(call(*session, {xs.data(), ys.data()}, out_ptrs) == 0);
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < num_ops; ++k)
      CHECK(same_bits((*results[k])[i], ref[k](xs[i])));
    CHECK(same_bits((*results[num_ops])[i], std::pow(xs[i], ys[i])));
  }
}

TEST_CASE("codegen: float16 math is done in float and rounded once", "[codegen]") {
  const int64_t n = 16;
  auto x = input("x", DType::Float32, n, 0);
  auto out = output("out", DType::Float32, n, 0);
  LoweredModule m = single_kernel({x}, {out}, loop(n, ForKind::Vectorized, [&](LExprPtr i) {
                                    LExprPtr h = cast(DType::Float16, load(x, i));
                                    LExprPtr e = binary(BinaryOp::Add, unary(UnaryOp::Tanh, h), unary(UnaryOp::Exp, h));
                                    return store(out, i, cast(DType::Float32, e));
                                  }));
  auto session = jit(m);
  Aligned<float> xs(n), result(n);
  for (int64_t i = 0; i < n; ++i)
    xs[i] = 0.3f * float(i) - 2.0f;
  REQUIRE(call(*session, {xs.data()}, {result.data()}) == 0);
  for (int64_t i = 0; i < n; ++i) {
    float h = float(_Float16(xs[i]));
    _Float16 t = _Float16(std::tanh(h)), e = _Float16(std::exp(h));
    CHECK(result[i] == float(_Float16(t + e)));
  }
}

TEST_CASE("codegen: row sums through a local accumulator", "[codegen]") {
  const int64_t rows = 5, cols = 33;
  auto a = input("a", DType::Float32, rows * cols, 0);
  auto out = output("out", DType::Float32, rows, 0);
  auto acc = buffer("acc", DType::Float32, 1, BufferScope::Local, -1);
  LExprPtr zero = int_imm(0);
  LoweredModule m = single_kernel(
      {a}, {out}, loop(rows, ForKind::Parallel, [&](LExprPtr i) {
        StmtPtr sum = loop(
            cols, ForKind::Serial,
            [&](LExprPtr j) {
              LExprPtr index = binary(BinaryOp::Add, binary(BinaryOp::Mul, i, int_imm(cols)), j);
              return store(acc, zero, binary(BinaryOp::Add, load(acc, zero), load(a, index)));
            },
            "j");
        return alloc(acc, seq({store(acc, zero, float_imm(0, DType::Float32)), sum, store(out, i, load(acc, zero))}));
      }));
  auto session = jit(m);
  Aligned<float> as(rows * cols), result(rows);
  for (int64_t k = 0; k < rows * cols; ++k)
    as[k] = std::sin(float(k)) * 3.0f;
  REQUIRE(call(*session, {as.data()}, {result.data()}) == 0);
  for (int64_t r = 0; r < rows; ++r) {
    float expected = 0; // same order as the loop: no reassociation allowed
    for (int64_t c = 0; c < cols; ++c)
      expected += as[r * cols + c];
    CHECK(same_bits(result[r], expected));
  }
}

TEST_CASE("codegen: two kernels through an arena buffer, and argument checks", "[codegen]") {
  const int64_t n = 20;
  auto x = input("x", DType::Float64, n, 0);
  auto out = output("out", DType::Float64, n, 0);
  auto tmp = buffer("tmp", DType::Float64, n, BufferScope::Arena, -1);
  tmp->offset = 64;
  LoweredFunction fn;
  fn.name = "main";
  fn.inputs = {x};
  fn.outputs = {out};
  fn.results = fn.outputs;
  fn.arena = {tmp};
  fn.workspace_bytes = 64 + n * 8;
  fn.kernels.push_back(Kernel{"square", {x, tmp}, loop(n, ForKind::Parallel, [&](LExprPtr i) {
                                return store(tmp, i, binary(BinaryOp::Mul, load(x, i), load(x, i)));
                              })});
  fn.kernels.push_back(Kernel{"minus", {x, tmp, out}, loop(n, ForKind::ScanTime, [&](LExprPtr i) {
                                return store(out, i, binary(BinaryOp::Sub, load(tmp, i), load(x, i)));
                              })});
  LoweredModule m;
  m.functions.push_back(std::move(fn));
  auto session = jit(m);
  Aligned<double> xs(n), result(n);
  Aligned<char> workspace(64 + n * 8 + 64);
  for (int64_t i = 0; i < n; ++i)
    xs[i] = 0.5 * double(i) - 3.0;
  REQUIRE(call(*session, {xs.data()}, {result.data()}, workspace.data()) == 0);
  for (int64_t i = 0; i < n; ++i)
    CHECK(result[i] == xs[i] * xs[i] - xs[i]);

  // 1: null pointers; 2: pointers not 64-byte aligned.
  JitSession::Entry entry = session->lookup("main");
  void *in[] = {xs.data()}, *outs[] = {result.data()};
  CHECK(entry(nullptr, outs, workspace.data()) == 1);
  CHECK(entry(in, nullptr, workspace.data()) == 1);
  CHECK(entry(in, outs, nullptr) == 1);
  void *null_in[] = {nullptr};
  CHECK(entry(null_in, outs, workspace.data()) == 1);
  void *odd_out[] = {reinterpret_cast<char *>(result.data()) + 8};
  CHECK(entry(in, odd_out, workspace.data()) == 2);
  CHECK(entry(in, outs, workspace.data() + 32) == 2);
  CHECK(entry(null_in, odd_out, workspace.data()) == 1); // null wins over misaligned
  CHECK(std::string(status_message(2)).find("aligned") != std::string::npos);
}

TEST_CASE("codegen: casts, compares and selects", "[codegen]") {
  const int64_t n = 7;
  auto f = input("f", DType::Float32, n, 0);
  auto to_int = output("to_int", DType::Int32, n, 0);
  auto less = output("less", DType::Bool, n, 1);
  auto not_equal = output("not_equal", DType::Bool, n, 2);
  auto to_bool = output("to_bool", DType::Bool, n, 3);
  auto relu = output("relu", DType::Float32, n, 4);
  auto back = output("back", DType::Float64, n, 5);
  LoweredModule m = single_kernel(
      {f}, {to_int, less, not_equal, to_bool, relu, back}, loop(n, ForKind::Vectorized, [&](LExprPtr i) {
        LExprPtr v = load(f, i), zero = float_imm(0, DType::Float32);
        LExprPtr lt = compare(CompareOp::LT, v, float_imm(0.5, DType::Float32));
        // back = float64(int64(less) + int64(int32(f)))
        LExprPtr sum = binary(BinaryOp::Add, cast(DType::Int64, lt), cast(DType::Int64, cast(DType::Int32, v)));
        return seq({store(to_int, i, cast(DType::Int32, v)), store(less, i, lt),
                    store(not_equal, i, compare(CompareOp::NE, v, v)), store(to_bool, i, cast(DType::Bool, v)),
                    store(relu, i, select(compare(CompareOp::GT, v, zero), v, zero)),
                    store(back, i, cast(DType::Float64, sum))});
      }));
  auto session = jit(m);
  Aligned<float> fs({-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, float(kNaN), 3e9f});
  Aligned<int32_t> ints(n);
  Aligned<uint8_t> lt(n), ne(n), bools(n);
  Aligned<float> relus(n);
  Aligned<double> backs(n);
  REQUIRE(call(*session, {fs.data()}, {ints.data(), lt.data(), ne.data(), bools.data(), relus.data(), backs.data()}) ==
          0);
  // float -> int truncates toward zero and saturates; NaN gives 0.
  CHECK(std::vector<int32_t>(ints.data(), ints.data() + n) ==
        std::vector<int32_t>{-2, 0, 0, 0, 2, 0, std::numeric_limits<int32_t>::max()});
  CHECK(std::vector<uint8_t>(lt.data(), lt.data() + n) == std::vector<uint8_t>{1, 1, 1, 0, 0, 0, 0});
  CHECK(std::vector<uint8_t>(ne.data(), ne.data() + n) == std::vector<uint8_t>{0, 0, 0, 0, 0, 1, 0});
  CHECK(std::vector<uint8_t>(bools.data(), bools.data() + n) == std::vector<uint8_t>{1, 1, 0, 1, 1, 1, 1});
  CHECK(std::vector<float>(relus.data(), relus.data() + 5) == std::vector<float>{0, 0, 0, 0.5f, 2.7f});
  CHECK(relus[5] == 0.0f); // NaN > 0 is false
  CHECK(std::vector<double>(backs.data(), backs.data() + 6) == std::vector<double>{-1, 1, 1, 0, 2, 0});
}

TEST_CASE("codegen: integer division follows Python, by zero gives 0", "[codegen]") {
  const int32_t min = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> as = {7, -7, 7, -7, 0, 5, -5, min, 6, min};
  std::vector<int32_t> bs = {2, 2, -2, -2, 3, 0, 3, -1, -3, 1};
  const int64_t n = int64_t(as.size());
  auto a = input("a", DType::Int32, n, 0), b = input("b", DType::Int32, n, 1);
  auto fdiv = output("fdiv", DType::Int32, n, 0), fmod = output("fmod", DType::Int32, n, 1);
  auto tdiv = output("tdiv", DType::Int32, n, 2), mx = output("mx", DType::Int32, n, 3);
  LoweredModule m = single_kernel(
      {a, b}, {fdiv, fmod, tdiv, mx}, loop(n, ForKind::Vectorized, [&](LExprPtr i) {
        LExprPtr x = load(a, i), y = load(b, i);
        return seq({store(fdiv, i, binary(BinaryOp::FloorDiv, x, y)), store(fmod, i, binary(BinaryOp::FloorMod, x, y)),
                    store(tdiv, i, binary(BinaryOp::Div, x, y)), store(mx, i, binary(BinaryOp::Max, x, y))});
      }));
  auto session = jit(m);
  Aligned<int32_t> xa(as), xb(bs), q(n), r(n), t(n), big(n);
  REQUIRE(call(*session, {xa.data(), xb.data()}, {q.data(), r.data(), t.data(), big.data()}) == 0);
  for (int64_t i = 0; i < n; ++i) {
    INFO(as[i] << " and " << bs[i]);
    CHECK(q[i] == int32_t(floor_div(as[i], bs[i]))); // min // -1 wraps to min
    CHECK(r[i] == int32_t(floor_mod(as[i], bs[i])));
    CHECK(t[i] == (bs[i] == 0 ? 0 : int32_t(int64_t(as[i]) / bs[i])));
    CHECK(big[i] == std::max(as[i], bs[i]));
  }
}

TEST_CASE("codegen: float minimum and maximum propagate NaN like numpy", "[codegen]") {
  const int64_t n = 4;
  auto a = input("a", DType::Float64, n, 0), b = input("b", DType::Float64, n, 1);
  auto lo = output("lo", DType::Float64, n, 0), hi = output("hi", DType::Float64, n, 1);
  LoweredModule m = single_kernel({a, b}, {lo, hi}, loop(n, ForKind::Serial, [&](LExprPtr i) {
                                    return seq({store(lo, i, binary(BinaryOp::Min, load(a, i), load(b, i))),
                                                store(hi, i, binary(BinaryOp::Max, load(a, i), load(b, i)))});
                                  }));
  auto session = jit(m);
  Aligned<double> xa({1.0, kNaN, 2.0, -1.0}), xb({2.0, 1.0, kNaN, -3.0}), rlo(n), rhi(n);
  REQUIRE(call(*session, {xa.data(), xb.data()}, {rlo.data(), rhi.data()}) == 0);
  CHECK(rlo[0] == 1.0);
  CHECK(rhi[0] == 2.0);
  CHECK((std::isnan(rlo[1]) && std::isnan(rhi[1]) && std::isnan(rlo[2]) && std::isnan(rhi[2])));
  CHECK(rlo[3] == -3.0);
  CHECK(rhi[3] == -1.0);
}

TEST_CASE("codegen: LLVM's post-register-allocation list scheduler is off", "[codegen]") {
  // Quadratic in a block's length (a register tile is one long block): codegen turns it off
  // when it makes its first target machine (Codegen.cpp, disable_post_ra_scheduler).
  CodegenOptions opts;
  opts.prefix = "m";
  CodegenRequest what;
  what.object = true;
  generate_code(exp_add_module<float>(DType::Float32, 8), opts, what);
  llvm::StringMap<llvm::cl::Option *> &options = llvm::cl::getRegisteredOptions();
  auto it = options.find("post-RA-scheduler");
  REQUIRE(it != options.end());
  auto *option = static_cast<llvm::cl::opt<bool> *>(it->second);
  CHECK(option->getNumOccurrences() == 1);
  CHECK_FALSE(option->getValue());
}

TEST_CASE("codegen: the CPU object is ELF and links with `cc ... -lm`", "[codegen]") {
  const int64_t n = 37;
  CodegenOptions opts;
  opts.prefix = "m";
  CodegenRequest what;
  what.object = what.llvm_ir = what.assembly = true;
  CodegenOutput out = generate_code(exp_add_module<float>(DType::Float32, n), opts, what);
  REQUIRE(out.object.compare(0, 4,
                             "\x7f"
                             "ELF") == 0);
  CHECK(out.llvm_ir.find("i32 @m_main(") != std::string::npos);
  // No fast-math flag on any instruction (`fastcc`, the internal calling convention, is fine).
  CHECK_FALSE(std::regex_search(out.llvm_ir, std::regex(R"(\b(fast|reassoc|nnan|ninf|nsz|arcp|contract|afn) )")));
  CHECK(out.assembly.find("m_main") != std::string::npos);
  if (!have_cc()) {
    WARN("no `cc`: the object was not linked");
    return;
  }
  std::string dir = temp_dir();
  write_file(dir + "/m.o", out.object);
  write_file(dir + "/app.c", R"(
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
int32_t m_main(void *const *, void *const *, void *);
int main(void) {
  float *a = aligned_alloc(64, 192), *b = aligned_alloc(64, 192), *o = aligned_alloc(64, 192);
  memset(o, 0xAB, 192);
  for (int i = 0; i < 37; ++i) { a[i] = 0.1f * i; b[i] = 1.0f; }
  void *in[] = {a, b}, *out[] = {o};
  if (m_main(in, out, 0) != 0) return 1;
  for (int i = 0; i < 37; ++i) { /* exp within 1 ulp of libm's */
    float e = expf(a[i]);
    if (o[i] != e + b[i] && o[i] != nextafterf(e, -INFINITY) + b[i] && o[i] != nextafterf(e, INFINITY) + b[i]) return 2;
  }
  return 0;
})");
  CHECK(run_shell("cd " + dir + " && cc app.c m.o -lm -o app && ./app") == 0);
  fs::remove_all(dir);
}

TEST_CASE("codegen: --triple and --cpu pick the target; unknown ones are user errors", "[codegen]") {
  LoweredModule m = exp_add_module<float>(DType::Float32, 4);
  CodegenRequest what;
  what.object = true;
  CodegenOptions cross;
  cross.triple = "aarch64-unknown-linux-gnu";
  cross.cpu = "neoverse-v1";
  CHECK(generate_code(m, cross, what)
            .object.compare(0, 4,
                            "\x7f"
                            "ELF") == 0);
  CodegenOptions bad_triple;
  bad_triple.triple = "bogus-nothing-nowhere";
  CHECK_THROWS_AS(generate_code(m, bad_triple, what), CompileError);
  CodegenOptions bad_cpu;
  bad_cpu.cpu = "pentium-9000";
  CHECK_THROWS_AS(generate_code(m, bad_cpu, what), CompileError);
  CHECK_THROWS_AS(JitSession::create(m, bad_cpu), CompileError);
  // The CUDA host stub calls the runtime, which is built for x86-64 Linux only.
  CodegenOptions cuda_cross;
  cuda_cross.target = TargetKind::CUDA;
  cuda_cross.triple = "aarch64-unknown-linux-gnu";
  CHECK_THROWS_AS(generate_code(m, cuda_cross, what), CompileError);
  CodegenOptions bad_arch;
  bad_arch.target = TargetKind::CUDA;
  bad_arch.gpu_arch = "sm_9000";
  CHECK_THROWS_AS(generate_code(m, bad_arch, what), CompileError);
}

TEST_CASE("codegen: CUDA kernels become PTX that ptxas accepts", "[codegen][cuda]") {
  // Two blocks of 64 threads over 100 elements, with a bounds guard.
  const int64_t n = 100, block = 64, grid = 2;
  LoweredFunction fn;
  fn.name = "main";
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16};
  for (int d = 0; d < 3; ++d) {
    DType dt = dtypes[d];
    auto x = input(std::string("x") + dtype_name(dt), dt, n, 2 * d);
    auto y = input(std::string("y") + dtype_name(dt), dt, n, 2 * d + 1);
    auto out = output(std::string("out") + dtype_name(dt), dt, n, d);
    fn.inputs.insert(fn.inputs.end(), {x, y});
    fn.outputs.push_back(out);
    fn.results.push_back(out);
    auto bx = std::make_shared<LVar>(LVar{"bx"}), tx = std::make_shared<LVar>(LVar{"tx"});
    LExprPtr i = binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(bx), int_imm(block)), var_ref(tx));
    LExprPtr xi = load(x, i), yi = load(y, i);
    LExprPtr value = binary(BinaryOp::Add, binary(BinaryOp::Add, unary(UnaryOp::Tanh, xi), unary(UnaryOp::Erf, xi)),
                            binary(BinaryOp::Add, binary(BinaryOp::Pow, xi, yi),
                                   binary(BinaryOp::Max, unary(UnaryOp::Exp, xi), unary(UnaryOp::Log, yi))));
    StmtPtr guarded = if_then(compare(CompareOp::LT, i, int_imm(n)), store(out, i, value));
    StmtPtr body = for_loop(bx, grid, ForKind::BlockIdx, for_loop(tx, block, ForKind::ThreadIdx, guarded));
    fn.kernels.push_back(Kernel{std::string("k_") + dtype_name(dt), {x, y, out}, body, Dim3{grid}, Dim3{block}});
  }
  // A function without kernels returns 0 without asking anything of the driver.
  LoweredFunction nothing;
  nothing.name = "nothing";
  nothing.inputs = {input("a", DType::Float32, n, 0)};
  nothing.outputs = {output("b", DType::Float32, n, 0)};
  nothing.results = nothing.outputs;
  LoweredModule m;
  m.functions.push_back(std::move(fn));
  m.functions.push_back(std::move(nothing));
  CodegenOptions opts;
  opts.target = TargetKind::CUDA;
  CodegenRequest what;
  what.ptx = what.object = what.llvm_ir = true;
  CodegenOutput out;
  try {
    out = generate_code(m, opts, what);
  } catch (const CompileError &) {
    WARN("no libdevice: CUDA code generation skipped");
    return;
  }
  CHECK(out.ptx.find(".entry model_main_k_float32") != std::string::npos);
  CHECK(out.ptx.find(".target sm_80") != std::string::npos);
  CHECK(out.ptx.find("%ctaid.x") != std::string::npos);
  CHECK(out.ptx.find("__nv_") == std::string::npos); // libdevice was linked and inlined
  REQUIRE(out.object.compare(0, 4,
                             "\x7f"
                             "ELF") == 0);

  std::string dir = temp_dir();
  const std::string ptxas = "/usr/local/cuda/bin/ptxas";
  if (fs::exists(ptxas)) {
    write_file(dir + "/m.ptx", out.ptx);
    for (const char *arch : {"sm_80", "sm_90"})
      CHECK(run_shell(ptxas + " -arch=" + arch + " " + dir + "/m.ptx -o " + dir + "/m.cubin") == 0);
  } else {
    WARN("no " + ptxas + ": the PTX was not assembled");
  }
  if (!have_cc()) {
    WARN("no `cc`: the CUDA host stub was not linked");
    fs::remove_all(dir);
    return;
  }
  // The host stub links without CUDA and runs against a fake libcuda.so.1
  // that logs what the stub asks of the driver. FAKE_CUDA_CONTEXT gives the
  // thread a current context; FAKE_CUDA_FAIL_LAUNCH=N fails the N-th launch;
  // built with -DNO_UNLOAD it lacks cuModuleUnload (an incomplete driver).
  write_file(dir + "/m.o", out.object);
  write_file(dir + "/fake_cuda.c", R"(
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int launches;
int cuInit(unsigned flags) { printf("init %u\n", flags); return 0; }
int cuCtxGetCurrent(void **ctx) { *ctx = getenv("FAKE_CUDA_CONTEXT") ? (void *)7 : 0; return 0; }
int cuPointerGetAttribute(void **data, int attribute, uint64_t ptr) {
  *data = (void *)1; printf("borrow %d %p\n", attribute, (void *)ptr); return 0;
}
int cuCtxPushCurrent_v2(void *ctx) { printf("push %p\n", ctx); return 0; }
int cuCtxPopCurrent_v2(void **ctx) { printf("pop\n"); return 0; }
int cuModuleLoadData(void **module, const char *ptx) {
  FILE *f = fopen("loaded.ptx", "w");
  fputs(ptx, f);
  fclose(f);
  *module = (void *)2; printf("load\n"); return 0;
}
int cuModuleGetFunction(void **f, void *module, const char *name) {
  *f = (void *)name; return module == (void *)2 ? 0 : 999;
}
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **args, void **extra) {
  printf("launch %s %u %u %u %u %u %u %u %p %p %p %p %d\n", (const char *)f, gx, gy, gz, bx, by, bz,
         shared, stream, *(void **)args[0], *(void **)args[1], *(void **)args[2], extra == 0);
  const char *fail = getenv("FAKE_CUDA_FAIL_LAUNCH");
  return fail && atoi(fail) == ++launches ? 999 : 0;
}
int cuStreamSynchronize(void *stream) { printf("sync %p\n", stream); return 0; }
#ifndef NO_UNLOAD
int cuModuleUnload(void *module) { printf("unload %p\n", module); return 0; }
#endif
)");
  write_file(dir + "/app.c", R"(
#include <stdint.h>
#include <stdio.h>
int32_t model_main(void *const *, void *const *, void *, void *);
int32_t model_nothing(void *const *, void *const *, void *, void *);
int main(void) {
  void *in[6] = {(void *)64, (void *)128, (void *)192, (void *)256, (void *)320, (void *)384};
  void *out[3] = {(void *)448, (void *)512, (void *)576};
  void *misaligned[3] = {(void *)448, (void *)520, (void *)576};
  if (model_main(in, 0, 0, 0) != 1) return 1;
  if (model_main(in, misaligned, 0, 0) != 2) return 2;
  if (model_nothing(in, out, 0, 0) != 0) return 3;
  printf("rc=%d\n", model_main(in, out, 0, (void *)0x99));
  return 0;
})");
  REQUIRE(run_shell("cd " + dir + " && mkdir fake incomplete absent && " +
                    "cc -shared -fPIC fake_cuda.c -o fake/libcuda.so.1 && " +
                    "cc -shared -fPIC -DNO_UNLOAD fake_cuda.c -o incomplete/libcuda.so.1 && " +
                    "cc app.c m.o -o app") == 0);
  auto run_app = [&](const std::string &env) {
    REQUIRE(run_shell("cd " + dir + " && rm -f loaded.ptx && env " + env + " ./app > log.txt") == 0);
    std::ifstream log_file(dir + "/log.txt");
    return std::string((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  };
  // Each kernel's PTX name, grid and block, the caller's stream, and the address of each argument.
  const std::string launch_f32 = "launch model_main_k_float32 2 1 1 64 1 1 0 0x99 0x40 0x80 0x1c0 1\n",
                    launch_f64 = "launch model_main_k_float64 2 1 1 64 1 1 0 0x99 0xc0 0x100 0x200 1\n",
                    launch_f16 = "launch model_main_k_float16 2 1 1 64 1 1 0 0x99 0x140 0x180 0x240 1\n",
                    launches = launch_f32 + launch_f64 + launch_f16;
  // No current context: the one owning the first output is borrowed for the call.
  CHECK(run_app("LD_LIBRARY_PATH=fake") ==
        "init 0\nborrow 1 0x1c0\npush 0x1\nload\n" + launches + "sync 0x99\nunload 0x2\npop\nrc=0\n");
  {
    std::ifstream loaded(dir + "/loaded.ptx");
    CHECK(std::string((std::istreambuf_iterator<char>(loaded)), std::istreambuf_iterator<char>()) == out.ptx);
  }
  // The caller's current context is used as it is.
  CHECK(run_app("LD_LIBRARY_PATH=fake FAKE_CUDA_CONTEXT=1") ==
        "init 0\nload\n" + launches + "sync 0x99\nunload 0x2\nrc=0\n");
  // A failed launch: status 4, after waiting for the kernel already launched.
  CHECK(run_app("LD_LIBRARY_PATH=fake FAKE_CUDA_FAIL_LAUNCH=2") ==
        "init 0\nborrow 1 0x1c0\npush 0x1\nload\n" + launch_f32 + launch_f64 +
            "sync 0x99\nunload 0x2\npop\nrc=4\n");
  // A driver that lacks a function needed: status 3, and nothing is called.
  CHECK(run_app("LD_LIBRARY_PATH=incomplete") == "rc=3\n");
  // No driver at all: status 3 (where the machine has no libcuda.so.1 of its own).
  write_file(dir + "/probe.c", R"(
#include <dlfcn.h>
int main(void) { return dlopen("libcuda.so.1", RTLD_NOW) != 0; })");
  if (run_shell("cd " + dir + " && cc probe.c -o probe && LD_LIBRARY_PATH=absent ./probe") == 0)
    CHECK(run_app("LD_LIBRARY_PATH=absent") == "rc=3\n");
  else
    WARN("this machine has a libcuda.so.1: status 3 for a missing driver was not checked");
  fs::remove_all(dir);
}

TEST_CASE("codegen: kernels that differ only in constants share a template, the constants its arguments", "[codegen]") {
  // out[i * stride + j] = a[i * stride + j] * c / (i // divisor + 1), i over `rows` (serial), j over `lanes`
  struct Shape {
    int64_t rows = 6, lanes = 8, stride = 8, divisor = 2;
    double c = 0.5;
  };
  auto kernel = [](const Shape &s) {
    int64_t n = s.rows * s.stride;
    auto a = input("a", DType::Float32, n, 0), out = output("out", DType::Float32, n, 0);
    StmtPtr body = loop(s.rows, ForKind::Serial, [&](LExprPtr i) {
      return loop(s.lanes, ForKind::Vectorized, [&](LExprPtr j) {
        LExprPtr at = binary(BinaryOp::Add, binary(BinaryOp::Mul, i, int_imm(s.stride)), j);
        LExprPtr scale = cast(DType::Float32, binary(BinaryOp::Add, binary(BinaryOp::FloorDiv, i, int_imm(s.divisor)), int_imm(1)));
        return store(out, at, binary(BinaryOp::Div, binary(BinaryOp::Mul, load(a, at), float_imm(s.c, DType::Float32)), scale));
      }, "j");
    });
    return Kernel{"k", {a, out}, body};
  };
  auto templates_of = [&](std::vector<Shape> shapes) {
    LoweredModule m;
    LoweredFunction &fn = m.functions.emplace_back();
    fn.name = "main";
    for (const Shape &s : shapes)
      fn.kernels.push_back(kernel(s));
    return kernel_templates(m);
  };
  Shape base;
  // Equal kernels: one template, no arguments.
  ModuleTemplates same = templates_of({base, base});
  CHECK(same.templates.size() == 1);
  CHECK(same.identical == 1);
  CHECK(same.templates[0].params.count == 0);
  // A serial extent, a row stride and a float constant may differ: one template, three arguments.
  Shape other = base;
  other.rows = 9, other.stride = 12, other.c = 0.25;
  ModuleTemplates shared = templates_of({base, other});
  REQUIRE(shared.templates.size() == 1);
  CHECK(shared.shared == 1);
  CHECK(shared.identical == 0);
  const KernelParams &p = shared.templates[0].params;
  CHECK(p.count == 3);
  CHECK(p.extents.size() == 1);
  CHECK(p.constants.size() == 2);
  REQUIRE(shared.args[0].size() == 2);
  auto has = [](const KernelArgs &args, int64_t v) { return std::find(args.begin(), args.end(), v) != args.end(); };
  int64_t quarter;
  double q = 0.25;
  std::memcpy(&quarter, &q, sizeof q);
  CHECK(has(shared.args[0][1], 9));
  CHECK(has(shared.args[0][1], 12));
  CHECK(has(shared.args[0][1], quarter)); // a float as the bits of a double
  CHECK(has(shared.args[0][0], 6));
  // What codegen's shape depends on may not: a lane-wise vector loop's extent, a lane's
  // stride, an integer divisor. Each makes a template of its own.
  for (auto change : std::vector<std::function<void(Shape &)>>{[](Shape &s) { s.lanes = 4; },
                                                              [](Shape &s) { s.divisor = 3; }}) {
    Shape s = base;
    change(s);
    CHECK(templates_of({base, s}).templates.size() == 2);
  }
  // Exact keys: names never count, constants bit for bit.
  KernelKey k = structural_key(kernel(base));
  CHECK(structural_key(kernel(other)) != k);
  Shape tiny = base;
  tiny.c = std::nextafter(0.5, 1.0);
  CHECK(structural_key(kernel(tiny)) != k);
  Shape negative_zero = base, zero = base;
  negative_zero.c = -0.0, zero.c = 0.0;
  CHECK(structural_key(kernel(negative_zero)) != structural_key(kernel(zero)));
}

TEST_CASE("codegen: a lane's small stride stays a constant of its template", "[codegen]") {
  // out[j * stride] = a[j * stride]: a lane's stride up to kMaxLoadStride decides how codegen
  // reads (Lanes.h); above it, every stride is read alike and may be a template's argument.
  auto kernel = [](int64_t stride) {
    auto a = input("a", DType::Float32, 8 * stride, 0), out = output("out", DType::Float32, 8 * stride, 0);
    StmtPtr body = loop(8, ForKind::Vectorized, [&](LExprPtr j) {
      LExprPtr at = binary(BinaryOp::Mul, j, int_imm(stride));
      return store(out, at, load(a, at));
    });
    return Kernel{"k", {a, out}, body};
  };
  LoweredModule m;
  LoweredFunction &fn = m.functions.emplace_back();
  fn.name = "main";
  auto templates = [&](std::vector<int64_t> strides) {
    fn.kernels.clear();
    for (int64_t s : strides)
      fn.kernels.push_back(kernel(s));
    return kernel_templates(m);
  };
  CHECK(templates({1, 3}).templates.size() == 2);
  CHECK(templates({1, 40}).templates.size() == 2);
  CHECK(templates({3, 40}).templates.size() == 2);
  CHECK(templates({kMaxLoadStride, kMaxLoadStride + 1}).templates.size() == 2);
  CHECK(templates({-40, 40}).templates.size() == 2);
  ModuleTemplates large = templates({kMaxLoadStride + 1, 40, 352});
  REQUIRE(large.templates.size() == 1);
  CHECK(large.templates[0].params.count == 1); // the stride, read from each call's table
  CHECK(large.args[0][2] == KernelArgs{352});
}

TEST_CASE("codegen: a time loop repeats its kernels, live throughout, printed, verified, launched", "[codegen]") {
  // state = 0; for step in [0, 5): state = state / 2 + xs[step]; out = state. The step is an
  // arena word that a kernel before the loop sets and the loop's last kernel advances.
  const int64_t T = 5, n = 4;
  auto xs = input("xs", DType::Float64, T * n, 0);
  auto out = output("out", DType::Float64, n, 0);
  auto step = buffer("step", DType::Int64, 1, BufferScope::Arena, -1);
  auto state = buffer("state", DType::Float64, n, BufferScope::Arena, -1);
  auto zero = int_imm(0);
  LoweredFunction fn;
  fn.name = "main";
  fn.inputs = {xs};
  fn.outputs = {out};
  fn.results = fn.outputs;
  fn.arena = {step, state};
  fn.kernels.push_back(Kernel{"start", {step, state}, seq({store(step, zero, zero), loop(n, ForKind::Parallel, [&](LExprPtr i) {
                                                             return store(state, i, float_imm(0, DType::Float64));
                                                           })})});
  fn.kernels.push_back(Kernel{"accumulate", {state, xs, step}, loop(n, ForKind::Parallel, [&](LExprPtr i) {
                                LExprPtr x = load(xs, binary(BinaryOp::Add, binary(BinaryOp::Mul, load(step, zero),
                                                                                   int_imm(n)), i));
                                return store(state, i, binary(BinaryOp::Add, binary(BinaryOp::Mul, load(state, i),
                                                                                    float_imm(0.5, DType::Float64)), x));
                              })});
  fn.kernels.push_back(Kernel{"advance", {step}, store(step, zero, binary(BinaryOp::Add, load(step, zero), int_imm(1)))});
  fn.kernels.push_back(Kernel{"finish", {state, out}, loop(n, ForKind::Parallel, [&](LExprPtr i) {
                                return store(out, i, load(state, i));
                              })});
  fn.time_loops = {TimeLoop{1, 3, T}};

  // The input read only inside the loop is live for all of it; the plan keeps the step and the
  // state apart, and the verifier accepts it.
  auto life = buffer_lifetimes(fn);
  CHECK(life[xs.get()] == std::pair<size_t, size_t>{1, 2});
  CHECK(life[step.get()] == std::pair<size_t, size_t>{0, 2});
  plan_memory(fn);
  CHECK(step->offset != state->offset);
  verify(fn, {true, true}, "a test");

  LoweredModule m;
  m.functions.push_back(fn);
  std::string printed = print_loops(m);
  INFO(printed);
  CHECK(printed.find("  kernel start(") != std::string::npos);
  CHECK(printed.find("  for (step, 0, 5) time {\n    kernel accumulate(") != std::string::npos);
  CHECK(printed.find("    kernel advance(") != std::string::npos);
  CHECK(printed.find("  }\n  kernel finish(") != std::string::npos);

  auto session = jit(m);
  Aligned<double> in{size_t(T * n)}, result{size_t(n)};
  Aligned<char> workspace{size_t(fn.workspace_bytes)};
  for (int64_t i = 0; i < T * n; ++i)
    in[size_t(i)] = double(i % 7) - 2.5;
  REQUIRE(call(*session, {in.data()}, {result.data()}, workspace.data()) == 0);
  for (int64_t i = 0; i < n; ++i) {
    double want = 0;
    for (int64_t t = 0; t < T; ++t)
      want = want * 0.5 + in[size_t(t * n + i)];
    CHECK(result[size_t(i)] == want);
  }

  // Loops that are empty, out of range, never run, or overlap without nesting are refused.
  auto refused = [&](std::vector<TimeLoop> loops, const std::string &why) {
    LoweredFunction bad = fn;
    bad.time_loops = std::move(loops);
    CHECK_THROWS_WITH(verify(bad, {}, "p"), Catch::Matchers::Contains(why));
  };
  refused({{2, 2, 3}}, "is empty or out of range");
  refused({{3, 5, 3}}, "is empty or out of range");
  refused({{1, 3, 0}}, "runs 0 times");
  refused({{0, 2, 2}, {1, 3, 2}}, "overlap without one holding the other");
  LoweredFunction nested = fn;
  nested.time_loops = {{1, 3, 2}, {0, 4, 3}, {1, 2, 2}};
  verify(nested, {}, "p");

  // The CUDA host stub repeats the launches of nested loops: run against a fake libcuda.so.1
  // that prints each launched kernel (runtime/test_cuda.c checks the launcher itself).
  LoweredModule gpu;
  gpu.functions.push_back(nested);
  CodegenRequest what;
  what.object = true;
  std::optional<CodegenOutput> generated = cuda_code(gpu, what);
  if (!generated)
    return;
  const CodegenOutput &code = *generated;
  if (!have_cc()) {
    WARN("no `cc`: the CUDA host stub was not linked");
    return;
  }
  std::string dir = temp_dir();
  write_file(dir + "/m.o", code.object);
  write_file(dir + "/fake_cuda.c", R"(
#include <stdint.h>
#include <stdio.h>
int cuInit(unsigned flags) { return 0; }
int cuCtxGetCurrent(void **ctx) { *ctx = (void *)7; return 0; }
int cuPointerGetAttribute(void **data, int attribute, uint64_t ptr) { return 0; }
int cuCtxPushCurrent_v2(void *ctx) { return 0; }
int cuCtxPopCurrent_v2(void **ctx) { return 0; }
int cuModuleLoadData(void **module, const char *ptx) { *module = (void *)2; return 0; }
int cuModuleGetFunction(void **f, void *module, const char *name) { *f = (void *)name; return 0; }
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shared, void *stream, void **args, void **extra) {
  printf("%s ", (const char *)f + 11); /* past "model_main_" */
  return 0;
}
int cuStreamSynchronize(void *stream) { return 0; }
int cuModuleUnload(void *module) { return 0; }
int cuMemsetD8_v2(uint64_t address, unsigned char value, size_t bytes) { return 0; }
int cuMemcpyDtoH_v2(void *destination, uint64_t source, size_t bytes) { return 0; }
)");
  write_file(dir + "/app.c", R"(
#include <stdint.h>
#include <stdio.h>
int32_t model_main(void *const *, void *const *, void *, void *);
int main(void) {
  void *in[1] = {(void *)64}, *out[1] = {(void *)128};
  printf("rc=%d\n", model_main(in, out, (void *)192, 0));
  return 0;
})");
  REQUIRE(run_shell("cd " + dir + " && mkdir fake && cc -shared -fPIC fake_cuda.c -o fake/libcuda.so.1 && " +
                    "cc app.c m.o -o app && LD_LIBRARY_PATH=fake ./app > log.txt") == 0);
  std::ifstream log_file(dir + "/log.txt");
  std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  // Loops {0, 4) x3 around {1, 3) x2 around {1, 2) x2.
  std::string once = "start accumulate accumulate advance accumulate accumulate advance finish ";
  CHECK(log == once + once + once + "rc=0\n");
  fs::remove_all(dir);
}

TEST_CASE("GPU binding keeps a time loop around the launches its kernels split into", "[codegen]") {
  // Kernel 1 has two phases (a zero fill, then writes): two launches, both inside the loop.
  const int64_t n = 300;
  auto x = input("x", DType::Float32, n, 0);
  auto y = output("y", DType::Float32, n, 0);
  auto fill = [&](const BufferPtr &b, LExprPtr v) {
    return loop(n, ForKind::Spatial, [&](LExprPtr i) { return store(b, i, v); });
  };
  LoweredFunction fn;
  fn.name = "main";
  fn.inputs = {x};
  fn.outputs = {y};
  fn.results = fn.outputs;
  fn.kernels.push_back(Kernel{"a", {y}, fill(y, float_imm(1, DType::Float32))});
  fn.kernels.push_back(Kernel{"b", {x, y}, seq({fill(y, float_imm(0, DType::Float32)),
                                               loop(n, ForKind::Spatial, [&](LExprPtr i) {
                                                 return store(y, i, load(x, i));
                                               })})});
  fn.kernels.push_back(Kernel{"c", {y}, fill(y, float_imm(2, DType::Float32))});
  fn.time_loops = {TimeLoop{1, 2, 4}, TimeLoop{0, 3, 2}};
  Target gpu;
  gpu.kind = TargetKind::CUDA;
  bind_gpu_threads(fn, gpu);
  REQUIRE(fn.kernels.size() == 4);
  CHECK(fn.kernels[1].name == "b_0");
  CHECK(fn.kernels[2].name == "b_1");
  CHECK((fn.time_loops[0].first == 1 && fn.time_loops[0].last == 3 && fn.time_loops[0].extent == 4));
  CHECK((fn.time_loops[1].first == 0 && fn.time_loops[1].last == 4 && fn.time_loops[1].extent == 2));
  verify(fn, {true, false}, "GPU binding");
}

namespace {

/// A block-level GPU kernel using every GPU construct of the loop IR: 3
/// blocks of 64 threads; each thread puts x[b*64+t] in shared memory, and
/// after a barrier stores rev[b*64+t] = its block's element 63-t; then each
/// warp sums its 32 values by five rotating shuffles (every lane ends with the
/// warp's total), lane 0 leaves it in shared memory, and after a barrier
/// thread 0 stores the block's total.
LoweredModule block_sum_module(DType dt, bool first_barrier = true) {
  const int64_t blocks = 3, threads = 64, warps = 2;
  auto x = input("x", dt, blocks * threads, 0);
  auto rev = output("rev", dt, blocks * threads, 0), total = output("total", dt, blocks, 1);
  auto tile = std::make_shared<Buffer>(Buffer{"tile", dt, {threads}, BufferScope::Shared});
  auto partial = std::make_shared<Buffer>(Buffer{"partial", dt, {warps}, BufferScope::Shared});
  auto acc = std::make_shared<Buffer>(Buffer{"acc", dt, {1}, BufferScope::Local});
  auto b = std::make_shared<LVar>(LVar{"b"}), t = std::make_shared<LVar>(LVar{"t"});
  LExprPtr bv = var_ref(b), tv = var_ref(t), zero = int_imm(0);
  LExprPtr flat = binary(BinaryOp::Add, binary(BinaryOp::Mul, bv, int_imm(threads)), tv);
  std::vector<StmtPtr> body = {
      store(tile, tv, load(x, flat)), first_barrier ? barrier() : seq({}),
      store(rev, flat, load(tile, binary(BinaryOp::Sub, int_imm(threads - 1), tv))),
      store(acc, zero, load(tile, tv))};
  for (int64_t off : {16, 8, 4, 2, 1})
    body.push_back(store(acc, zero, binary(BinaryOp::Add, load(acc, zero),
                                           shuffle(load(acc, zero), binary(BinaryOp::Add, tv, int_imm(off))))));
  LExprPtr lane = binary(BinaryOp::FloorMod, tv, int_imm(32)), warp = binary(BinaryOp::FloorDiv, tv, int_imm(32));
  body.push_back(if_then(compare(CompareOp::EQ, lane, zero), store(partial, warp, load(acc, zero))));
  body.push_back(barrier());
  body.push_back(if_then(compare(CompareOp::EQ, tv, zero),
                         store(total, bv, binary(BinaryOp::Add, load(partial, zero), load(partial, int_imm(1))))));
  StmtPtr kernel = for_loop(
      b, blocks, ForKind::BlockIdx,
      alloc(tile, alloc(partial, for_loop(t, threads, ForKind::ThreadIdx, alloc(acc, seq(std::move(body)))))));
  LoweredModule m = single_kernel({x}, {rev, total}, kernel);
  m.functions[0].kernels[0].grid = Dim3{blocks};
  m.functions[0].kernels[0].block = Dim3{threads};
  return m;
}

} // namespace

TEST_CASE("codegen: a GPU kernel's shared memory, barriers and shuffles, simulated on the CPU and as PTX",
          "[codegen][cuda]") {
  LoweredModule m = block_sum_module(DType::Float64);
  LoweredFunction &fn = m.functions[0];
  REQUIRE_NOTHROW(verify(fn, {true, true}, "test"));
  LoweredModule gpu = m;
  Target target;
  target.kind = TargetKind::CUDA;
  simulate_gpu(fn, target);
  REQUIRE_NOTHROW(verify(fn, {true, true}, "GPU simulation"));
  CHECK(fn.kernels[0].grid == Dim3{});
  CHECK(fn.kernels[0].body->for_kind == ForKind::Parallel); // the blocks
  auto session = jit(m);
  Aligned<double> x(192), rev(192), total(3);
  for (int64_t i = 0; i < 192; ++i)
    x[i] = double((i * 37) % 101) - 50.0; // exact sums in float64
  Aligned<int64_t> workspace(size_t(fn.workspace_bytes / 8)); // the race check's status word
  REQUIRE(call(*session, {x.data()}, {rev.data(), total.data()}, workspace.data()) == 0);
  for (int64_t blk = 0; blk < 3; ++blk) {
    double want = 0;
    for (int64_t i = 0; i < 64; ++i) {
      want += x[blk * 64 + i];
      CHECK(rev[blk * 64 + i] == x[blk * 64 + 63 - i]);
    }
    CHECK(total[blk] == want);
  }

  CodegenRequest what;
  what.ptx = true;
  std::optional<CodegenOutput> generated = cuda_code(gpu, what);
  if (!generated)
    return;
  const CodegenOutput &out = *generated;
  CHECK(out.ptx.find(".shared .align 16 .b8") != std::string::npos);
  CHECK(out.ptx.find("bar.sync") != std::string::npos);
  CHECK(out.ptx.find("shfl.sync.idx.b32") != std::string::npos);
  const std::string ptxas = "/usr/local/cuda/bin/ptxas";
  if (fs::exists(ptxas)) {
    std::string dir = temp_dir();
    write_file(dir + "/m.ptx", out.ptx);
    CHECK(run_shell(ptxas + " -arch=sm_90 " + dir + "/m.ptx -o " + dir + "/m.cubin") == 0);
    fs::remove_all(dir);
  }
}

TEST_CASE("codegen: a GPU thread's lane-wise loop is one vector access where its index is 16-byte aligned",
          "[codegen][cuda]") {
  // Each of 64 threads copies 4 adjacent floats: at 4t (aligned: one
  // ld.global.v4 and st.global.v4), or at 4t + offset (not: never a
  // 16-byte access, which would fault on a misaligned address).
  for (int64_t offset : {0, 1, 2}) {
    auto x = input("x", DType::Float32, 260, 0), y = output("y", DType::Float32, 260, 0);
    auto b = std::make_shared<LVar>(LVar{"b"}), t = std::make_shared<LVar>(LVar{"t"}), l = std::make_shared<LVar>(LVar{"l"});
    LExprPtr at = binary(BinaryOp::Add, binary(BinaryOp::Add, binary(BinaryOp::Mul, var_ref(t), int_imm(4)), int_imm(offset)),
                         var_ref(l));
    StmtPtr lanes = for_loop(l, 4, ForKind::Vectorized, store(y, at, load(x, at)));
    REQUIRE(lane_wise(*lanes));
    LoweredModule m = single_kernel({x}, {y}, for_loop(b, 1, ForKind::BlockIdx, for_loop(t, 64, ForKind::ThreadIdx, lanes)));
    m.functions[0].kernels[0].block = Dim3{64};
    REQUIRE_NOTHROW(verify(m.functions[0], {true, true}, "test"));
    CodegenRequest what;
    what.ptx = true;
    std::optional<CodegenOutput> generated = cuda_code(m, what);
    if (!generated)
      return;
    INFO("offset " << offset);
    const std::string &ptx = generated->ptx;
    CHECK((ptx.find("ld.global.nc.v4.f32") != std::string::npos || ptx.find("ld.global.v4.f32") != std::string::npos) ==
          (offset == 0));
    CHECK((ptx.find("st.global.v4.f32") != std::string::npos) == (offset == 0));
    CHECK((ptx.find(".v2.f32") != std::string::npos) == (offset == 2)); // 8-byte aligned halves
  }
}

TEST_CASE("codegen: a grid and block of several dimensions, simulated through the linear thread index and as PTX",
          "[codegen][cuda]") {
  // A grid of 3 x 2 blocks of 8 x 4 threads (one warp); thread (tx, ty) of
  // block (bx, by) has lane ty * 8 + tx of its warp and stores its value of
  // x as the next lane sees it: out[g] = x[warp base + (lane + 1) mod 32].
  const int64_t gx = 3, gy = 2, tx_n = 8, ty_n = 4, n = gx * gy * tx_n * ty_n;
  auto x = input("x", DType::Float64, n, 0), out = output("out", DType::Float64, n, 0);
  auto by = std::make_shared<LVar>(LVar{"by"}), bx = std::make_shared<LVar>(LVar{"bx"});
  auto ty = std::make_shared<LVar>(LVar{"ty"}), tx = std::make_shared<LVar>(LVar{"tx"});
  auto add2 = [](LExprPtr a, LExprPtr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); };
  auto mul2 = [](LExprPtr a, int64_t c) { return binary(BinaryOp::Mul, std::move(a), int_imm(c)); };
  LExprPtr lane = add2(mul2(var_ref(ty), tx_n), var_ref(tx));
  LExprPtr g = add2(mul2(add2(mul2(var_ref(by), gx), var_ref(bx)), tx_n * ty_n), lane);
  StmtPtr body = store(out, g, shuffle(load(x, g), add2(lane, int_imm(1))));
  StmtPtr kernel = for_loop(by, gy, ForKind::BlockIdx,
                            for_loop(bx, gx, ForKind::BlockIdx,
                                     for_loop(ty, ty_n, ForKind::ThreadIdx, for_loop(tx, tx_n, ForKind::ThreadIdx, body))));
  LoweredModule m = single_kernel({x}, {out}, kernel);
  LoweredFunction &fn = m.functions[0];
  fn.kernels[0].grid = Dim3{gx, gy};
  fn.kernels[0].block = Dim3{tx_n, ty_n};
  REQUIRE_NOTHROW(verify(fn, {true, true}, "test"));
  CHECK(bound_dim(*kernel) == 1);
  CHECK(bound_extents(*kernel) == Dim3{gx, gy});
  CHECK(print_loops(m).find("launch(grid=(3, 2), block=(8, 4))") != std::string::npos);
  CHECK(print_loops(m).find("for (ty, 0, 4) threadIdx.y {") != std::string::npos);
  LoweredModule gpu = m;
  Target target;
  target.kind = TargetKind::CUDA;
  simulate_gpu(fn, target);
  REQUIRE_NOTHROW(verify(fn, {true, true}, "GPU simulation"));
  auto session = jit(m);
  Aligned<double> xs{size_t(n)}, result{size_t(n)};
  for (int64_t i = 0; i < n; ++i)
    xs[i] = double(i * i % 97);
  Aligned<int64_t> workspace{size_t(std::max<int64_t>(fn.workspace_bytes, 64) / 8)};
  REQUIRE(call(*session, {xs.data()}, {result.data()}, workspace.data()) == 0);
  for (int64_t i = 0; i < n; ++i)
    CHECK(result[i] == xs[i / 32 * 32 + (i % 32 + 1) % 32]);

  CodegenRequest what;
  what.ptx = true;
  std::optional<CodegenOutput> generated = cuda_code(gpu, what);
  if (!generated)
    return;
  for (const char *reg : {"%ctaid.x", "%ctaid.y", "%tid.x", "%tid.y"})
    CHECK(generated->ptx.find(reg) != std::string::npos);
  CHECK(generated->ptx.find(".maxntid 8, 4, 1") != std::string::npos);
}

TEST_CASE("verify: launch dimensions are chains of at most three loops", "[verify][cuda]") {
  auto x = input("x", DType::Float32, 64, 0), y = output("y", DType::Float32, 64, 0);
  std::vector<LVarPtr> v;
  for (int i = 0; i < 6; ++i)
    v.push_back(std::make_shared<LVar>(LVar{"v" + std::to_string(i)}));
  StmtPtr copy = store(y, int_imm(0), load(x, int_imm(0)));
  auto nest = [&](std::vector<ForKind> kinds, StmtPtr inner) {
    for (size_t i = kinds.size(); i-- > 0;)
      inner = for_loop(v[i], 2, kinds[i], inner);
    return single_kernel({x}, {y}, inner);
  };
  using K = ForKind;
  auto ok = [&](const LoweredModule &m) { CHECK_NOTHROW(verify(m.functions[0], {true, true}, "test")); };
  auto rejects = [&](const LoweredModule &m, const std::string &why) {
    CHECK_THROWS_WITH(verify(m.functions[0], {true, true}, "test"), Catch::Matchers::Contains(why));
  };
  ok(nest({K::BlockIdx, K::BlockIdx, K::BlockIdx, K::ThreadIdx, K::ThreadIdx, K::ThreadIdx}, seq({copy, barrier()})));
  rejects(nest({K::BlockIdx, K::BlockIdx, K::BlockIdx, K::BlockIdx, K::ThreadIdx}, copy), "more than 3 dimensions");
  rejects(nest({K::BlockIdx, K::ThreadIdx, K::ThreadIdx, K::ThreadIdx, K::ThreadIdx}, copy), "more than 3 dimensions");
  rejects(nest({K::BlockIdx, K::ThreadIdx, K::BlockIdx}, copy), "inside another block or thread loop");
  rejects(nest({K::BlockIdx, K::Serial, K::BlockIdx, K::ThreadIdx}, copy), "outside its thread loop");
  // A barrier under a condition on the second thread dimension diverges too.
  rejects(nest({K::BlockIdx, K::ThreadIdx, K::ThreadIdx},
               if_then(compare(CompareOp::LT, var_ref(v[1]), int_imm(1)), barrier())),
          "barrier under a condition");
}

TEST_CASE("verify: a barrier or shuffle every thread does not reach alike, and misplaced GPU buffers",
          "[verify][cuda]") {
  auto x = input("x", DType::Float32, 64, 0), y = output("y", DType::Float32, 64, 0);
  auto b = std::make_shared<LVar>(LVar{"b"}), t = std::make_shared<LVar>(LVar{"t"});
  auto kernel = [&](StmtPtr per_thread, BufferPtr shared = nullptr) {
    StmtPtr threads = for_loop(t, 64, ForKind::ThreadIdx, std::move(per_thread));
    LoweredModule m = single_kernel({x}, {y}, for_loop(b, 1, ForKind::BlockIdx, shared ? alloc(shared, threads) : threads));
    return m;
  };
  LExprPtr tv = var_ref(t);
  StmtPtr copy = store(y, tv, load(x, tv));
  auto rejects = [&](const LoweredModule &m, const std::string &why) {
    CHECK_THROWS_WITH(verify(m.functions[0], {true, true}, "test"), Catch::Matchers::Contains(why));
  };
  CHECK_NOTHROW(verify(kernel(seq({copy, barrier(), copy})).functions[0], {true, true}, "test"));
  rejects(kernel(if_then(compare(CompareOp::LT, tv, int_imm(3)), barrier())), "barrier under a condition");
  rejects(kernel(if_then(compare(CompareOp::LT, load(x, tv), float_imm(0, DType::Float32)), barrier())),
          "barrier under a condition");
  CHECK_NOTHROW(verify(kernel(store(y, tv, shuffle(load(x, tv), int_imm(0)))).functions[0], {true, true}, "test"));
  rejects(kernel(if_then(compare(CompareOp::GT, tv, int_imm(0)), store(y, tv, shuffle(load(x, tv), int_imm(0))))),
          "shuffle under a condition");
  rejects(kernel(store(y, shuffle(tv, int_imm(0)), load(x, tv))), "index with a shuffle");
  auto shared = std::make_shared<Buffer>(Buffer{"s", DType::Float32, {64}, BufferScope::Shared});
  rejects(kernel(alloc(shared, copy)), "inside its thread loop");
  auto local = std::make_shared<Buffer>(Buffer{"l", DType::Float32, {64}, BufferScope::Local});
  rejects(kernel(copy, local), "outside its thread loop");
  rejects(single_kernel({x}, {y}, seq({barrier()})), "outside a GPU thread loop");
  // A tensor-core product: every thread of the warp alike, into a float32 local buffer.
  auto frags = std::make_shared<Buffer>(Buffer{"d", DType::Float32, {4}, BufferScope::Local});
  std::vector<LExprPtr> ten(kMmaInputs, load(x, tv));
  StmtPtr product = alloc(frags, mma_tf32(frags, int_imm(0), ten));
  CHECK_NOTHROW(verify(kernel(product).functions[0], {true, true}, "test"));
  rejects(kernel(if_then(compare(CompareOp::LT, tv, int_imm(8)), product)), "tensor-core product under a condition");
  rejects(kernel(mma_tf32(y, int_imm(0), ten)), "which is not a float32 local buffer");
  rejects(kernel(alloc(frags, mma_tf32(frags, int_imm(1), ten))), "tensor-core product of d (4 elements) at indices 4..4");
}

TEST_CASE("codegen: the GPU simulation reports threads racing on shared memory", "[codegen][cuda]") {
  Target target;
  target.kind = TargetKind::CUDA;
  for (bool barrier_there : {true, false}) {
    LoweredModule m = block_sum_module(DType::Float64, barrier_there);
    LoweredFunction &fn = m.functions[0];
    std::vector<std::string> sites = simulate_gpu(fn, target);
    REQUIRE_NOTHROW(verify(fn, {true, true}, "GPU simulation"));
    REQUIRE(fn.status);
    REQUIRE(sites.size() == 2); // tile and partial
    auto session = jit(m);
    Aligned<double> x(192), rev(192), total(3);
    Aligned<int64_t> workspace(size_t(fn.workspace_bytes / 8));
    for (int64_t i = 0; i < 192; ++i)
      x[i] = double(i);
    int32_t status = call(*session, {x.data()}, {rev.data(), total.data()}, workspace.data());
    const int64_t *words = workspace.data() + fn.status->offset / 8;
    if (barrier_there) {
      CHECK(status == 0);
    } else { // thread 31 reads tile[32] in the interval in which thread 32 writes it
      CHECK(status == kStatusGpuRace);
      CHECK(sites[size_t(words[1])] == "shared buffer tile of kernel k");
      CHECK(words[2] == 32);
      CHECK(words[3] == 32);
    }
  }
}
