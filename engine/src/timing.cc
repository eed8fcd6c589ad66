#include "attn/timing.h"

#include <chrono>

#include "absl/strings/str_format.h"
#include "platform.h"

namespace attn {

absl::StatusOr<std::vector<double>> TimeOnDevice(DeviceContext& context,
                                                 const std::function<absl::Status()>& work,
                                                 int warmup, int repeats) {
  if (warmup < 0 || repeats < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "timing: warmup must be >= 0 and repeats >= 1, got %d and %d", warmup, repeats));
  }
  if (context.info().kind == DeviceKind::kCuda) {
    return TimeOnStream(context.stream(), work, warmup, repeats);
  }
  for (int i = 0; i < warmup; ++i) {
    if (auto s = work(); !s.ok()) return s;
  }
  std::vector<double> ms;
  ms.reserve(repeats);
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (auto s = work(); !s.ok()) return s;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  return ms;
}

absl::StatusOr<std::vector<double>> TimeGraphReplays(DeviceContext& context,
                                                     const std::function<absl::Status()>& work,
                                                     int calls_per_replay, int replays) {
  if (calls_per_replay < 1 || replays < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("timing: calls_per_replay and replays must be >= 1, got %d and %d",
                        calls_per_replay, replays));
  }
  if (context.info().kind != DeviceKind::kCuda) {
    return absl::FailedPreconditionError("timing: CUDA-graph replay needs a CUDA device");
  }
  return TimeGraphOnStream(context.stream(), work, calls_per_replay, replays);
}

}  // namespace attn
