// The engine's entry point for one attention call: validate, check support, allocate, run.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "attn/backend.h"
#include "attn/device.h"
#include "attn/problem.h"
#include "attn/tensor.h"

namespace attn {

// Checks `problem` and `tensors` (which must live in `context`'s memory), the backend's support
// on `context`'s device, takes the workspace from `context`'s arena, and runs. On a GPU the work
// is queued on the context's stream when this returns; synchronise before reading `out` on the
// host. Nothing is launched unless every check passed. With options.stop set the call may run in
// pieces and end early with the stop's reason (see RunOptions).
absl::Status RunAttention(const Backend& backend, const AttentionProblem& problem,
                          const AttentionTensors& tensors, DeviceContext& context,
                          const RunOptions& options = {});

// The workspace RunAttention takes from the arena for the same arguments: the backend's for the
// problem, or with options.stop set and the call cut in pieces, the largest any piece needs
// (backends that build a plan to know, cudnn, build the pieces' plans, the ones the call runs).
absl::StatusOr<int64_t> CallWorkspaceBytes(const Backend& backend, const AttentionProblem& problem,
                                           DeviceContext& context, const RunOptions& options = {});

// One part of a call: batch rows [b0, b1), query heads [n0, n1) and query rows [t0, t1). A
// piece's query heads share whole K/V heads, or lie within one K/V head's group.
struct Piece {
  int64_t b0 = 0, b1 = 0, n0 = 0, n1 = 0, t0 = 0, t1 = 0;
  bool operator==(const Piece&) const = default;
};

// Splits `p` (valid) into pieces of at most `max_flops` each, where it can. Unmasked problems:
// bands of query rows (multiples of 64) across every batch and head, so each piece keeps the
// whole problem's parallelism; where one 64-row band is too much, and for causal problems: over
// the batch, then query heads, then (unmasked only) one head's rows. Pieces of one level are
// equal in size but for the last, so a backend that builds a plan per shape builds few. One causal
// head is never split (its mask is aligned to the first query row), so a piece exceeds `max_flops`
// only when one causal (b, head) does: see LargestPieceFlops. max_flops <= 0 or a problem within
// it: one piece, the whole problem.
std::vector<Piece> PlanPieces(const AttentionProblem& p, double max_flops);

// PlanPieces sizes pieces by the FLOPs of every key (WithAllKeys(p)): with kv_lens the pieces are
// those of the same problem without, each within max_flops whatever its lengths.
//
// The FLOPs of the largest piece PlanPieces(p, max_flops) makes, every key counted, without
// listing them.
double LargestPieceFlops(const AttentionProblem& p, double max_flops);

// How many pieces PlanPieces(p, max_flops) makes, without listing them.
int64_t PieceCount(const AttentionProblem& p, double max_flops);

// PieceCount and LargestPieceFlops together, the cut chosen once (a call plan needs both).
struct PieceSummary {
  int64_t count = 1;
  double largest_flops = 0;
};
PieceSummary SummarisePieces(const AttentionProblem& p, double max_flops);

// The sub-problem a piece computes (kv_lens sliced to its batch rows) and its views into `t`
// (strides kept, data and kv_lens offset).
AttentionProblem PieceProblem(const AttentionProblem& p, const Piece& piece);
AttentionTensors PieceTensors(const AttentionProblem& p, const AttentionTensors& t,
                              const Piece& piece);

}  // namespace attn
