// Inputs are widened to double once per call (into the scratch), every score, softmax and
// weighted sum accumulates in double, and the output is rounded once to the problem's dtype.
// Rows (b, n, t) are spread over a thread pool.
#include "attn/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/thread_pool.h"
#include "visible_keys.h"

namespace attn {
namespace {

// Rows handed to a thread at once: enough to amortise scheduling, few enough to balance causal.
constexpr int64_t kRowsPerTask = 16;
// With a stop token, keys scored between its checks: a few ms of one thread's work at H = 128,
// so a stop takes effect quickly however long the rows are.
constexpr int64_t kKeysPerStopCheck = 8192;

// Copies a strided view into packed BTNH doubles, one (b, l) slab per task.
void Widen(const TensorView& view, double* dst, int max_threads) {
  const int64_t L = view.shape[1], heads = view.shape[2], H = view.shape[3];
  HostPool().ParallelFor(
      view.shape[0] * L,
      [&](int64_t bl) {
        const int64_t b = bl / L, l = bl % L;
        for (int64_t hd = 0; hd < heads; ++hd) {
          const int64_t src = view.Offset(b, l, hd);
          double* out = dst + (bl * heads + hd) * H;
          for (int64_t h = 0; h < H; ++h) out[h] = LoadAsDouble(view.data, view.dtype, src + h);
        }
      },
      max_threads);
}

}  // namespace

absl::StatusOr<int64_t> ReferenceScratchBytes(const AttentionProblem& p) {
  const int64_t elements = QueryElements(p) + 2 * KeyValueElements(p);
  return CheckedMul(elements, static_cast<int64_t>(sizeof(double)), "reference workspace bytes");
}

absl::Status ReferenceAttention(const AttentionProblem& p, const AttentionTensors& t, void* scratch,
                                const StopToken* stop, int max_threads) {
  const int64_t B = p.batch, T = p.q_len, S = p.kv_len, N = p.num_heads, K = p.num_kv_heads,
                H = p.head_dim;
  double* q = static_cast<double*>(scratch);
  double* k = q + QueryElements(p);
  double* v = k + KeyValueElements(p);
  Widen(t.q, q, max_threads);
  Widen(t.k, k, max_threads);
  Widen(t.v, v, max_threads);

  const double scale = p.EffectiveScale();
  const int64_t group = p.GroupSize();
  const int64_t tasks_per_head = (T + kRowsPerTask - 1) / kRowsPerTask;
  // Set by the first task that sees the stop; the others then return at their next check.
  std::atomic<bool> stopped{false};
  const auto should_stop = [&] {
    if (stop == nullptr) return false;
    if (stopped.load(std::memory_order_relaxed)) return true;
    if (stop->Check().ok()) return false;
    stopped = true;
    return true;
  };
  HostPool().ParallelFor(
      B * N * tasks_per_head,
      [&](int64_t task) {
        const int64_t bn = task / tasks_per_head;
        const int64_t b = bn / N, n = bn % N, kh = n / group;
        const int64_t t_begin = (task % tasks_per_head) * kRowsPerTask;
        const int64_t t_end = std::min(T, t_begin + kRowsPerTask);
        const int64_t len = ClampedKvLen(t.kv_lens, b, S);
        std::vector<double> scores(static_cast<size_t>(S));
        std::vector<double> acc(static_cast<size_t>(H));
        for (int64_t row = t_begin; row < t_end; ++row) {
          if (should_stop()) return;
          const double* qr = q + ((b * T + row) * N + n) * H;
          const int64_t visible = VisibleKeys(len, row, p.causal);
          double max_score = -std::numeric_limits<double>::infinity();
          for (int64_t s = 0; s < visible; ++s) {
            if (s % kKeysPerStopCheck == kKeysPerStopCheck - 1 && should_stop()) return;
            const double* kr = k + ((b * S + s) * K + kh) * H;
            double dot = 0;
            for (int64_t h = 0; h < H; ++h) dot += qr[h] * kr[h];
            scores[s] = dot * scale;
            max_score = std::max(max_score, scores[s]);
          }
          double sum = 0;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t s = 0; s < visible; ++s) {
            const double w = std::exp(scores[s] - max_score);
            sum += w;
            const double* vr = v + ((b * S + s) * K + kh) * H;
            for (int64_t h = 0; h < H; ++h) acc[h] += w * vr[h];
          }
          const int64_t out_base = t.out.Offset(b, row, n);
          for (int64_t h = 0; h < H; ++h)  // no visible key (a length of 0): zeros
            StoreFromDouble(t.out.data, p.dtype, out_base + h, visible > 0 ? acc[h] / sum : 0.0);
        }
      },
      max_threads);
  if (stopped) return stop->Check();
  return absl::OkStatus();
}

}  // namespace attn
