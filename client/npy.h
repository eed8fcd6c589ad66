// NumPy .npy files (format versions 1.0, 2.0 and 3.0), for attend's --q/--k/--v inputs and
// --output. Element types: float64, float32, float16 in either byte order, and bfloat16 as
// ml_dtypes saves it (descr "<V2" or "bfloat16"). Arrays are C-ordered; Fortran order is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "attn/dtype.h"

namespace attn::client {

enum class NpyType : uint8_t { kFloat64, kFloat32, kFloat16, kBFloat16 };

absl::string_view NpyTypeName(NpyType type);  // "float64", ...

struct NpyArray {
  NpyType type = NpyType::kFloat32;
  std::vector<int64_t> shape;
  std::string data;  // elements in C order, little-endian (converted on read)

  int64_t element_count() const;
};

// Parses a whole .npy file's bytes. InvalidArgument naming `what` (the file) and the rule:
// "q.npy: not a .npy file (bad magic)", "... header says 1048576 bytes of data, file has 1000".
absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what);
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);

// A version 1.0 file, little-endian, header padded to a multiple of 64 bytes. bfloat16 arrays
// are written as "<V2" (ml_dtypes reads them back as bfloat16; plain NumPy sees raw 2-byte void).
std::string EncodeNpy(const NpyArray& array);
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

// The array's elements as a packed buffer of `dtype`, rounding to nearest even when narrowing
// (float32 inputs for a bfloat16 request). `converted` says whether rounding was applied.
std::string ToDTypeBytes(const NpyArray& array, DType dtype, bool* converted = nullptr);

// An array holding `bytes` of `dtype` (bfloat16 as NpyType::kBFloat16, bit for bit).
NpyArray FromDTypeBytes(std::string bytes, DType dtype, std::vector<int64_t> shape);

// Element i as a double.
double NpyElement(const NpyArray& array, int64_t i);

}  // namespace attn::client
