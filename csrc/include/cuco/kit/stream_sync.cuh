// Stream-ordered epoch flags with the launch epoch on the device, so that a launch captured in a CUDA graph
// replays correctly: a stream waits until a flag reaches the current epoch, or raises it after its prior work.
//
// The epoch of a launch lives in one uint32 per rank in the candidate's workspace (the skeleton's epoch word,
// zeroed with the flags when the workspace is allocated). launch() advances it on ctx->stream before it forks the
// side stream, so every kernel of the launch, on either stream, finds the new value there. Nothing host-side
// carries an epoch: a graph that captured one launch advances the word on every replay, as eager launches do.
//
// Performance trade: cuStreamWaitValue32 / cuStreamWriteValue32 take their value as a host argument, which a graph
// freezes, so they are not used for epochs. A stream wait is a one-thread kernel instead: it holds one warp of one
// SM while it spins (the stream it sits in waits anyway), and costs a kernel launch (a few microseconds of
// latency, mostly hidden behind the work already queued). A stream set is a one-thread kernel too.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuco/lsa.cuh"

namespace cuco {
namespace kit {

// Which launch's epoch a wait is for: this launch's, or the one before (e.g. "peers finished reading what the
// previous launch published"; on the first launch zero-initialised flags have reached it).
enum EpochOf : int { kThisLaunch = 0, kPrevLaunch = 1 };

// The epoch at `at` (the skeleton's epoch word), read once by a kernel of the launch. A plain load: the advance
// kernel ran before it in stream order (the side stream is forked after it).
__device__ __forceinline__ uint32_t load_epoch(const uint32_t* at, int back = kThisLaunch) {
  const uint32_t e = *at;
  return back == kPrevLaunch ? cuco::lsa::prev_epoch(e) : e;
}

// The skeleton's per-launch step: the next epoch (never 0, the wrap rule of cuco::lsa::epoch_of).
__global__ void advance_epoch_kernel(uint32_t* at) { *at = cuco::lsa::next_epoch(*at); }

__global__ void wait_epoch_kernel(const uint32_t* flag, const uint32_t* at, int back) {
  cuco::lsa::wait_epoch(flag, load_epoch(at, back));
}

__global__ void set_epoch_kernel(uint32_t* flag, const uint32_t* at) {
  __threadfence_system();
  cuco::lsa::store_release_sys(flag, load_epoch(at));
}

__global__ void set_epochs_kernel(uint32_t* flags, int n, const uint32_t* at) {
  __threadfence_system();
  const uint32_t e = load_epoch(at);
  for (int i = threadIdx.x; i < n; i += blockDim.x) cuco::lsa::store_release_sys(flags + i, e);
}

// Stream s waits until *flag (device memory) reaches the epoch at `at` (this launch's, or the previous one's).
// 0, or 63 on failure. One thread of one CTA: the smallest footprint a spinning kernel can have.
inline int stream_wait_epoch(cudaStream_t s, const uint32_t* flag, const uint32_t* at, int back = kThisLaunch) {
  wait_epoch_kernel<<<1, 1, 0, s>>>(flag, at, back);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

// *flag := the epoch at `at` once the work before it on stream s is complete (release at system scope). 0, or 63.
inline int stream_set_epoch(cudaStream_t s, uint32_t* flag, const uint32_t* at) {
  set_epoch_kernel<<<1, 1, 0, s>>>(flag, at);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

// flags[0..n) := the epoch at `at` once the work before them on stream s is complete: one kernel for n flags
// (e.g. every chunk a single copy covered). 0, or 63.
inline int stream_set_epochs(cudaStream_t s, uint32_t* flags, int n, const uint32_t* at) {
  if (n <= 0) return 0;
  set_epochs_kernel<<<1, 32, 0, s>>>(flags, n, at);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

}  // namespace kit
}  // namespace cuco
