// Delayed-arrival verification (see delay.cu).
#pragma once

#include <cuda_runtime.h>

namespace cuco_harness {

// Queue a kernel on `stream` that holds it for `microseconds` (nothing when <= 0).
cudaError_t enqueue_delay(cudaStream_t stream, double microseconds);

}  // namespace cuco_harness
