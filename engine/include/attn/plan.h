// The plan of one attention call, made by the engine before anything is allocated or queued:
// what the call computes and moves, the memory it holds and the pieces it runs in. Cost and
// memory admission read plans; RunAttention and the benchmark runner (attn/bench.h's CasePlan)
// run the calls they describe, so nothing above the engine restates what a call will do.
#pragma once

#include <cstdint>

#include "attn/backend.h"
#include "attn/problem.h"

namespace attn {

struct CallPlan {
  const Backend* backend = nullptr;
  AttentionProblem problem;
  // Every key counted (WithAllKeys): with kv_lens, the figures of the problem without them, an
  // upper bound for any lengths (naive computes every score whatever they are).
  double flops = 0;  // AttentionFlops
  double bytes = 0;  // AttentionMinBytes: the fewest bytes moved through memory
  // Memory of the call's context (the arena: device memory on a GPU, host memory on the CPU)
  // held for its tensors: q, k, v and out packed, and kv_lens (AllocatePacked). The backend's
  // workspace comes on top; it is known on the worker (CallWorkspaceBytes), where plan-building
  // backends (cudnn) can build the plan it depends on.
  int64_t tensor_bytes = 0;
  int64_t output_bytes = 0;  // out alone: a copy of it back to the host is this large
  // With a stop token, RunAttention runs the call in PlanPieces(problem, max_piece_flops) pieces.
  double max_piece_flops = 0;  // 0: one piece
  int64_t pieces = 1;
  double largest_piece_flops = 0;  // every key counted (LargestPieceFlops)
  // The float64 reference on the host (ReferenceAttention) rather than a backend's call on the
  // context: the numerics check's reference for small problems.
  bool host_reference = false;
};

// One call of `backend` on `p` (valid), in pieces of at most `max_piece_flops` (0: whole).
CallPlan PlanCall(const Backend& backend, const AttentionProblem& p, double max_piece_flops = 0);

}  // namespace attn
