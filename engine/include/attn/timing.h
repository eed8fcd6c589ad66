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

// Captures `calls_per_replay` calls of `work` on `context`'s stream into one CUDA graph, then
// times `replays` launches of it with events; returns the time per call (replay time divided by
// calls_per_replay) of each replay. Launch overhead between kernels is gone from these numbers.
// `work` must already have run once (so plans and library workspaces exist: nothing may
// allocate during capture). FailedPrecondition on the CPU context.
absl::StatusOr<std::vector<double>> TimeGraphReplays(DeviceContext& context,
                                                     const std::function<absl::Status()>& work,
                                                     int calls_per_replay, int replays);

}  // namespace attn
