// The interface every attention implementation ("backend") provides.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "attn/stop.h"
#include "attn/tensor.h"
#include "attn/unsupported.h"

namespace attn {

class Fp8RecipeState;  // attn/fp8.h

// Per-call choices that do not change the result beyond rounding.
struct RunOptions {
  // Backends with several candidate plans (cudnn) time each on the call's real buffers once per
  // problem and keep the fastest; later calls reuse it. Off: the library heuristic's first plan.
  bool autotune = false;
  // FP8 backends (cudnn_fp8): the job's delayed-scaling state, read for this call's scales and
  // updated with its amaxes. Null: scales from the current amaxes (an Attend). Others ignore it.
  Fp8RecipeState* fp8_recipe = nullptr;
  // When set, RunAttention checks it before the call and between pieces, and a call of more
  // than max_piece_flops runs in pieces (PlanPieces) with at most two queued on the device, so
  // a stop takes effect within about two pieces' device time. The first stop reason is
  // returned; the pieces already queued finish first, so the device is idle and the arena's
  // memory free to reuse. Backends that compute on the host (cpu) also check it as they go.
  const StopToken* stop = nullptr;
  double max_piece_flops = 0;  // 0: never split
  // Host backends (cpu): threads one call may use, the caller's included (0: all). A server with
  // several workers on the host gives each a share, so one call cannot take every core.
  int host_threads = 0;
  // Set by RunAttention on the backend calls it makes for the pieces of one call: the whole
  // call's problem. A backend that picks its kernel, or how to cut the work, by the problem's
  // shape (fused) picks by this one, so a call in pieces gives the same bits as in one.
  const AttentionProblem* whole_call = nullptr;
};

// One call of a backend. Tensors have been checked by ValidateTensors and live in the context's
// memory kind; `workspace` holds at least WorkspaceBytes(problem) bytes of the same kind.
struct RunArgs {
  const AttentionProblem& problem;
  const AttentionTensors& tensors;
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  DeviceContext& context;
  RunOptions options = {};
};

// Counters of a backend's per-device plan cache.
struct PlanCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;  // each one built a plan
  int64_t entries = 0;
  int64_t capacity = 0;
  double build_seconds = 0;  // total time spent building plans (and autotuning)
  double last_build_seconds = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Stable identifier used in requests, metrics and results: "cpu", "naive", ...
  virtual std::string name() const = 0;

  // One line for listings: what it computes with.
  virtual std::string description() const = 0;

  // OK when this backend can run `problem` on `device`; otherwise Unsupported (FailedPrecondition,
  // through ATTN_UNSUPPORTED_IF) whose message names the rule, e.g. "naive: num_heads * head_dim
  // (leading dimension of q/out) = 4294967296 exceeds cuBLAS's int32 limit (2147483647)".
  // Assumes ValidateProblem(problem) is OK. Cheap: no allocation, no launch.
  [[nodiscard]] virtual absl::Status CheckSupport(const AttentionProblem& problem,
                                                  const DeviceInfo& device) const = 0;

  // Exact scratch bytes Run needs for `problem` on `context` with packed BTNH tensors, so callers
  // can admit or refuse work up front. Backends that must build a plan to know (cudnn) build and
  // cache it here.
  [[nodiscard]] virtual absl::StatusOr<int64_t> WorkspaceBytes(
      const AttentionProblem& problem, DeviceContext& context,
      const RunOptions& options = {}) const = 0;

  // Computes args.tensors.out, enqueued on args.context's stream (synchronous on the CPU).
  // Returns once the work is queued; errors from the launch itself are reported here.
  [[nodiscard]] virtual absl::Status Run(const RunArgs& args) const = 0;

  // Capabilities, which layers above ask instead of comparing names. Takes
  // RunOptions::fp8_recipe (delayed scaling state) into each call:
  virtual bool takes_fp8_recipe() const { return false; }
  // The backend with the same kernels at the input's precision, which this one's reduced-precision
  // results are compared with ("cudnn" for cudnn_fp8); empty for full-precision backends.
  virtual std::string full_precision_peer() const { return ""; }
  // Checks RunOptions::stop while a call runs, not only between pieces, so even one piece of it
  // stops promptly (the host backend, row by row).
  virtual bool checks_stop_while_running() const { return false; }

  // The plan cache's counters on `context`, for backends that keep one.
  virtual std::optional<PlanCacheStats> plan_cache_stats(DeviceContext& context) const {
    return std::nullopt;
  }
};

}  // namespace attn
