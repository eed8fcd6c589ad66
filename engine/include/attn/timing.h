// Timing a piece of work on a device: CUDA events on the context's stream, or the host clock.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"

namespace attn {

// Runs `work` `warmup` times, then `repeats` times each bracketed by CUDA events recorded on
// `context`'s stream (steady_clock on the CPU context), and returns each repeat's time in
// milliseconds. `work` must enqueue on context.stream(). Stops at the first error.
absl::StatusOr<std::vector<double>> TimeOnDevice(DeviceContext& context,
                                                 const std::function<absl::Status()>& work,
                                                 int warmup, int repeats);

}  // namespace attn
