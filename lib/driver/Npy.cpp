//===- Npy.cpp - reading and writing NumPy .npy files ---------------------===//
//
// `gradc run` takes its inputs and writes its outputs as .npy files. The reader
// accepts what numpy.save writes for gradc's dtypes and trusts no byte of the
// file: every length is checked against what is actually there before use.
//
//===----------------------------------------------------------------------===//
#include "gradc/driver/Artifacts.h"
#include "gradc/support/Diagnostics.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace gradc {

namespace {

const char kMagic[] = "\x93NUMPY";
const size_t kMagicLen = 6;
// numpy.save pads the header so that the data starts at a multiple of 64.
const size_t kHeaderAlign = 64;

/// The .npy dtype string of each gradc dtype (little-endian, like the data).
const char *npy_descr(DType dt) { return dtype_info(dt).npy_descr; }

/// An open file descriptor that closes itself.
class Fd {
public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  ~Fd() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  int get() const { return fd_; }

private:
  int fd_;
};

/// Reads `n` bytes, fewer only at end of file. The string grows with what is
/// actually read, so a corrupt length field cannot cause a huge allocation.
std::string read_up_to(int fd, uint64_t n, uint64_t size_hint, const std::string &path) {
  std::string out;
  out.reserve(std::min(n, size_hint));
  char chunk[1 << 16];
  while (out.size() < n) {
    size_t want = std::min<uint64_t>(sizeof chunk, n - out.size());
    ssize_t got = ::read(fd, chunk, want);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      throw FileError("cannot read '" + path + "': " + std::strerror(errno));
    if (got == 0)
      break;
    out.append(chunk, size_t(got));
  }
  return out;
}

/// A value of the header dict: a string, a boolean or a tuple of integers.
struct HeaderValue {
  enum Kind { String, Bool, Tuple } kind = String;
  std::string text;
  bool flag = false;
  Shape dims;
};

/// The three entries of the header, all required.
struct NpyHeader {
  std::optional<std::string> descr;
  std::optional<bool> fortran_order;
  std::optional<Shape> shape;
};

/// Parses the header, a Python dict literal like
///   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
/// padded with spaces and a newline. Only the literals numpy writes there
/// are accepted: quoted strings, True/False and tuples of integers.
class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string &path) : text_(text), path_(path) {}

  // header := '{' (entry (',' entry)* ','?)? '}' whitespace*    entry := key ':' value
  NpyHeader parse() {
    NpyHeader h;
    expect('{', "'{'");
    while (!accept('}')) {
      std::string key = string_literal("a quoted key or '}'");
      if (key != "descr" && key != "fortran_order" && key != "shape")
        fail("unknown key '" + key + "'");
      expect(':', "':' after '" + key + "'");
      skip_space();
      if (key == "descr" && peek() == '[')
        throw FileError("'" + path_ + "': unsupported dtype (structured arrays are not supported)");
      HeaderValue v = value();
      if (key == "descr")
        set(h.descr, key, v.kind == HeaderValue::String, v.text, "a string");
      else if (key == "fortran_order")
        set(h.fortran_order, key, v.kind == HeaderValue::Bool, v.flag, "True or False");
      else
        set(h.shape, key, v.kind == HeaderValue::Tuple, v.dims, "a tuple of integers");
      if (!accept(',')) {
        expect('}', "',' or '}'");
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size())
      fail("unexpected text after '}'");
    if (!h.descr)
      fail("missing key 'descr'");
    if (!h.fortran_order)
      fail("missing key 'fortran_order'");
    if (!h.shape)
      fail("missing key 'shape'");
    return h;
  }

private:
  template <typename T>
  void set(std::optional<T> &slot, const std::string &key, bool ok, const T &value, const char *expected) {
    if (slot)
      fail("duplicate key '" + key + "'");
    if (!ok)
      fail("'" + key + "' must be " + expected);
    slot = value;
  }

  // value := string | 'True' | 'False' | '(' (int (',' int)* ','?)? ')'
  HeaderValue value() {
    HeaderValue v;
    skip_space();
    if (peek() == '\'' || peek() == '"') {
      v.kind = HeaderValue::String;
      v.text = string_literal("a string");
    } else if (keyword("True")) {
      v.kind = HeaderValue::Bool;
      v.flag = true;
    } else if (keyword("False")) {
      v.kind = HeaderValue::Bool;
    } else if (accept('(')) {
      v.kind = HeaderValue::Tuple;
      while (!accept(')')) {
        v.dims.push_back(dimension());
        if (!accept(',')) {
          expect(')', "',' or ')' in the shape");
          break;
        }
      }
    } else {
      fail("expected a string, True, False or a tuple");
    }
    return v;
  }

  // int := digits 'L'?   (Python 2 numpy wrote long integers with an L)
  int64_t dimension() {
    skip_space();
    if (peek() == '-')
      fail("negative dimension in the shape");
    if (!isdigit((unsigned char)peek()))
      fail("expected an integer in the shape");
    int64_t d = 0;
    while (isdigit((unsigned char)peek())) {
      int digit = text_[pos_++] - '0';
      if (d > (INT64_MAX - digit) / 10)
        fail("dimension too large in the shape");
      d = d * 10 + digit;
    }
    if (peek() == 'L')
      ++pos_;
    return d;
  }

  std::string string_literal(const std::string &what) {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"')
      fail("expected " + what);
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos)
      fail("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    if (s.find('\\') != std::string::npos)
      fail("escape sequences in strings are not supported");
    pos_ = end + 1;
    return s;
  }

  bool keyword(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  bool accept(char c) {
    skip_space();
    if (peek() != c)
      return false;
    ++pos_;
    return true;
  }

  void expect(char c, const std::string &what) {
    if (!accept(c))
      fail("expected " + what);
  }

  void skip_space() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  [[noreturn]] void fail(const std::string &message) {
    throw FileError("'" + path_ + "': malformed .npy header: " + message + " (at header byte " + std::to_string(pos_) +
                    ")");
  }

  std::string_view text_;
  const std::string &path_;
  size_t pos_ = 0;
};

/// The gradc dtype of a descr, or a FileError saying why there is none. A
/// descr is a byte order then a type code, as numpy reads it: '<', '=' (the
/// host's), '|' (not applicable) or none all mean little-endian here, '>' is
/// refused for types wider than a byte; the codes are the dtype table's
/// (f2 f4 f8 i4 i8 b1), '?' (bool) and u1 (uint8 arrays holding 0 and 1 are
/// a common way to store masks: read as bool).
DType dtype_of(const std::string &descr, const std::string &path) {
  static_assert(std::endian::native == std::endian::little, "the data is read as the host's memory");
  bool has_order = !descr.empty() && std::string_view("<>=|").find(descr[0]) != std::string_view::npos;
  std::string code = descr.substr(has_order ? 1 : 0);
  std::optional<DType> found;
  for (const DTypeInfo &row : all_dtypes())
    if (code == row.npy_descr + 1)
      found = row.dtype;
  if (code == "?" || code == "u1")
    found = DType::Bool;
  if (found && !(descr[0] == '>' && dtype_bytes(*found) > 1))
    return *found;
  if (found)
    throw FileError("'" + path + "': big-endian dtype '" + descr + "' is not supported (save with .astype('<" +
                    code + "'))");
  if (descr.find('O') != std::string::npos)
    throw FileError("'" + path + "': unsupported dtype '" + descr + "' (object arrays are not supported)");
  throw FileError("'" + path + "': unsupported dtype '" + descr + "' (gradc reads <f2, <f4, <f8, <i4, <i8 and |b1)");
}

/// Whether C and Fortran order lay out an array of `shape` the same: no
/// elements, or at most one dimension longer than 1 (0-D, 1-D, (1, n, 1)).
bool same_in_both_orders(const Shape &shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return true;
  return std::count_if(shape.begin(), shape.end(), [](int64_t d) { return d > 1; }) <= 1;
}

} // namespace

NpyArray read_npy(const std::string &path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0)
    throw FileError("cannot read '" + path + "': " + std::strerror(errno));
  struct stat st;
  uint64_t size_hint = ::fstat(fd.get(), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
  auto truncated = [&](const std::string &what) { return FileError("'" + path + "' is truncated (" + what + ")"); };

  // Preamble: magic, major and minor version, header length (2 bytes in
  // version 1, 4 bytes in versions 2 and 3), all little-endian.
  std::string pre = read_up_to(fd.get(), kMagicLen + 2, size_hint, path);
  if (pre.size() < kMagicLen || pre.compare(0, kMagicLen, kMagic) != 0)
    throw FileError("'" + path + "' is not a .npy file (bad magic)");
  if (pre.size() < kMagicLen + 2)
    throw truncated("incomplete header");
  int major = (unsigned char)pre[6], minor = (unsigned char)pre[7];
  if (major < 1 || major > 3 || minor != 0)
    throw FileError("'" + path + "': unsupported .npy format version " + std::to_string(major) + "." +
                    std::to_string(minor));
  size_t len_bytes = major == 1 ? 2 : 4;
  std::string len_field = read_up_to(fd.get(), len_bytes, size_hint, path);
  if (len_field.size() < len_bytes)
    throw truncated("incomplete header");
  uint64_t header_len = 0;
  for (size_t i = len_bytes; i-- > 0;)
    header_len = header_len << 8 | (unsigned char)len_field[i];
  std::string header_text = read_up_to(fd.get(), header_len, size_hint, path);
  if (header_text.size() < header_len)
    throw truncated("incomplete header");

  NpyHeader header = HeaderParser(header_text, path).parse();
  NpyArray array;
  array.dtype = dtype_of(*header.descr, path);
  array.shape = *header.shape;
  if (*header.fortran_order && !same_in_both_orders(array.shape))
    throw FileError("'" + path + "' is stored in Fortran order (column-major) with shape " + shape_str(array.shape) +
                    "; save a C-ordered array (numpy.ascontiguousarray)");

  // The data size, checked for overflow before anything is allocated for it.
  std::string what = shape_str(array.shape) + " " + dtype_name(array.dtype);
  uint64_t need = 0;
  if (std::find(array.shape.begin(), array.shape.end(), 0) == array.shape.end()) {
    need = dtype_bytes(array.dtype);
    for (int64_t d : array.shape)
      if (__builtin_mul_overflow(need, uint64_t(d), &need))
        throw FileError("'" + path + "': shape " + what + " is too large");
  }
  array.data = read_up_to(fd.get(), need, size_hint, path);
  if (array.data.size() < need)
    throw truncated("shape " + what + " needs " + std::to_string(need) + " bytes of data, found " +
                    std::to_string(array.data.size()));
  uint64_t extra = read_up_to(fd.get(), 1, 1, path).size();
  if (extra)
    throw FileError("'" + path + "': unexpected bytes after the " + std::to_string(need) + " bytes of data of shape " +
                    what);

  // Compiled code may assume a bool is 0 or 1, so other bytes are refused.
  if (array.dtype == DType::Bool)
    for (size_t i = 0; i < array.data.size(); ++i)
      if ((unsigned char)array.data[i] > 1)
        throw FileError("'" + path + "': element " + std::to_string(i) + " of a bool array is " +
                        std::to_string((unsigned char)array.data[i]) + ", not 0 or 1");
  return array;
}

std::string encode_npy(const NpyArray &array) {
  GRADC_CHECK(array.data.size() == uint64_t(num_elements(array.shape)) * dtype_bytes(array.dtype), "encode_npy",
              "data size does not match shape " + shape_str(array.shape));
  return npy_header(array.dtype, array.shape) + array.data;
}

std::string npy_header(DType dtype, const Shape &shape) {
  std::string dict = std::string("{'descr': '") + npy_descr(dtype) +
                     "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // numpy.save leaves room to grow the first axis in place (21 digits); doing
  // the same keeps our files byte-identical to numpy's.
  if (!shape.empty())
    dict += std::string(21 - std::to_string(shape[0]).size(), ' ');
  // numpy pads with a full 64 bytes when already aligned; so do we.
  size_t text_len = dict.size() + 1; // with the final newline
  auto padding = [&](size_t len_bytes) { return kHeaderAlign - (kMagicLen + 2 + len_bytes + text_len) % kHeaderAlign; };
  // Version 1.0 stores the header length in 2 bytes; a longer header needs
  // 2.0, which numpy.save picks the same way.
  size_t len_bytes = text_len + padding(2) <= 0xffff ? 2 : 4;
  size_t pad = padding(len_bytes);
  size_t header_len = text_len + pad;

  std::string out(kMagic, kMagicLen);
  out += char(len_bytes == 2 ? 1 : 2);
  out += char(0);
  for (size_t i = 0; i < len_bytes; ++i)
    out += char((header_len >> (8 * i)) & 0xff);
  out += dict;
  out += std::string(pad, ' ');
  out += '\n';
  return out;
}

} // namespace gradc
