// The one table of numeric tolerances for comparing a backend's output with the float64
// reference. An element passes when |out - ref| <= atol + rtol * |ref|; the whole output also
// has to meet the relative L2 bound ||out - ref|| / ||ref||.
//
// Why these values: outputs are convex combinations of V ~ normal(0, 1), so |ref| <= ~4.
//  - float32: the result is rounded once to float (2^-24 relative) after fp32 GEMMs over up to
//    S = 1000 terms, whose rounding error grows like sqrt(S) * 2^-24 ~ 2e-6.
//  - bfloat16: rounding to bf16 alone costs up to 2^-9 = 2e-3 relative; the naive path also
//    rounds P to bf16 before P V (another ~2^-9 per weight, averaging down over S).
//  - float16: 2^-11 = 5e-4 relative per rounding, same two roundings.
#pragma once

#include "attn/dtype.h"

namespace attn::testing {

struct Tolerance {
  double atol;
  double rtol;
  double rel_l2;
};

constexpr Tolerance ToleranceFor(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return {1e-5, 1e-5, 5e-6};
    case DType::kBFloat16:
      return {8e-3, 8e-3, 6e-3};
    case DType::kFloat16:
      return {1e-3, 1e-3, 8e-4};
  }
  return {0, 0, 0};
}

}  // namespace attn::testing
