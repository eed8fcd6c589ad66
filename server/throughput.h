// What a device sustains, measured at start-up: FLOP/s per backend and dtype, copy bandwidth,
// and the rate of the host's float64 reference (the `reference` backend, what numerics checks
// run). Admission turns a request's FLOPs and bytes into an estimated device time with these,
// and sizes the pieces long calls run in.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "attn/device.h"
#include "attn/dtype.h"
#include "attn/problem.h"

namespace attn::server {

class Throughputs {
 public:
  // Times every backend that supports the calibration problem on `context` (after its warm-up)
  // in each dtype, a device-to-device copy, and on the host the reference backend (the numerics
  // check's) and, when `context` is the host, the cpu backend in each dtype. A few hundred ms at
  // start-up. Calls too small to fill a GPU measure below its peak, so estimates err long
  // (admission errs on the side of refusing).
  static Throughputs Measure(DeviceContext& context);

  // FLOP/s of `backend` on `dtype` (float16 as bfloat16); for a pair not measured, the slowest
  // rate measured on this device, so an unknown stays conservative.
  double FlopsPerSecond(const std::string& backend, DType dtype) const;
  double host_reference_flops_per_second() const { return host_reference_; }

  // Estimated device seconds of one call: its FLOPs at the backend's rate or its fewest bytes at
  // the copy bandwidth, whichever is longer, with every key counted (WithAllKeys: kv_lens never
  // lower the estimate).
  double CallSeconds(const std::string& backend, const AttentionProblem& p) const;

  // "cudnn bfloat16 312.4 TFLOP/s, ...": what was measured, for the start-up log.
  std::string ToString() const;

  // For tests: a table of rates instead of measurements.
  static Throughputs Fixed(std::map<std::pair<std::string, DType>, double> flops_per_second,
                           double copy_bytes_per_second, double host_reference_flops_per_second);

 private:
  std::map<std::pair<std::string, DType>, double> flops_;
  double slowest_ = 1e9;
  double copy_bytes_per_second_ = 1e10;
  double host_reference_ = 1e9;
};

}  // namespace attn::server
