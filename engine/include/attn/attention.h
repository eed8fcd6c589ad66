// The engine's entry point for one attention call: validate, check support, allocate, run.
#pragma once

#include "absl/status/status.h"
#include "attn/backend.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn {

// Checks `problem` and `tensors` (which must live in `context`'s memory), the backend's support
// on `context`'s device, takes the workspace from `context`'s arena, and runs. On a GPU the work
// is queued on the context's stream when this returns; synchronise before reading `out` on the
// host. Nothing is launched unless every check passed.
absl::Status RunAttention(const Backend& backend, const AttentionProblem& problem,
                          const AttentionTensors& tensors, DeviceContext& context,
                          const RunOptions& options = {});

}  // namespace attn
