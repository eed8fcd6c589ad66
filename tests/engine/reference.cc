#include "engine/reference.h"

#include <cmath>

namespace attn::testing {

std::vector<double> ReferenceAttention(const AttentionProblem& p, const std::vector<double>& q,
                                       const std::vector<double>& k, const std::vector<double>& v) {
  const int64_t B = p.batch, T = p.q_len, S = p.kv_len, N = p.num_heads, K = p.num_kv_heads,
                H = p.head_dim;
  const double scale = p.scale.value_or(1.0 / std::sqrt(static_cast<double>(H)));
  std::vector<double> out(static_cast<size_t>(B * T * N * H));
  std::vector<double> w(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t n = 0; n < N; ++n) {
      const int64_t kh = n * K / N;
      // Keys of this batch element: its length's first rows (all S without kv_lens).
      const int64_t len = p.kv_lens.empty() ? S : p.kv_lens[b];
      for (int64_t t = 0; t < T; ++t) {
        double max_logit = -INFINITY;
        for (int64_t s = 0; s < S; ++s) {
          if ((p.causal && s > t) || s >= len) {
            w[s] = -INFINITY;
            continue;
          }
          double dot = 0;
          for (int64_t h = 0; h < H; ++h) {
            dot += q[((b * T + t) * N + n) * H + h] * k[((b * S + s) * K + kh) * H + h];
          }
          w[s] = dot * scale;
          max_logit = std::fmax(max_logit, w[s]);
        }
        double total = 0;
        for (int64_t s = 0; s < S; ++s) {
          w[s] = std::exp(w[s] - max_logit);
          total += w[s];
        }
        for (int64_t h = 0; h < H; ++h) {
          double acc = 0;
          for (int64_t s = 0; s < S; ++s) acc += w[s] * v[((b * S + s) * K + kh) * H + h];
          out[((b * T + t) * N + n) * H + h] = acc / total;
        }
      }
    }
  }
  return out;
}

}  // namespace attn::testing
