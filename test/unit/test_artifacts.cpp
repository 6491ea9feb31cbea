//===- test_artifacts.cpp - .npy files, atomic writes, C header, manifest -===//
//
// The .npy tests use bytes exactly as numpy.save writes them (copied from
// numpy 1.24 by hand; the tests do not run Python). The header tests compile
// it with `cc` as C99 and C++, and link it against a real object file.
//
//===----------------------------------------------------------------------===//
#include "gradc/codegen/Codegen.h"
#include "gradc/driver/Artifacts.h"
#include "gradc/support/Diagnostics.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>

using namespace gradc;
namespace fs = std::filesystem;

namespace {

/// A fresh directory, removed with everything in it at the end of the test.
class TempDir {
public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "gradc_artifacts_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string &name) const { return (fs::path(path_) / name).string(); }
  const std::string &path() const { return path_; }

private:
  std::string path_;
};

void write_bytes(const std::string &path, const std::string &bytes) { std::ofstream(path, std::ios::binary) << bytes; }

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// The numpy.save preamble and header for a header dict: magic, version 1.0,
/// length, the dict padded with spaces and a newline to 128 bytes in all
/// (what numpy writes for every header below).
std::string npy_v1(const std::string &dict) {
  std::string header = dict + std::string(117 - dict.size(), ' ') + "\n";
  return std::string("\x93NUMPY\x01\x00\x76\x00", 10) + header;
}

/// np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)), byte for byte.
const std::string kArange6 = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') +
                             "\n" +
                             std::string("\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40"
                                         "\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40",
                                         24);

/// The message of the FileError that reading `bytes` as a .npy file throws.
std::string npy_error(const std::string &bytes) {
  TempDir dir;
  std::string path = dir.file("x.npy");
  write_bytes(path, bytes);
  try {
    read_npy(path);
  } catch (const FileError &e) {
    std::string message = e.what();
    size_t at = message.find(path);
    if (at != std::string::npos)
      message.replace(at, path.size(), "x.npy");
    return message;
  }
  return "(no error)";
}

NpyArray read_bytes_as_npy(const std::string &bytes) {
  TempDir dir;
  write_bytes(dir.file("x.npy"), bytes);
  return read_npy(dir.file("x.npy"));
}

bool have_cc() { return std::system("cc --version >/dev/null 2>&1") == 0; }
bool have_cxx() { return std::system("c++ --version >/dev/null 2>&1") == 0; }

/// Exit status of a shell command.
int run_shell(const std::string &command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

BufferPtr buffer(const std::string &name, DType dt, Shape shape, BufferScope scope, int index) {
  auto b = std::make_shared<Buffer>();
  b->name = name;
  b->dtype = dt;
  b->shape = std::move(shape);
  b->scope = scope;
  b->io_index = index;
  return b;
}

/// @main(%x: (2, 3) f32, %t: (2,) i64, %h: () f16, %flag: (4,) bool, %int: (3,) f64,
///       %X: (1,) i32, %workspace: (2,) f32) -> ((2,) f32, () f64), and a
/// gradient @main_adjoint(%x) -> (2, 3) f32 with one intermediate and two
/// kernels. The names exercise the header's renaming; nothing is computed.
std::pair<LoweredModule, std::vector<FunctionReport>> sample_module() {
  LoweredModule m;
  std::vector<FunctionReport> reports;

  LoweredFunction main;
  main.name = "main";
  struct Param {
    const char *name;
    DType dtype;
    Shape shape;
  };
  std::vector<Param> params = {{"x", DType::Float32, {2, 3}},     {"t", DType::Int64, {2}},
                               {"h", DType::Float16, {}},         {"flag", DType::Bool, {4}},
                               {"int", DType::Float64, {3}},      {"X", DType::Int32, {1}},
                               {"workspace", DType::Float32, {2}}};
  FunctionReport main_report;
  main_report.name = "main";
  for (size_t i = 0; i < params.size(); ++i) {
    main.inputs.push_back(buffer(params[i].name, params[i].dtype, params[i].shape, BufferScope::Input, int(i)));
    main_report.param_names.push_back(params[i].name);
  }
  main.outputs = {buffer("output_0", DType::Float32, {2}, BufferScope::Output, 0),
                  buffer("output_1", DType::Float64, {}, BufferScope::Output, 1)};
  main.results = main.outputs;
  Kernel k;
  k.name = "fused_add";
  k.buffers = {main.inputs[0], main.outputs[0]};
  k.grid = Dim3{4};
  k.block = Dim3{128};
  main.kernels.push_back(k);
  main_report.flops = 12;
  main_report.peak_before_remat = main_report.peak_after_remat = 0;
  m.functions.push_back(main);
  reports.push_back(main_report);

  LoweredFunction adj;
  adj.name = "main_adjoint";
  adj.inputs = {buffer("x", DType::Float32, {2, 3}, BufferScope::Input, 0)};
  adj.outputs = {buffer("output_0", DType::Float32, {2, 3}, BufferScope::Output, 0)};
  adj.results = adj.outputs;
  BufferPtr tmp = buffer("t0", DType::Float32, {2, 3}, BufferScope::Arena, -1);
  tmp->offset = 0;
  adj.arena = {tmp};
  adj.workspace_bytes = 64;
  Kernel k1, k2;
  k1.name = "fused_exp";
  k1.buffers = {adj.inputs[0], tmp};
  k2.name = "fused_mul";
  k2.buffers = {tmp, adj.outputs[0]};
  adj.kernels = {k1, k2};
  FunctionReport adj_report;
  adj_report.name = "main_adjoint";
  adj_report.param_names = {"x"};
  adj_report.flops = 36;
  adj_report.peak_before_remat = 128;
  adj_report.peak_after_remat = 64;
  adj_report.remat_segments = 1;
  adj_report.remat_recomputed = 2;
  adj_report.attrs.role = FunctionRole::Adjoint;
  adj_report.attrs.primal = "main";
  m.functions.push_back(adj);
  reports.push_back(adj_report);
  return {m, reports};
}

/// A C file that uses every name the sample module's header should declare,
/// with the types it should have: a wrong field type is a -Werror failure.
const char *kHeaderUser = R"(#include "mlp.h"
#include "mlp.h" /* the include guard works */

static const int64_t x_shape[] = MLP_MAIN_X_SHAPE;
static float x_data[MLP_MAIN_X_DIM0][MLP_MAIN_X_DIM1];
static int64_t t_data[MLP_MAIN_T_SIZE];
static uint16_t h_data[MLP_MAIN_H_SIZE + MLP_MAIN_H_RANK];
static uint8_t flag_data[MLP_MAIN_FLAG_SIZE];
static double int_data[MLP_MAIN_P_INT_SIZE];
static int32_t X_data[MLP_MAIN_X_2_SIZE];
static float ws_data[MLP_MAIN_WORKSPACE_2_SIZE];
static float out0[MLP_MAIN_OUTPUT_0_SIZE];
static double out1[MLP_MAIN_OUTPUT_1_BYTES / sizeof(double)];

int call_main(void *workspace, CALL_EXTRA_PARAM) {
  struct mlp_main_inputs in;
  struct mlp_main_outputs out;
  struct mlp_main_adjoint_inputs adj_in;
  struct mlp_main_adjoint_outputs adj_out;
  in.x = &x_data[0][0];
  in.t = t_data;
  in.h = h_data;
  in.flag = flag_data;
  in.p_int = int_data;
  in.X_2 = X_data;
  in.workspace_2 = ws_data;
  out.output_0 = out0;
  out.output_1 = out1;
  adj_in.x = &x_data[0][0];
  adj_out.output_0 = &x_data[0][0];
  if (MLP_ALIGNMENT != 64 || MLP_MAIN_ADJOINT_WORKSPACE_SIZE != 64 || x_shape[1] != 3 ||
      MLP_MAIN_X_RANK != 2 || MLP_MAIN_X_SIZE != 6 || MLP_MAIN_X_BYTES != 24)
    return -1;
  if (mlp_main(&in, &out, workspace CALL_EXTRA_ARG) != 0)
    return mlp_strerror(1)[0];
  return mlp_main_adjoint(&adj_in, &adj_out, workspace CALL_EXTRA_ARG);
}
)";

/// Compiles kHeaderUser against `header` as strict C99 and as C++17 (when
/// `c++` exists); the CUDA header's entry points take a stream.
void check_header_compiles(const std::string &header, bool cuda) {
  TempDir dir;
  write_bytes(dir.file("mlp.h"), header);
  std::string defines = cuda ? "-D'CALL_EXTRA_PARAM=CUstream stream' -D'CALL_EXTRA_ARG=,stream'"
                             : "-D'CALL_EXTRA_PARAM=int unused' -DCALL_EXTRA_ARG=";
  write_bytes(dir.file("use.c"), kHeaderUser);
  std::string c = "cd " + dir.path() + " && cc -std=c99 -Wall -Wextra -Werror -pedantic " + defines +
                  " -Wno-unused-parameter -c use.c -o use_c.o";
  CHECK(run_shell(c) == 0);
  if (have_cxx()) {
    std::string cxx = "cd " + dir.path() + " && c++ -x c++ -std=c++17 -Wall -Wextra -Werror " + defines +
                      " -Wno-unused-parameter -c use.c -o use_cxx.o";
    CHECK(run_shell(cxx) == 0);
  }
}

} // namespace

// ---------------------------------------------------------------- .npy ----

TEST_CASE("npy: every dtype round-trips, scalars and empty arrays included", "[artifacts]") {
  struct Case {
    DType dtype;
    Shape shape;
  };
  std::vector<Case> cases = {{DType::Float16, {3}},     {DType::Float32, {2, 3}}, {DType::Float64, {}},
                             {DType::Int32, {4, 1, 2}}, {DType::Int64, {5}},      {DType::Bool, {2, 2}},
                             {DType::Float32, {0, 3}},  {DType::Int64, {0}},      {DType::Float64, {1, 1, 1}},
                             {DType::Bool, {}}};
  TempDir dir;
  for (const Case &c : cases) {
    NpyArray a;
    a.dtype = c.dtype;
    a.shape = c.shape;
    size_t bytes = num_elements(c.shape) * dtype_bytes(c.dtype);
    for (size_t i = 0; i < bytes; ++i)
      a.data += c.dtype == DType::Bool ? char(i % 2) : char(i * 37 + 1);
    std::string encoded = encode_npy(a);
    INFO(dtype_name(c.dtype) << " " << shape_str(c.shape));
    // numpy.save aligns the data to 64 bytes.
    CHECK((encoded.size() - bytes) % 64 == 0);
    write_file_atomic(dir.file("a.npy"), encoded);
    NpyArray b = read_npy(dir.file("a.npy"));
    CHECK(b.dtype == a.dtype);
    CHECK(b.shape == a.shape);
    CHECK(b.data == a.data);
  }
}

TEST_CASE("npy: files written by numpy.save are read, and ours are identical", "[artifacts]") {
  NpyArray a = read_bytes_as_npy(kArange6);
  CHECK(a.dtype == DType::Float32);
  CHECK(a.shape == Shape{2, 3});
  REQUIRE(a.data.size() == 24);
  float values[6];
  std::memcpy(values, a.data.data(), 24);
  for (int i = 0; i < 6; ++i)
    CHECK(values[i] == float(i));
  CHECK(encode_npy(a) == kArange6);

  // np.save(f, np.float64(1.5))
  std::string scalar = npy_v1("{'descr': '<f8', 'fortran_order': False, 'shape': (), }") +
                       std::string("\x00\x00\x00\x00\x00\x00\xf8\x3f", 8);
  NpyArray s = read_bytes_as_npy(scalar);
  CHECK(s.dtype == DType::Float64);
  CHECK(s.shape.empty());
  double v;
  std::memcpy(&v, s.data.data(), 8);
  CHECK(v == 1.5);
  CHECK(encode_npy(s) == scalar);

  // np.save(f, np.zeros((0,), '<i8')) and np.save(f, np.array([True, False]))
  std::string empty = npy_v1("{'descr': '<i8', 'fortran_order': False, 'shape': (0,), }" + std::string(20, ' '));
  CHECK(read_bytes_as_npy(empty).shape == Shape{0});
  CHECK(encode_npy(read_bytes_as_npy(empty)) == empty);
  std::string bools = npy_v1("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }" + std::string(20, ' ')) +
                      std::string("\x01\x00", 2);
  NpyArray b = read_bytes_as_npy(bools);
  CHECK(b.dtype == DType::Bool);
  CHECK(b.data == std::string("\x01\x00", 2));
  CHECK(encode_npy(b) == bools);
}

TEST_CASE("npy: format versions 2.0 and 3.0, Python 2 headers, uint8 as bool", "[artifacts]") {
  std::string dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }";
  std::string data("\x07\x00\x00\x00", 4);
  std::string header = dict + std::string(128 - 12 - dict.size() - 1, ' ') + "\n";
  for (char major : {'\x02', '\x03'}) {
    std::string file =
        std::string("\x93NUMPY", 6) + major + '\0' + char(header.size()) + std::string(3, '\0') + header + data;
    NpyArray a = read_bytes_as_npy(file);
    CHECK(a.dtype == DType::Int32);
    CHECK(a.data == data);
  }
  // Python 2's numpy wrote long integers with an L, and any quote goes.
  NpyArray p2 = read_bytes_as_npy(npy_v1("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (1L, 2L)}") +
                                  std::string(8, '\0'));
  CHECK(p2.shape == Shape{1, 2});
  NpyArray u8 = read_bytes_as_npy(npy_v1("{'descr': '|u1', 'fortran_order': False, 'shape': (3,), }") +
                                  std::string("\x01\x00\x01", 3));
  CHECK(u8.dtype == DType::Bool);
}

// Regression (issue 14, item 13b): '=f4', 'f4', '|b1'... and a 1-D array marked Fortran-ordered
// were refused, though numpy reads them and their bytes are the same.
TEST_CASE("npy: every spelling of a byte order, and Fortran order where it is C order", "[artifacts]") {
  auto file = [](const std::string &descr, const std::string &fortran, const std::string &shape, size_t bytes) {
    return npy_v1("{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }") +
           std::string(bytes, '\1');
  };
  struct Case {
    const char *descr;
    DType dtype;
  };
  for (Case c : {Case{"=f4", DType::Float32}, {"f4", DType::Float32}, {"|f4", DType::Float32}, {"=f8", DType::Float64},
                 {"f8", DType::Float64}, {"f2", DType::Float16}, {"=f2", DType::Float16}, {"i4", DType::Int32},
                 {"=i4", DType::Int32}, {"i8", DType::Int64}, {"=i8", DType::Int64}, {"|b1", DType::Bool},
                 {"b1", DType::Bool}, {"<b1", DType::Bool}, {"=b1", DType::Bool}, {">b1", DType::Bool},
                 {"?", DType::Bool}, {"|?", DType::Bool}, {"u1", DType::Bool}, {">u1", DType::Bool}}) {
    INFO(c.descr);
    NpyArray a = read_bytes_as_npy(file(c.descr, "False", "(3,)", 3 * dtype_bytes(c.dtype)));
    CHECK(a.dtype == c.dtype);
    CHECK(a.shape == Shape{3});
  }
  // Column-major and row-major are the same bytes when at most one dimension is longer than 1.
  for (const char *shape : {"()", "(5,)", "(1, 5)", "(5, 1)", "(1, 5, 1)", "(0, 3)", "(2, 0, 3)"}) {
    INFO(shape);
    std::string text = std::string(shape);
    int64_t n = text == "()" ? 1 : text.find('0') != std::string::npos ? 0 : 5;
    NpyArray a = read_bytes_as_npy(file("<f4", "True", shape, size_t(n) * 4));
    CHECK(a.data.size() == size_t(n) * 4);
  }
}

TEST_CASE("npy: malformed and unsupported files are clear errors", "[artifacts]") {
  auto header = [](const std::string &descr, const std::string &fortran, const std::string &shape) {
    return npy_v1("{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }");
  };
  std::string f4x2 = header("<f4", "False", "(2,)");
  CHECK(npy_error("") == "'x.npy' is not a .npy file (bad magic)");
  CHECK(npy_error("PK\x03\x04 a zip file") == "'x.npy' is not a .npy file (bad magic)");
  CHECK(npy_error("\x93NUMPY") == "'x.npy' is truncated (incomplete header)");
  CHECK(npy_error(std::string("\x93NUMPY\x01\x00\xff\xff{", 11)) == "'x.npy' is truncated (incomplete header)");
  CHECK(npy_error(std::string("\x93NUMPY\x04\x00", 8)) == "'x.npy': unsupported .npy format version 4.0");
  CHECK(npy_error(f4x2 + std::string(7, '\0')) ==
        "'x.npy' is truncated (shape (2,) float32 needs 8 bytes of data, found 7)");
  CHECK(npy_error(f4x2 + std::string(9, '\0')) ==
        "'x.npy': unexpected bytes after the 8 bytes of data of shape (2,) float32");
  CHECK(npy_error(header("<f4", "True", "(2, 2)") + std::string(16, '\0')) ==
        "'x.npy' is stored in Fortran order (column-major) with shape (2, 2); save a C-ordered array "
        "(numpy.ascontiguousarray)");
  CHECK(npy_error(header("<f4", "True", "(1, 2, 1, 3)") + std::string(24, '\0')) ==
        "'x.npy' is stored in Fortran order (column-major) with shape (1, 2, 1, 3); save a C-ordered array "
        "(numpy.ascontiguousarray)");
  CHECK(npy_error(header(">i8", "False", "(2,)") + std::string(16, '\0')) ==
        "'x.npy': big-endian dtype '>i8' is not supported (save with .astype('<i8'))");
  CHECK(npy_error(header("f", "False", "(2,)") + std::string(8, '\0')) ==
        "'x.npy': unsupported dtype 'f' (gradc reads <f2, <f4, <f8, <i4, <i8 and |b1)");
  CHECK(npy_error(header("<b2", "False", "(2,)") + std::string(4, '\0')) ==
        "'x.npy': unsupported dtype '<b2' (gradc reads <f2, <f4, <f8, <i4, <i8 and |b1)");
  CHECK(npy_error(header(">f4", "False", "(2,)") + std::string(8, '\0')) ==
        "'x.npy': big-endian dtype '>f4' is not supported (save with .astype('<f4'))");
  CHECK(npy_error(header("<u2", "False", "(2,)") + std::string(4, '\0')) ==
        "'x.npy': unsupported dtype '<u2' (gradc reads <f2, <f4, <f8, <i4, <i8 and |b1)");
  CHECK(npy_error(header("|O", "False", "(2,)")) ==
        "'x.npy': unsupported dtype '|O' (object arrays are not supported)");
  CHECK(npy_error(npy_v1("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }")) ==
        "'x.npy': unsupported dtype (structured arrays are not supported)");
  CHECK(npy_error(header("|b1", "False", "(2,)") + "\x01\x02") ==
        "'x.npy': element 1 of a bool array is 2, not 0 or 1");

  // A shape far beyond the file is refused before anything is allocated.
  CHECK(npy_error(header("<f8", "False", "(1000000000000,)")) ==
        "'x.npy' is truncated (shape (1000000000000,) float64 needs 8000000000000 bytes of data, "
        "found 0)");
  CHECK(npy_error(header("<f8", "False", "(4000000000, 4000000000, 4000000000)")) ==
        "'x.npy': shape (4000000000, 4000000000, 4000000000) float64 is too large");
  CHECK(npy_error(header("<f8", "False", "(99999999999999999999,)")) ==
        "'x.npy': malformed .npy header: dimension too large in the shape (at header byte 70)");
  CHECK(npy_error(header("<f8", "False", "(-1,)")) ==
        "'x.npy': malformed .npy header: negative dimension in the shape (at header byte 51)");
  CHECK(npy_error(npy_v1("{'descr': '<f4', 'shape': (1,), }")) ==
        "'x.npy': malformed .npy header: missing key 'fortran_order' (at header byte 118)");
  CHECK(npy_error(npy_v1("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }")) ==
        "'x.npy': malformed .npy header: expected a string, True, False or a tuple (at header "
        "byte 34)");
  CHECK(npy_error(npy_v1("{'descr': '<f4', 'descr': '<f4', }")) ==
        "'x.npy': malformed .npy header: duplicate key 'descr' (at header byte 31)");
  CHECK(npy_error(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}")) ==
        "'x.npy': malformed .npy header: unknown key 'x' (at header byte 59)");
  CHECK(npy_error(npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x")) ==
        "'x.npy': malformed .npy header: unexpected text after '}' (at header byte 58)");
  CHECK(npy_error(npy_v1("\xff\xfe garbage \x01")) ==
        "'x.npy': malformed .npy header: expected '{' (at header byte 0)");

  TempDir dir;
  CHECK_THROWS_WITH(read_npy(dir.file("missing.npy")),
                    "cannot read '" + dir.file("missing.npy") + "': No such file or directory");
  CHECK_THROWS_WITH(read_npy(dir.path()), "cannot read '" + dir.path() + "': Is a directory");
}

TEST_CASE("npy: corrupted files never crash the reader", "[artifacts]") {
  // Every truncation and many random corruptions of a valid file either read
  // or throw FileError; under ASan this also checks every access is in bounds.
  std::mt19937 rng(42);
  TempDir dir;
  std::string path = dir.file("x.npy");
  for (size_t n = 0; n < kArange6.size(); ++n) {
    write_bytes(path, kArange6.substr(0, n));
    CHECK_THROWS_AS(read_npy(path), FileError);
  }
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bytes = kArange6;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] = char(rng() % 256);
    write_bytes(path, bytes);
    try {
      NpyArray a = read_npy(path);
      CHECK(a.data.size() == size_t(num_elements(a.shape)) * dtype_bytes(a.dtype));
    } catch (const FileError &) {
    }
  }
}

// ------------------------------------------------------- atomic writes ----

TEST_CASE("write_file_atomic replaces the file and leaves no temporary behind", "[artifacts]") {
  TempDir dir;
  std::string path = dir.file("out.bin");
  write_file_atomic(path, "first version, longer");
  write_file_atomic(path, "second");
  CHECK(read_bytes(path) == "second");
  write_file_atomic(path, "");
  CHECK(read_bytes(path) == "");
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);

  // The file gets the mode a plain open(2) would give it, not mkstemp's 0600.
  mode_t mask = umask(0);
  umask(mask);
  struct stat st;
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));

  // Failures: a missing directory, and a directory where the file should go.
  CHECK_THROWS_WITH(write_file_atomic(dir.file("no/such/dir.bin"), "x"),
                    "cannot write '" + dir.file("no/such/dir.bin") + "': No such file or directory");
  fs::create_directory(dir.file("sub"));
  CHECK_THROWS_AS(write_file_atomic(dir.file("sub"), "x"), FileError);
  CHECK(fs::is_directory(dir.file("sub")));
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 2);
}

TEST_CASE("write_files_atomic: a set is written whole or not at all (issue 7, item 12)", "[artifacts]") {
  TempDir dir;
  auto entries = [&] {
    std::vector<std::string> names;
    for (const auto &e : fs::directory_iterator(dir.path()))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  write_bytes(dir.file("m.o"), "old object");
  write_bytes(dir.file("m.h"), "old header");

  // The last file cannot be created: the first is not replaced either.
  CHECK_THROWS_WITH(write_files_atomic({{dir.file("m.o"), "new object"},
                                        {dir.file("m.h"), "new header"},
                                        {dir.file("no/such/m.json"), "{}"}}),
                    "cannot write '" + dir.file("no/such/m.json") + "': No such file or directory");
  CHECK(read_bytes(dir.file("m.o")) == "old object");
  CHECK(read_bytes(dir.file("m.h")) == "old header");
  CHECK(entries() == std::vector<std::string>{"m.h", "m.o"});

  // A directory where a file should go is found before anything is written.
  fs::create_directory(dir.file("m.json"));
  CHECK_THROWS_WITH(write_files_atomic({{dir.file("m.o"), "new object"}, {dir.file("m.json"), "{}"}}),
                    "cannot write '" + dir.file("m.json") + "': Is a directory");
  CHECK(read_bytes(dir.file("m.o")) == "old object");
  CHECK(entries() == std::vector<std::string>{"m.h", "m.json", "m.o"});
  fs::remove(dir.file("m.json"));

  // A path given twice is a gradc bug.
  CHECK_THROWS_AS(write_files_atomic({{dir.file("m.o"), "a"}, {dir.file("./m.o"), "b"}}), InternalError);
  CHECK(read_bytes(dir.file("m.o")) == "old object");

  // Success replaces every file and removes the stale ones (a missing one is fine).
  write_bytes(dir.file("output_2.npy"), "stale");
  write_files_atomic({{dir.file("m.o"), "new object"}, {dir.file("m.h"), "new header"}, {dir.file("m.json"), "{}"}},
                     [&] { return std::vector<std::string>{dir.file("output_2.npy"), dir.file("output_3.npy")}; });
  CHECK(read_bytes(dir.file("m.o")) == "new object");
  CHECK(read_bytes(dir.file("m.h")) == "new header");
  CHECK(read_bytes(dir.file("m.json")) == "{}");
  CHECK(entries() == std::vector<std::string>{"m.h", "m.json", "m.o"});

  // A failed set leaves its stale files alone.
  write_bytes(dir.file("output_2.npy"), "stale");
  CHECK_THROWS_AS(write_files_atomic({{dir.file("no/such/x"), "x"}},
                                     [&] { return std::vector<std::string>{dir.file("output_2.npy")}; }), FileError);
  CHECK(read_bytes(dir.file("output_2.npy")) == "stale");

  // An empty set is fine.
  write_files_atomic({});
  // The signal dispositions are the caller's again.
  struct sigaction sa;
  REQUIRE(sigaction(SIGHUP, nullptr, &sa) == 0);
  CHECK(sa.sa_handler == SIG_DFL);
}

TEST_CASE("write_files_atomic: a directory is one output, replaced whole (hostile inputs H6)", "[artifacts]") {
  TempDir dir;
  auto names = [](const std::string &d) {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(d))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  using Names = std::vector<std::string>;
  std::string relay = dir.file("m.relay"), weights = dir.file("m.weights");
  write_files_atomic({{relay, "first"}, OutputFile::directory(weights, {{"a.npy", "A"}, {"b.npy", "B"}})});
  CHECK(names(weights) == Names{"a.npy", "b.npy"});
  CHECK(read_bytes(weights + "/a.npy") == "A");

  // A set that fails changes neither the file nor the directory.
  CHECK_THROWS_AS(write_files_atomic({{relay, "second"},
                                      OutputFile::directory(weights, {{"c.npy", "C"}}),
                                      {dir.file("no/such/x"), "x"}}),
                  FileError);
  CHECK(read_bytes(relay) == "first");
  CHECK(names(weights) == Names{"a.npy", "b.npy"});
  CHECK(names(dir.path()) == Names{"m.relay", "m.weights"});

  // Success replaces the directory whole: nothing of the old one is left.
  write_files_atomic({{relay, "second"}, OutputFile::directory(weights, {{"c.npy", "C"}})});
  CHECK(read_bytes(relay) == "second");
  CHECK(names(weights) == Names{"c.npy"});
  CHECK(names(dir.path()) == Names{"m.relay", "m.weights"});

  // A symbolic link is replaced, not followed; a file is refused.
  fs::create_directory(dir.file("elsewhere"));
  write_bytes(dir.file("elsewhere/keep.npy"), "K");
  fs::remove_all(weights);
  fs::create_directory_symlink(dir.file("elsewhere"), weights);
  write_files_atomic({OutputFile::directory(weights, {{"d.npy", "D"}})});
  CHECK(!fs::is_symlink(weights));
  CHECK(names(weights) == Names{"d.npy"});
  CHECK(read_bytes(dir.file("elsewhere/keep.npy")) == "K");
  write_bytes(dir.file("f.weights"), "file");
  CHECK_THROWS_WITH(write_files_atomic({OutputFile::directory(dir.file("f.weights"), {})}),
                    "cannot write '" + dir.file("f.weights") + "': Not a directory");

  // An entry that is not one new file name is a gradc bug.
  CHECK_THROWS_AS(write_files_atomic({OutputFile::directory(weights, {{"../x.npy", "X"}})}), InternalError);
  CHECK_THROWS_AS(write_files_atomic({OutputFile::directory(weights, {{"a", "1"}, {"a", "2"}})}), InternalError);
  CHECK(names(weights) == Names{"d.npy"});
  CHECK(names(dir.path()) == Names{"elsewhere", "f.weights", "m.relay", "m.weights"});
}

TEST_CASE("write_files_atomic: names up to the file system's limit, none longer (hostile inputs M7)", "[artifacts]") {
  TempDir dir;
  std::string longest = dir.file(std::string(255, 'n'));
  write_files_atomic({{longest, "fits"}});
  CHECK(read_bytes(longest) == "fits");
  CHECK_THROWS_WITH(write_files_atomic({{dir.file("m.o"), "x"}, {longest + "x", "too long"}}),
                    "cannot write '" + longest + "x': File name too long");
  CHECK(!fs::exists(dir.file("m.o")));
  CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);
}

// ------------------------------------------------------------ C header ----

TEST_CASE("C header: structs, macros and entry points of every function", "[artifacts]") {
  auto [m, reports] = sample_module();
  std::string h = emit_c_header(m, reports, "mlp", TargetKind::CPU);
  for (const char *line : {
           "#ifndef GRADC_MLP_H",
           "#include <stdint.h>",
           "extern \"C\" {",
           "#define MLP_ALIGNMENT 64",
           "static inline const char *mlp_strerror(int32_t code) {",
           "struct mlp_main_inputs {\n"
           "  const float *x; /* %x: Tensor[(2, 3), float32] */\n"
           "  const int64_t *t; /* %t: Tensor[(2,), int64] */\n"
           "  const uint16_t *h; /* %h: Tensor[(), float16] */\n"
           "  const uint8_t *flag; /* %flag: Tensor[(4,), bool] */\n"
           "  const double *p_int; /* %int: Tensor[(3,), float64] */\n"
           "  const int32_t *X_2; /* %X: Tensor[(1,), int32] */\n"
           "  const float *workspace_2; /* %workspace: Tensor[(2,), float32] */\n"
           "};",
           "struct mlp_main_outputs {\n"
           "  float *output_0; /* Tensor[(2,), float32] */\n"
           "  double *output_1; /* Tensor[(), float64] */\n"
           "};",
           "#define MLP_MAIN_WORKSPACE_SIZE 0\n",
           "#define MLP_MAIN_X_RANK 2\n"
           "#define MLP_MAIN_X_DIM0 2\n"
           "#define MLP_MAIN_X_DIM1 3\n"
           "#define MLP_MAIN_X_SHAPE {2, 3}\n"
           "#define MLP_MAIN_X_SIZE 6 /* elements */\n"
           "#define MLP_MAIN_X_BYTES 24\n",
           "#define MLP_MAIN_H_RANK 0\n"
           "#define MLP_MAIN_H_SIZE 1 /* elements */\n",
           "#define MLP_MAIN_OUTPUT_1_BYTES 8\n",
           "#define MLP_MAIN_ADJOINT_WORKSPACE_SIZE 64\n",
           "int32_t mlp_main(const struct mlp_main_inputs *inputs,\n"
           "                 struct mlp_main_outputs *outputs, void *workspace);",
           "int32_t mlp_main_adjoint(const struct mlp_main_adjoint_inputs *inputs,\n"
           "                         struct mlp_main_adjoint_outputs *outputs, void *workspace);",
       }) {
    INFO(line);
    CHECK(h.find(line) != std::string::npos);
  }
  CHECK(h.find("CUstream") == std::string::npos);
  // The return codes' messages are the compiler's own (Codegen.h).
  CHECK(h.find(std::string("case 2: return \"") + status_message(2) + "\";") != std::string::npos);

  std::string cuda = emit_c_header(m, reports, "mlp", TargetKind::CUDA);
  CHECK(cuda.find("#ifndef __cuda_cuda_h__\ntypedef struct CUstream_st *CUstream;\n#endif") != std::string::npos);
  CHECK(cuda.find("struct mlp_main_outputs *outputs, void *workspace, CUstream stream);") != std::string::npos);
  CHECK(cuda.find("device pointer") != std::string::npos);
}

TEST_CASE("C header: compiles as C99 and C++ for CPU and CUDA", "[artifacts]") {
  if (!have_cc()) {
    WARN("no `cc`: the header was not compiled");
    return;
  }
  auto [m, reports] = sample_module();
  check_header_compiles(emit_c_header(m, reports, "mlp", TargetKind::CPU), false);
  std::string cuda = emit_c_header(m, reports, "mlp", TargetKind::CUDA);
  check_header_compiles(cuda, true);
  // cuda.h, included first, declares the same typedef, which C99 forbids twice.
  check_header_compiles("#ifndef __cuda_cuda_h__\n#define __cuda_cuda_h__\n"
                        "typedef struct CUstream_st *CUstream;\n#endif\n" +
                            cuda,
                        true);
}

TEST_CASE("C header: parameters named like macros or types of the C library or the header (issue 7, item 15)",
          "[artifacts]") {
  // Every object-like macro of <stdint.h> and <inttypes.h>, a sample of the
  // other headers', their type names, and the header's own macros.
  std::vector<std::string> names = {"NULL", "offsetof", "EOF", "errno", "stdin", "I", "complex", "NAN",
                                    "INFINITY", "HUGE_VAL", "M_PI", "M_SQRT2", "CHAR_BIT", "INT_MAX",
                                    "ULLONG_MAX", "LONG_WIDTH", "FLT_EPSILON", "DBL_MAX", "EDOM", "ERANGE",
                                    "SIGINT", "SIG_DFL", "LC_ALL", "RAND_MAX", "EXIT_FAILURE", "BUFSIZ",
                                    "CLOCKS_PER_SEC", "FE_DIVBYZERO", "WEOF", "intptr_t", "uintmax_t",
                                    "int_fast16_t", "uint_least8_t", "ptrdiff_t", "max_align_t", "ssize_t",
                                    "M_ALIGNMENT", "GRADC_M_H", "M_F_X_RANK", "M_G_Y_SIZE", "M_F_WORKSPACE_SIZE",
                                    "PRId64", "PRIxPTR", "SCNu32", "PRIdFAST8"};
  for (const char *u : {"", "U"}) {
    for (const char *kind : {"", "_LEAST", "_FAST"})
      for (const char *bits : {"8", "16", "32", "64"})
        for (const char *what : {"_MIN", "_MAX", "_WIDTH", "_C"})
          names.push_back(std::string(u) + "INT" + kind + bits + what);
    for (const char *kind : {"PTR", "MAX"})
      for (const char *what : {"_MIN", "_MAX", "_WIDTH", "_C"})
        names.push_back(std::string(u) + "INT" + kind + what);
  }
  for (const char *t : {"PTRDIFF", "SIG_ATOMIC", "SIZE", "WCHAR", "WINT"})
    for (const char *what : {"_MIN", "_MAX", "_WIDTH"})
      names.push_back(std::string(t) + what);

  LoweredModule m;
  std::vector<FunctionReport> reports;
  for (const char *fn_name : {"f", "g"}) {
    LoweredFunction fn;
    fn.name = fn_name;
    FunctionReport r;
    r.name = fn_name;
    // @g's first parameter %y gives the macros M_G_Y_*, which @f's
    // parameter %M_G_Y_SIZE, declared before them, must not be.
    std::vector<std::string> params = {fn.name == "f" ? "x" : "y"};
    params.insert(params.end(), names.begin(), names.end());
    for (size_t i = 0; i < params.size(); ++i) {
      fn.inputs.push_back(buffer(params[i], DType::Float32, {2}, BufferScope::Input, int(i)));
      r.param_names.push_back(params[i]);
    }
    fn.outputs = {buffer("output_0", DType::Float32, {2}, BufferScope::Output, 0)};
    fn.results = fn.outputs;
    m.functions.push_back(fn);
    reports.push_back(r);
  }
  std::string h = emit_c_header(m, reports, "m", TargetKind::CPU);
  for (const std::string &n : names) {
    INFO(n);
    CHECK(h.find("  const float *p_" + n + "; /* %" + n + ": ") != std::string::npos);
  }
  // Names that only look alike keep their spelling.
  {
    LoweredModule plain_module;
    LoweredFunction fn;
    fn.name = "f";
    FunctionReport r;
    r.name = "f";
    std::vector<std::string> plain = {"x", "W1", "h_t", "size", "Mx", "int32", "INT", "Error", "e_x"};
    for (size_t i = 0; i < plain.size(); ++i) {
      fn.inputs.push_back(buffer(plain[i], DType::Float32, {2}, BufferScope::Input, int(i)));
      r.param_names.push_back(plain[i]);
    }
    plain_module.functions.push_back(fn);
    std::string ph = emit_c_header(plain_module, {r}, "m", TargetKind::CPU);
    for (const std::string &n : plain) {
      INFO(n);
      CHECK(ph.find("  const float *" + n + "; /* %" + n + ": Tensor") != std::string::npos);
    }
  }

  if (!have_cc()) {
    WARN("no `cc`: the header was not compiled");
    return;
  }
  TempDir dir;
  write_bytes(dir.file("m.h"), h);
  write_bytes(dir.file("use.c"), R"(#define _GNU_SOURCE 1
#include <assert.h>
#include <errno.h>
#include <fenv.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <wchar.h>
#ifndef __cplusplus
#include <complex.h>
#endif
#include "m.h"
int use(struct m_f_inputs *in, struct m_g_inputs *in2);
int use(struct m_f_inputs *in, struct m_g_inputs *in2) {
  return in->p_INT32_MAX == in2->p_NULL && M_F_P_SIZE_MAX_SIZE == 2 && M_G_Y_SIZE == 2;
}
)");
  CHECK(run_shell("cd " + dir.path() + " && cc -std=c11 -Wall -Wextra -Werror -c use.c -o use_c.o") == 0);
  if (have_cxx())
    CHECK(run_shell("cd " + dir.path() + " && c++ -x c++ -std=c++17 -Wall -Wextra -Werror -c use.c -o use_cxx.o") == 0);
}

TEST_CASE("C header: a function without parameters, and clashing function names", "[artifacts]") {
  LoweredModule m;
  LoweredFunction fn;
  fn.name = "zeros";
  fn.outputs = {buffer("output_0", DType::Float32, {2}, BufferScope::Output, 0)};
  fn.results = fn.outputs;
  m.functions.push_back(fn);
  FunctionReport r;
  r.name = "zeros";
  std::string h = emit_c_header(m, {r}, "m", TargetKind::CPU);
  CHECK(h.find("struct m_zeros_inputs {\n  char unused;") != std::string::npos);

  // @f and @F have different symbols but would share M_F_WORKSPACE_SIZE.
  LoweredFunction upper_fn = fn;
  upper_fn.name = "F";
  fn.name = "f";
  m.functions = {fn, upper_fn};
  CHECK_THROWS_WITH(emit_c_header(m, {r, r}, "m", TargetKind::CPU),
                    "cannot write the C header: function @F needs the name M_F_WORKSPACE_SIZE, "
                    "which another function has; rename one");
  fn.name = "strerror";
  m.functions = {fn};
  CHECK_THROWS_WITH(emit_c_header(m, {r}, "m", TargetKind::CPU),
                    "cannot write the C header: function @strerror would clash with m_strerror; "
                    "rename the function");
}

TEST_CASE("C header: matches the ABI of the object file (link and run)", "[artifacts]") {
  if (!have_cc()) {
    WARN("no `cc`: the object was not linked");
    return;
  }
  // @scale(%x: (5,) f32, %k: () f32) -> (5,) f32 computing x * k.
  LoweredModule m;
  LoweredFunction fn;
  fn.name = "scale";
  fn.inputs = {buffer("x", DType::Float32, {5}, BufferScope::Input, 0),
               buffer("k", DType::Float32, {}, BufferScope::Input, 1)};
  fn.outputs = {buffer("y", DType::Float32, {5}, BufferScope::Output, 0)};
  fn.results = fn.outputs;
  auto i = std::make_shared<LVar>(LVar{"i"});
  Kernel k;
  k.name = "mul";
  k.buffers = {fn.inputs[0], fn.inputs[1], fn.outputs[0]};
  k.body = for_loop(i, 5, ForKind::Serial,
                    store(fn.outputs[0], var_ref(i),
                          binary(BinaryOp::Mul, load(fn.inputs[0], var_ref(i)), load(fn.inputs[1], int_imm(0)))));
  fn.kernels = {k};
  m.functions = {fn};
  FunctionReport r;
  r.name = "scale";
  r.param_names = {"x", "k"};

  CodegenOptions opts;
  opts.prefix = "lin";
  CodegenRequest what;
  what.object = true;
  TempDir dir;
  write_bytes(dir.file("lin.o"), generate_code(m, opts, what).object);
  write_bytes(dir.file("lin.h"), emit_c_header(m, {r}, "lin", TargetKind::CPU));
  write_bytes(dir.file("app.c"), R"(#include "lin.h"
#include <stdlib.h>
#include <string.h>
int main(void) {
  float *x = aligned_alloc(LIN_ALIGNMENT, 64), *k = aligned_alloc(LIN_ALIGNMENT, 64);
  float *y = aligned_alloc(LIN_ALIGNMENT, 64);
  struct lin_scale_inputs in;
  memset(y, 0xAB, 64);
  struct lin_scale_outputs out;
  int i;
  for (i = 0; i < LIN_SCALE_X_SIZE; ++i)
    x[i] = (float)i;
  *k = 2.5f;
  in.x = x;
  in.k = k;
  out.output_0 = y;
  if (lin_scale(&in, &out, NULL) != 0)
    return 1;
  for (i = 0; i < LIN_SCALE_OUTPUT_0_SIZE; ++i)
    if (y[i] != 2.5f * (float)i)
      return 2;
  in.x = x + 1; /* misaligned */
  return lin_scale(&in, &out, NULL) == 2 ? 0 : 3;
}
)");
  CHECK(run_shell("cd " + dir.path() + " && cc -std=c11 -Wall -Werror app.c lin.o -lm -o app && ./app") == 0);
}

// ------------------------------------------------------------ manifest ----

TEST_CASE("manifest: the documented keys, for CPU and CUDA", "[artifacts]") {
  auto [m, reports] = sample_module();
  ManifestInfo info;
  info.tool_version = "0.1.0";
  info.llvm_version = "19.1.7";
  info.argv = {"gradc", "compile", "mlp.relay", "--grad"};
  info.target = "cpu";
  info.triple = "x86_64-pc-linux-gnu";
  info.cpu = "znver3";
  info.remat = "manual";
  nlohmann::json j = build_manifest(m, reports, info, "mlp");
  CHECK(j["format"] == "gradc-manifest");
  CHECK(j["version"] == 1);
  CHECK(j["tool"] == nlohmann::json({{"name", "gradc"}, {"version", "0.1.0"}}));
  CHECK(j["llvm_version"] == "19.1.7");
  CHECK(j["command_line"].size() == 4);
  CHECK(j["target"]["kind"] == "cpu");
  CHECK(j["target"]["triple"] == "x86_64-pc-linux-gnu");
  CHECK(j["target"]["cpu"] == "znver3");
  CHECK(j["target"]["gpu_arch"].is_null());
  CHECK(j["opt_level"] == 2);
  CHECK(j["remat"]["mode"] == "manual");
  CHECK(j["remat"]["memory_budget"].is_null());

  REQUIRE(j["functions"].size() == 2);
  const nlohmann::json &main = j["functions"][0];
  CHECK(main["name"] == "main");
  CHECK(main["symbol"] == "mlp_main");
  REQUIRE(main["parameters"].size() == 7);
  CHECK(main["parameters"][0] ==
        nlohmann::json(
            {{"name", "x"}, {"c_field", "x"}, {"role", "input"}, {"dtype", "float32"}, {"shape", {2, 3}}, {"bytes", 24}}));
  CHECK(main["parameters"][2]["shape"] == nlohmann::json::array());
  CHECK(main["results"][1] == nlohmann::json({{"name", "output_1"},
                                              {"c_field", "output_1"},
                                              {"role", "output"},
                                              {"dtype", "float64"},
                                              {"shape", nlohmann::json::array()},
                                              {"bytes", 8}}));
  // Hand-built loop IR has no provenance: the binding is null.
  CHECK(main["kernels"][0] ==
        nlohmann::json({{"name", "fused_add"}, {"buffers", {"x", "output_0"}}, {"binding", nullptr}}));

  const nlohmann::json &adj = j["functions"][1];
  CHECK(adj["workspace_bytes"] == 64);
  CHECK(adj["planned_peak_bytes"] == nlohmann::json({{"before_remat", 128}, {"after_remat", 64}}));
  CHECK(adj["remat"] == nlohmann::json({{"segments", 1}, {"recomputed_bindings", 2}}));
  CHECK(adj["flops"] == 36);
  CHECK(adj["arena"] == nlohmann::json::array({{{"name", "t0"},
                                                {"offset", 0},
                                                {"bytes", 24},
                                                {"live_kernels", {0, 1}},
                                                {"binding", nullptr}}}));
  CHECK(adj["kernels"].size() == 2);

  info.target = "cuda";
  info.gpu_arch = "sm_80";
  info.remat = "auto";
  info.memory_budget = 65536;
  nlohmann::json c = build_manifest(m, reports, info, "mlp");
  CHECK(c["target"]["gpu_arch"] == "sm_80");
  CHECK(c["remat"]["memory_budget"] == 65536);
  CHECK(
      c["functions"][0]["kernels"][0]["launch"] ==
      nlohmann::json(
          {{"grid", {4, 1, 1}}, {"block", {128, 1, 1}}, {"shared_memory_bytes", 0}, {"arguments", {"x", "output_0"}}}));
  // The manifest is plain JSON that any parser reads back.
  CHECK(nlohmann::json::parse(c.dump(2)) == c);
}
