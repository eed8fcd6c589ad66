#include "client/npy.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace attn::client {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxHeaderBytes = 1 << 20;

int ItemSize(NpyType t) { return t == NpyType::kFloat64 ? 8 : t == NpyType::kFloat32 ? 4 : 2; }

absl::Status Bad(absl::string_view what, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", rule));
}

// The value text of `key` in the header dict: from after "'key':" to the matching end
// (a quoted string, a parenthesised tuple, or a bare word).
absl::StatusOr<std::string> DictValue(absl::string_view header, absl::string_view key,
                                      absl::string_view what) {
  for (const char quote : {'\'', '"'}) {
    const std::string needle = absl::StrCat(std::string(1, quote), key, std::string(1, quote));
    size_t pos = header.find(needle);
    if (pos == absl::string_view::npos) continue;
    pos = header.find(':', pos + needle.size());
    if (pos == absl::string_view::npos) break;
    absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(pos + 1));
    if (rest.empty()) break;
    size_t end;
    if (rest[0] == '\'' || rest[0] == '"') {
      end = rest.find(rest[0], 1);
      if (end == absl::string_view::npos) break;
      return std::string(rest.substr(1, end - 1));
    }
    if (rest[0] == '(') {
      end = rest.find(')');
      if (end == absl::string_view::npos) break;
      return std::string(rest.substr(1, end - 1));
    }
    end = rest.find_first_of(",}");
    return std::string(absl::StripTrailingAsciiWhitespace(rest.substr(0, end)));
  }
  return Bad(what, absl::StrCat("header has no readable '", key, "' entry"));
}

}  // namespace

absl::string_view NpyTypeName(NpyType type) {
  switch (type) {
    case NpyType::kFloat64:
      return "float64";
    case NpyType::kFloat32:
      return "float32";
    case NpyType::kFloat16:
      return "float16";
    case NpyType::kBFloat16:
      return "bfloat16";
  }
  return "?";
}

int64_t NpyArray::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return Bad(what, "not a .npy file (bad magic; expected \\x93NUMPY)");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Bad(what, "truncated header");
    for (int i = 0; i < 4; ++i)
      header_len |= size_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
    offset = 12;
  } else {
    return Bad(what,
               absl::StrCat("unsupported .npy format version ", major, " (1, 2 and 3 are read)"));
  }
  if (header_len > kMaxHeaderBytes || offset + header_len > bytes.size()) {
    return Bad(what,
               absl::StrCat("header of ", header_len, " bytes runs past the end of the file"));
  }
  const absl::string_view header = bytes.substr(offset, header_len);
  NpyArray out;

  auto descr = DictValue(header, "descr", what);
  if (!descr.ok()) return descr.status();
  char order = '<';
  std::string kind = *descr;
  if (!kind.empty() && (kind[0] == '<' || kind[0] == '>' || kind[0] == '|' || kind[0] == '=')) {
    order = kind[0] == '=' ? '<' : kind[0];
    kind = kind.substr(1);
  }
  if (kind == "f8")
    out.type = NpyType::kFloat64;
  else if (kind == "f4")
    out.type = NpyType::kFloat32;
  else if (kind == "f2")
    out.type = NpyType::kFloat16;
  else if (kind == "V2" || kind == "bfloat16")
    out.type = NpyType::kBFloat16;
  else {
    return Bad(what,
               absl::StrCat("dtype '", *descr,
                            "' is not supported; expected float64, float32, float16 or bfloat16"));
  }

  auto fortran = DictValue(header, "fortran_order", what);
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") {
    return Bad(what, "Fortran-ordered arrays are not supported; save np.ascontiguousarray(x)");
  }

  auto shape = DictValue(header, "shape", what);
  if (!shape.ok()) return shape.status();
  int64_t count = 1;
  for (absl::string_view d : absl::StrSplit(*shape, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v) || v < 0) {
      return Bad(what,
                 absl::StrCat("shape (", *shape, ") is not a tuple of non-negative integers"));
    }
    if (v > 0 && count > std::numeric_limits<int64_t>::max() / 8 / v) {
      return Bad(what, absl::StrCat("shape (", *shape, ") is too large"));
    }
    count *= v;
    out.shape.push_back(v);
  }
  const size_t data_offset = offset + header_len;
  const int64_t want = count * ItemSize(out.type);
  const int64_t have = static_cast<int64_t>(bytes.size() - data_offset);
  if (have != want) {
    return Bad(what, absl::StrCat("header says ", want, " bytes of data (shape (", *shape, ") of ",
                                  NpyTypeName(out.type), "), file has ", have));
  }
  out.data.assign(bytes.data() + data_offset, static_cast<size_t>(want));
  if (order == '>') {
    const int size = ItemSize(out.type);
    for (size_t i = 0; i < out.data.size(); i += size) {
      std::reverse(out.data.begin() + static_cast<std::ptrdiff_t>(i),
                   out.data.begin() + static_cast<std::ptrdiff_t>(i + size));
    }
  }
  return out;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat(path, ": cannot open for reading"));
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseNpy(ss.str(), path);
}

std::string EncodeNpy(const NpyArray& array) {
  std::string shape;
  for (int64_t d : array.shape) absl::StrAppend(&shape, d, ",");
  if (array.shape.size() > 1) shape.pop_back();  // (4,) keeps its comma, (4, 8) does not
  const char* descr = array.type == NpyType::kFloat64   ? "<f8"
                      : array.type == NpyType::kFloat32 ? "<f4"
                      : array.type == NpyType::kFloat16 ? "<f2"
                                                        : "<V2";
  std::string header =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so the data starts at a multiple of 64 bytes; the header ends in '\n'.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out(kMagic, 6);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + array.data;
}

absl::Status WriteNpyFile(const std::string& path, const NpyArray& array) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = EncodeNpy(array);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

double NpyElement(const NpyArray& a, int64_t i) {
  const char* p = a.data.data() + i * ItemSize(a.type);
  switch (a.type) {
    case NpyType::kFloat64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case NpyType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case NpyType::kFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return Float16BitsToFloat(v);
    }
    case NpyType::kBFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return BFloat16BitsToFloat(v);
    }
  }
  return 0;
}

std::string ToDTypeBytes(const NpyArray& array, DType dtype, bool* converted) {
  const bool same = (dtype == DType::kFloat32 && array.type == NpyType::kFloat32) ||
                    (dtype == DType::kBFloat16 && array.type == NpyType::kBFloat16) ||
                    (dtype == DType::kFloat16 && array.type == NpyType::kFloat16);
  if (converted != nullptr) *converted = !same;
  if (same) return array.data;
  const int64_t n = array.element_count();
  std::string out(static_cast<size_t>(n * DTypeSize(dtype)), '\0');
  for (int64_t i = 0; i < n; ++i) StoreFromDouble(out.data(), dtype, i, NpyElement(array, i));
  return out;
}

NpyArray FromDTypeBytes(std::string bytes, DType dtype, std::vector<int64_t> shape) {
  NpyArray a;
  a.type = dtype == DType::kFloat32   ? NpyType::kFloat32
           : dtype == DType::kFloat16 ? NpyType::kFloat16
                                      : NpyType::kBFloat16;
  a.shape = std::move(shape);
  a.data = std::move(bytes);
  return a;
}

}  // namespace attn::client
