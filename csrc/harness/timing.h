// Statistics of per-rank iteration times (milliseconds) and the loop that measures them.
#pragma once

#include <vector>

namespace cuco_harness {

struct TimingSummary {
  std::vector<double> per_rank_median_ms, per_rank_min_ms, per_rank_p10_ms, per_rank_p90_ms;
  double max_median_ms = 0;  // max over ranks of the per-rank medians: the operation's time
  int max_rank = 0;          // the rank that has it
  double min_ms = 0;         // fastest single iteration on any rank
  double spread = 0;         // (p90 - p10) / median of max_rank
};

// Linear-interpolation percentile (numpy's default), q in [0, 100]; xs need not be sorted.
double percentile(std::vector<double> xs, double q);

// Summary over ranks; every rank needs at least one sample.
TimingSummary summarize(const std::vector<std::vector<double>>& per_rank_ms);

}  // namespace cuco_harness
