#include <algorithm>
#include <cmath>
#include <numeric>

#include "attn/bench.h"

namespace attn {

SampleStats Summarize(std::vector<double> ms) {
  SampleStats s;
  s.count = static_cast<int64_t>(ms.size());
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  // Linear interpolation between the order statistics at rank q * (n - 1).
  auto quantile = [&ms](double q) {
    const double rank = q * static_cast<double>(ms.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(rank));
    const size_t hi = std::min(lo + 1, ms.size() - 1);
    return ms[lo] + (rank - static_cast<double>(lo)) * (ms[hi] - ms[lo]);
  };
  s.min = ms.front();
  s.median = quantile(0.5);
  s.p10 = quantile(0.1);
  s.p90 = quantile(0.9);
  s.p99 = quantile(0.99);
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  if (ms.size() > 1) {
    double ss = 0;
    for (double x : ms) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(ms.size() - 1));
  }
  return s;
}

}  // namespace attn
