// The interface every attention implementation ("backend") provides.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn {

// One call of a backend. Tensors have been checked by ValidateTensors and live in the context's
// memory kind; `workspace` holds at least WorkspaceBytes(problem) bytes of the same kind.
struct RunArgs {
  const AttentionProblem& problem;
  const AttentionTensors& tensors;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  DeviceContext& context;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Stable identifier used in requests, metrics and results: "cpu", "naive", ...
  virtual std::string name() const = 0;

  // One line for listings: what it computes with.
  virtual std::string description() const = 0;

  // OK when this backend can run `problem` on `device`. Otherwise FailedPrecondition (the device
  // or build cannot) or InvalidArgument (the problem breaks one of this backend's limits) whose
  // message names the rule, e.g. "naive: head_dim * num_heads = 2^33 exceeds cuBLAS's int32
  // leading dimension". Assumes ValidateProblem(problem) is OK. Cheap: no allocation, no launch.
  [[nodiscard]] virtual absl::Status CheckSupport(const AttentionProblem& problem,
                                                  const DeviceInfo& device) const = 0;

  // Exact scratch bytes Run needs for `problem`, so callers can admit or refuse work up front.
  [[nodiscard]] virtual absl::StatusOr<int64_t> WorkspaceBytes(
      const AttentionProblem& problem) const = 0;

  // Computes args.tensors.out, enqueued on args.context's stream (synchronous on the CPU).
  // Returns once the work is queued; errors from the launch itself are reported here.
  [[nodiscard]] virtual absl::Status Run(const RunArgs& args) const = 0;
};

}  // namespace attn
