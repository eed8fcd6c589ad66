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

// The cpu backend computes in float32 whatever the dtype (inputs widened exactly, float32 GEMMs,
// exp and online-softmax sums) and rounds once to the output's dtype. Against the reference:
//  - float32 outputs: ToleranceFor(kFloat32), the float32 row above. Worst measured over
//    cpu_backend_test's shapes (S up to 8192, H 1..257): max |err| 1.6e-6, rel L2 5.6e-7.
//  - bfloat16/float16 outputs: also within this many units in the last place of the reference's
//    own (once-rounded) output, plus the float32 bound: float32's error can move a rounding
//    across one boundary, and near zero (outputs of ~1e-6) it alone exceeds an ulp.
inline constexpr int kCpuMaxUlpsFromReference = 1;

// A fast path of the same precision (fused, cudnn) may have at most this multiple of the naive
// path's rel-L2 error against float64, plus a floor for the nearly exact cases (S = 1: both
// return V rounded once), where twice a near-zero naive error would be noise.
constexpr double kFastVsNaiveErrorRatio = 2.0;
constexpr double FastVsNaiveErrorFloor(DType dtype) {
  return dtype == DType::kFloat32 ? 1e-7 : 1e-5;
}

// cudnn_fp8 (E4M3 Q, K, V, S and O with per-tensor scales, bf16/fp16 out) vs the float64
// reference of the bf16/fp16 inputs. E4M3 keeps 3 mantissa bits: round to nearest costs up to
// 2^-4 = 6.25% relative per value. The output is rounded to E4M3 last, so rtol = 2^-4 covers that
// rounding exactly; atol covers what the earlier roundings (Q and K -> logits, S -> P V, V) leave
// in an output, which does not scale with that output. A CPU emulation of the same roundings
// (scales 448 / amax; T = 1..2048, H = 32..256, causal and not) needed atol <= 0.145 on top of
// rtol = 2^-4 and gave rel L2 0.050-0.058; atol = 0.2 and rel L2 = 0.08 leave ~1.4x over both.
// Measured on the H200 (cuDNN 9.19, 2026-12-03, 28 shapes x dtype x causal in fp8_test.cc): rel L2
// 0.045-0.058, within 1% of the emulation on every shape, max |err| <= 0.30 at |ref| ~ 1.7 (inside
// atol + rtol |ref|). fp8_test.cc also holds the GPU to at most 2x the emulation's rel L2.
inline constexpr Tolerance kFp8E4M3Tolerance = {0.2, 0.0625, 0.08};
// ... and on the GPU at most this multiple of the emulation's rel-L2 error on the same inputs,
// plus a floor for shapes where the emulation's error is small.
inline constexpr double kFp8VsEmulatedErrorRatio = 2.0;
inline constexpr double kFp8VsEmulatedErrorFloor = 1e-3;

}  // namespace attn::testing
