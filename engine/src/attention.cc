#include "attn/attention.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace attn {
namespace {

// The largest divisor of n that is at most `cap` (>= 1).
int64_t LargestDivisorAtMost(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, std::max<int64_t>(cap, 1)); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

// Query rows of a piece come in multiples of this (the kernels' query tile) where they can.
constexpr int64_t kRowBand = 64;

// How PlanPieces cuts a problem: per level the size of a piece (the last may be smaller).
struct Cut {
  int64_t batch, heads, rows;
};

// Cuts by the FLOPs of every key (WithAllKeys): with kv_lens, a piece of batch elements with the
// longest lengths then stays within max_flops too, and the pieces do not depend on the lengths.
Cut ChooseCut(const AttentionProblem& p, double max_flops) {
  const double whole = AttentionFlops(WithAllKeys(p));
  if (max_flops <= 0 || whole <= max_flops) return {p.batch, p.num_heads, p.q_len};
  // Unmasked: bands of query rows across every batch and head first, so each piece still has
  // B * N * rows / 64 tiles to fill a GPU (a piece of one head's rows would be a few blocks).
  if (!p.causal) {
    const int64_t rows = static_cast<int64_t>(max_flops / (whole / static_cast<double>(p.q_len)));
    if (rows >= kRowBand) return {p.batch, p.num_heads, rows - rows % kRowBand};
  }
  const double per_batch = whole / static_cast<double>(p.batch);
  if (per_batch <= max_flops) {
    return {LargestDivisorAtMost(p.batch, static_cast<int64_t>(max_flops / per_batch)), p.num_heads,
            p.q_len};
  }
  // Head chunks are whole K/V groups (the group's query heads read one K/V head), or a divisor
  // of one group, so every piece is again a valid GQA problem.
  const double per_head = per_batch / static_cast<double>(p.num_heads);
  const int64_t group = p.GroupSize();
  const int64_t fit = static_cast<int64_t>(max_flops / per_head);
  const int64_t heads = fit >= group ? group * LargestDivisorAtMost(p.num_kv_heads, fit / group)
                                     : LargestDivisorAtMost(group, fit);
  if (static_cast<double>(heads) * per_head <= max_flops || p.causal) return {1, heads, p.q_len};
  // One unmasked head is still too large: query rows (each sees every key, so any row range is
  // the same problem with fewer rows).
  const double per_row = per_head / static_cast<double>(p.q_len);
  int64_t rows = std::max<int64_t>(1, static_cast<int64_t>(max_flops / per_row));
  if (rows >= kRowBand) rows -= rows % kRowBand;
  return {1, 1, std::min(rows, p.q_len)};
}

int64_t Chunks(int64_t n, int64_t size) { return (n + size - 1) / size; }

// How many pieces `cut` makes of `p`.
int64_t CountOf(const AttentionProblem& p, const Cut& cut) {
  return Chunks(p.batch, cut.batch) * Chunks(p.num_heads, cut.heads) * Chunks(p.q_len, cut.rows);
}

// The FLOPs of `cut`'s first piece, the largest, every key counted.
double FirstPieceFlops(const AttentionProblem& p, const Cut& cut) {
  return AttentionFlops(WithAllKeys(PieceProblem(p, {0, cut.batch, 0, cut.heads, 0, cut.rows})));
}

}  // namespace

std::vector<Piece> PlanPieces(const AttentionProblem& p, double max_flops) {
  const Cut cut = ChooseCut(p, max_flops);
  std::vector<Piece> pieces;
  pieces.reserve(static_cast<size_t>(CountOf(p, cut)));
  for (int64_t b = 0; b < p.batch; b += cut.batch) {
    for (int64_t n = 0; n < p.num_heads; n += cut.heads) {
      for (int64_t t = 0; t < p.q_len; t += cut.rows) {
        pieces.push_back({b, std::min(p.batch, b + cut.batch), n,
                          std::min(p.num_heads, n + cut.heads), t,
                          std::min(p.q_len, t + cut.rows)});
      }
    }
  }
  return pieces;
}

double LargestPieceFlops(const AttentionProblem& p, double max_flops) {
  return FirstPieceFlops(p, ChooseCut(p, max_flops));
}

int64_t PieceCount(const AttentionProblem& p, double max_flops) {
  return CountOf(p, ChooseCut(p, max_flops));
}

PieceSummary SummarisePieces(const AttentionProblem& p, double max_flops) {
  const Cut cut = ChooseCut(p, max_flops);
  return {CountOf(p, cut), FirstPieceFlops(p, cut)};
}

AttentionProblem PieceProblem(const AttentionProblem& p, const Piece& piece) {
  AttentionProblem sub = p;
  sub.batch = piece.b1 - piece.b0;
  sub.num_heads = piece.n1 - piece.n0;
  sub.num_kv_heads = std::max<int64_t>(1, sub.num_heads / p.GroupSize());
  sub.q_len = piece.t1 - piece.t0;
  if (!p.kv_lens.empty()) {
    sub.kv_lens.assign(p.kv_lens.begin() + piece.b0, p.kv_lens.begin() + piece.b1);
  }
  return sub;
}

AttentionTensors PieceTensors(const AttentionProblem& p, const AttentionTensors& t,
                              const Piece& piece) {
  const int64_t e = DTypeSize(p.dtype);
  const AttentionProblem sub = PieceProblem(p, piece);
  const auto view = [&](const TensorView& whole, int64_t row, int64_t head, int64_t rows,
                        int64_t heads) {
    TensorView v = whole;
    const int64_t offset = whole.Offset(piece.b0, row, head) * e;
    v.data = static_cast<char*>(whole.data) + offset;
    v.capacity_bytes = whole.capacity_bytes - offset;
    v.shape = {sub.batch, rows, heads, whole.shape[3]};
    return v;
  };
  const int64_t kv_head = piece.n0 / p.GroupSize();
  return {view(t.q, piece.t0, piece.n0, sub.q_len, sub.num_heads),
          view(t.k, 0, kv_head, sub.kv_len, sub.num_kv_heads),
          view(t.v, 0, kv_head, sub.kv_len, sub.num_kv_heads),
          view(t.out, piece.t0, piece.n0, sub.q_len, sub.num_heads),
          t.kv_lens == nullptr ? nullptr : t.kv_lens + piece.b0};
}

namespace {

// The pieces RunAttention cuts a call into: several only where something can stop the call, and
// never inside a graph capture (waiting on the stream is not allowed there).
std::vector<Piece> CallPieces(const AttentionProblem& problem, const DeviceContext& context,
                              const RunOptions& options) {
  if (options.stop != nullptr && !context.Capturing()) {
    return PlanPieces(problem, options.max_piece_flops);
  }
  return {{0, problem.batch, 0, problem.num_heads, 0, problem.q_len}};
}

// One workspace for every piece: the largest any piece's shape needs (a few shapes at most);
// `options` carry whole_call when there are several.
absl::StatusOr<int64_t> PiecesWorkspaceBytes(const Backend& backend,
                                             const AttentionProblem& problem,
                                             const std::vector<Piece>& pieces,
                                             DeviceContext& context, const RunOptions& options) {
  if (pieces.size() == 1) return backend.WorkspaceBytes(problem, context, options);
  int64_t workspace_bytes = 0;
  std::set<std::tuple<int64_t, int64_t, int64_t>> shapes;
  for (const Piece& piece : pieces) {
    if (!shapes.insert({piece.b1 - piece.b0, piece.n1 - piece.n0, piece.t1 - piece.t0}).second)
      continue;
    const AttentionProblem sub = PieceProblem(problem, piece);
    if (auto s = backend.CheckSupport(sub, context.info()); !s.ok()) return s;
    auto bytes = backend.WorkspaceBytes(sub, context, options);
    if (!bytes.ok()) return bytes.status();
    workspace_bytes = std::max(workspace_bytes, *bytes);
  }
  return workspace_bytes;
}

}  // namespace

absl::StatusOr<int64_t> CallWorkspaceBytes(const Backend& backend, const AttentionProblem& problem,
                                           DeviceContext& context, const RunOptions& options) {
  const std::vector<Piece> pieces = CallPieces(problem, context, options);
  RunOptions piece_options = options;
  if (pieces.size() > 1) piece_options.whole_call = &problem;
  return PiecesWorkspaceBytes(backend, problem, pieces, context, piece_options);
}

absl::Status RunAttention(const Backend& backend, const AttentionProblem& problem,
                          const AttentionTensors& tensors, DeviceContext& context,
                          const RunOptions& options) {
  if (auto s = CheckStop(options.stop); !s.ok()) return s;
  if (auto s = ValidateProblem(problem); !s.ok()) return s;
  if (auto s = ValidateTensors(tensors, problem); !s.ok()) return s;
  if (tensors.out.memory != context.memory()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensors: live in ", tensors.out.memory == MemoryKind::kHost ? "host" : "device",
        " memory but the context runs on ", context.info().ToString()));
  }
  if (auto s = backend.CheckSupport(problem, context.info()); !s.ok()) return s;
  const std::vector<Piece> pieces = CallPieces(problem, context, options);
  RunOptions piece_options = options;
  if (pieces.size() > 1) piece_options.whole_call = &problem;
  auto workspace_bytes = PiecesWorkspaceBytes(backend, problem, pieces, context, piece_options);
  if (!workspace_bytes.ok()) return workspace_bytes.status();
  auto workspace = context.arena().Allocate(*workspace_bytes);
  if (!workspace.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        backend.name(), " workspace for ", problem.ToString(), ": ", workspace.status().message()));
  }
  // The block returns to the arena when this function ends while the kernels may still be
  // queued: safe, because everything that can reuse the arena's memory is ordered after them on
  // the context's one stream.
  if (pieces.size() == 1) {
    return backend.Run({problem, tensors, workspace->data(), workspace->size(), context, options});
  }
  // At most two pieces queued: before queueing piece i, wait for piece i - 2, then check the
  // stop. A stop waits for the queued pieces, so the stream is idle when the error returns.
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i >= 2) {
      if (auto s = context.WaitForMark(static_cast<int>(i % 2)); !s.ok()) return s;
    }
    if (auto s = CheckStop(options.stop); !s.ok()) {
      if (auto sync = context.Synchronize(); !sync.ok()) return sync;
      return s;
    }
    const AttentionProblem sub = PieceProblem(problem, pieces[i]);
    const AttentionTensors views = PieceTensors(problem, tensors, pieces[i]);
    if (auto s =
            backend.Run({sub, views, workspace->data(), workspace->size(), context, piece_options});
        !s.ok()) {
      return s;
    }
    if (auto s = context.MarkQueued(static_cast<int>(i % 2)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace attn
