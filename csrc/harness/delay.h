// Delayed-arrival verification (see delay.cu).
#pragma once

#include <cuda_runtime.h>

namespace cuco_harness {

// Queue a kernel on `stream` that holds it for `microseconds` (nothing when <= 0).
cudaError_t enqueue_delay(cudaStream_t stream, double microseconds);

// Rank `rank`'s delay for a base delay of `base_us`: base_us * (1 + rank / 2). Staggered, so that every rank's
// communication starts base_us / 2 later than the rank below it: with one delay for all, a reader and its writer
// start equally late, and a reader that skips its wait can win the race (it did at W = 2). Now whoever reads
// from a higher rank reads before that rank has written.
inline double staggered_delay_us(double base_us, int rank) { return base_us * (1.0 + 0.5 * rank); }

}  // namespace cuco_harness
