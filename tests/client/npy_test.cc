// .npy reading and writing: round trips of every element type, NumPy's own header layout (as
// np.save writes it), big-endian input, and bad files refused with a message naming the rule.
#include "client/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace attn::client {
namespace {

// A file as np.save writes it: magic, version, little-endian header length, the dict padded with
// spaces to a 64-byte boundary and ending in '\n', then the data.
std::string NumpyFile(const std::string& dict, const std::string& data, char major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) {
    out += static_cast<char>((n >> 16) & 0xff);
    out += static_cast<char>((n >> 24) & 0xff);
  }
  return out + header + data;
}

template <typename T>
std::string Bytes(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

TEST(Npy, ReadsWhatNumpyWrites) {
  const std::string file = NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                     Bytes<float>({1, 2, 3, 4, 5, -6.5f}));
  auto a = ParseNpy(file, "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->type, NpyType::kFloat32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->element_count(), 6);
  EXPECT_EQ(NpyElement(*a, 5), -6.5);
}

TEST(Npy, ReadsVersionTwoAndAOneDimensionalShape) {
  auto a = ParseNpy(NumpyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                              Bytes<double>({0.25, 1e300, -2}), 2),
                    "v2.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(NpyElement(*a, 1), 1e300);
}

TEST(Npy, BigEndianInputIsSwappedOnRead) {
  // 1.5f is 0x3fc00000; big-endian bytes 3f c0 00 00.
  const std::string data("\x3f\xc0\x00\x00\xc0\x20\x00\x00", 8);  // 1.5, -2.5
  auto a = ParseNpy(NumpyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", data),
                    "be.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(NpyElement(*a, 0), 1.5);
  EXPECT_EQ(NpyElement(*a, 1), -2.5);
}

TEST(Npy, EveryTypeRoundTripsBitForBit) {
  for (NpyType type :
       {NpyType::kFloat64, NpyType::kFloat32, NpyType::kFloat16, NpyType::kBFloat16}) {
    NpyArray a;
    a.type = type;
    a.shape = {2, 1, 3, 2};
    const int size = type == NpyType::kFloat64 ? 8 : type == NpyType::kFloat32 ? 4 : 2;
    for (int64_t i = 0; i < a.element_count() * size; ++i) a.data += static_cast<char>(i * 37 + 11);
    const std::string file = EncodeNpy(a);
    EXPECT_EQ(file.size() % 64, static_cast<size_t>(a.data.size() % 64)) << "header not 64-aligned";
    auto b = ParseNpy(file, "round.npy");
    ASSERT_TRUE(b.ok()) << NpyTypeName(type) << ": " << b.status();
    EXPECT_EQ(b->type, type);
    EXPECT_EQ(b->shape, a.shape);
    EXPECT_EQ(b->data, a.data) << NpyTypeName(type);
  }
}

TEST(Npy, BFloat16IsWrittenAsMlDtypesVoidTwo) {
  NpyArray a = FromDTypeBytes(std::string("\x80\x3f\x00\xc0", 4), DType::kBFloat16, {2});
  const std::string file = EncodeNpy(a);
  EXPECT_NE(file.find("'descr': '<V2'"), std::string::npos) << file.substr(0, 128);
  auto b = ParseNpy(file, "bf16.npy");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(NpyElement(*b, 0), 1.0);
  EXPECT_EQ(NpyElement(*b, 1), -2.0);
}

TEST(Npy, WidensAndNarrowsToTheRequestDtype) {
  NpyArray a;
  a.type = NpyType::kFloat32;
  a.shape = {3};
  a.data = Bytes<float>(
      {1.0f, 1.00390625f, -3.0f});  // 1 + 2^-8: a tie in bfloat16, rounds to even (1.0)
  bool converted = false;
  const std::string bf16 = ToDTypeBytes(a, DType::kBFloat16, &converted);
  EXPECT_TRUE(converted);
  ASSERT_EQ(bf16.size(), 6u);
  NpyArray back = FromDTypeBytes(bf16, DType::kBFloat16, {3});
  EXPECT_EQ(NpyElement(back, 0), 1.0);
  EXPECT_EQ(NpyElement(back, 1), 1.0);
  EXPECT_EQ(NpyElement(back, 2), -3.0);
  ToDTypeBytes(a, DType::kFloat32, &converted);
  EXPECT_FALSE(converted);
}

void ExpectRejected(const std::string& file, const std::string& rule) {
  auto a = ParseNpy(file, "bad.npy");
  ASSERT_FALSE(a.ok()) << "accepted a file that breaks: " << rule;
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("bad.npy: "), std::string::npos) << a.status();
  EXPECT_NE(a.status().message().find(rule), std::string::npos) << a.status();
}

TEST(Npy, BadFilesAreRefusedNamingTheRule) {
  const std::string ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  const std::string two = Bytes<float>({1, 2});
  ExpectRejected("PK\x03\x04 not numpy at all", "bad magic");
  ExpectRejected("\x93NUM", "bad magic");
  std::string v9 = NumpyFile(ok_dict, two);
  v9[6] = 9;
  ExpectRejected(v9, "unsupported .npy format version 9");
  ExpectRejected(NumpyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", two),
                 "dtype '<i4' is not supported");
  ExpectRejected(NumpyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", two),
                 "Fortran-ordered");
  ExpectRejected(NumpyFile(ok_dict, two.substr(0, 7)), "header says 8 bytes of data");
  ExpectRejected(NumpyFile(ok_dict, two + "x"), "file has 9");
  ExpectRejected(NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two),
                 "not a tuple of non-negative integers");
  ExpectRejected(
      NumpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                two),
      "too large");
  ExpectRejected(NumpyFile("{'fortran_order': False, 'shape': (2,), }", two), "'descr'");
  std::string long_header = NumpyFile(ok_dict, two);
  long_header[8] = '\xff';
  long_header[9] = '\x7f';
  ExpectRejected(long_header, "runs past the end of the file");
}

TEST(Npy, MissingFilesSayWhich) {
  auto a = ReadNpyFile("/nonexistent/q.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("/nonexistent/q.npy"), std::string::npos) << a.status();
}

}  // namespace
}  // namespace attn::client
