#include "attn/plan.h"

#include <cmath>

#include "attn/attention.h"

namespace attn {
namespace {

// Past this many pieces a call is not cut on paper: LargestPieceFlops would search divisors of
// dimensions a request of a few bytes can make huge, and such a call (thousands of seconds at
// any rate) is refused by cost admission anyway. Its plan then says one piece of every FLOP,
// the most conservative answer.
constexpr double kMaxPlannedPieces = 1e5;

}  // namespace

CallPlan PlanCall(const Backend& backend, const AttentionProblem& p, double max_piece_flops) {
  CallPlan plan;
  plan.backend = &backend;
  plan.problem = p;
  const AttentionProblem all = WithAllKeys(p);
  plan.flops = AttentionFlops(all);
  plan.bytes = AttentionMinBytes(all);
  const int64_t e = DTypeSize(p.dtype);
  plan.output_bytes = QueryElements(p) * e;
  plan.tensor_bytes = 2 * plan.output_bytes + 2 * KeyValueElements(p) * e +
                      static_cast<int64_t>(p.kv_lens.size() * sizeof(int32_t));
  plan.max_piece_flops = max_piece_flops;
  plan.largest_piece_flops = plan.flops;
  if (max_piece_flops > 0 && plan.flops > max_piece_flops) {
    if (plan.flops / max_piece_flops <= kMaxPlannedPieces) {
      const PieceSummary pieces = SummarisePieces(p, max_piece_flops);
      plan.pieces = pieces.count;
      plan.largest_piece_flops = pieces.largest_flops;
    } else {
      plan.pieces = static_cast<int64_t>(std::ceil(plan.flops / max_piece_flops));
    }
  }
  return plan;
}

}  // namespace attn
