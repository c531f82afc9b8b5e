#include "timing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace cuco_harness {

double percentile(std::vector<double> xs, double q) {
  if (xs.empty()) throw std::invalid_argument("percentile of an empty sample");
  std::sort(xs.begin(), xs.end());
  double pos = q / 100.0 * (xs.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, xs.size() - 1);
  double frac = pos - lo;
  return xs[lo] + (xs[hi] - xs[lo]) * frac;
}

TimingSummary summarize(const std::vector<std::vector<double>>& per_rank_ms) {
  TimingSummary s;
  if (per_rank_ms.empty()) throw std::invalid_argument("timing summary of zero ranks");
  s.min_ms = INFINITY;
  for (size_t r = 0; r < per_rank_ms.size(); ++r) {
    const auto& xs = per_rank_ms[r];
    double med = percentile(xs, 50);
    s.per_rank_median_ms.push_back(med);
    s.per_rank_p10_ms.push_back(percentile(xs, 10));
    s.per_rank_p90_ms.push_back(percentile(xs, 90));
    double mn = *std::min_element(xs.begin(), xs.end());
    s.per_rank_min_ms.push_back(mn);
    s.min_ms = std::min(s.min_ms, mn);
    if (r == 0 || med > s.max_median_ms) {
      s.max_median_ms = med;
      s.max_rank = static_cast<int>(r);
    }
  }
  double med = s.per_rank_median_ms[s.max_rank];
  s.spread = med > 0 ? (s.per_rank_p90_ms[s.max_rank] - s.per_rank_p10_ms[s.max_rank]) / med : 0.0;
  return s;
}

}  // namespace cuco_harness
