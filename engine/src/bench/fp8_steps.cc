// Step timing of the cudnn_fp8 backend: the backend enqueues each step alone (VisitFp8Steps);
// the timing and statistics are the benchmark's.
#include <algorithm>

#include "attn/bench.h"
#include "attn/fp8.h"
#include "attn/timing.h"

namespace attn {

absl::StatusOr<Fp8StepTimes> TimeFp8Steps(const AttentionProblem& p, const void* q, const void* k,
                                          const void* v, DeviceContext& context, int repeats,
                                          bool quantize_only) {
  Fp8StepTimes times;
  double* medians[kNumFp8Steps] = {&times.quantize_ms, &times.attention_ms, &times.dequantize_ms,
                                   &times.update_ms};
  auto plan =
      VisitFp8Steps(p, q, k, v, context,
                    [&](Fp8Step step, const std::function<absl::Status()>& launch) -> absl::Status {
                      if (quantize_only && step != Fp8Step::kQuantize) return absl::OkStatus();
                      auto ms = TimeOnDevice(context, launch, 3, std::max(1, repeats));
                      if (!ms.ok()) return ms.status();
                      *medians[static_cast<int>(step)] = Summarize(*std::move(ms)).median;
                      return absl::OkStatus();
                    });
  if (!plan.ok()) return plan.status();
  times.plan = *plan;
  return times;
}

}  // namespace attn
