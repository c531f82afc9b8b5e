// Reusable device-side helpers for LSA (NVLink load/store) communication.
//
//   * epoch flags: 32-bit flags that carry the launch epoch (a per-rank device word the kit's skeleton advances
//     once per launch, so CUDA-graph replays advance it too), compared with a rolling
//     "reached" test so they never need resetting between back-to-back launches;
//   * issuers: which thread group (ncclCoopThread / ncclCoopWarp / ncclCoopCta) moves a transfer, and how many
//     such groups a set of CTAs holds;
//   * copy16: a vectorised 16-byte copy loop (several loads in flight per thread) split over issuer groups;
//   * cta_arrive_last: per-chunk completion counting across CTAs, self-resetting;
//   * lsa_index / peer pointers: world rank -> LSA peer index -> pointer into a peer's symmetric window.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>

#include "cuco/epoch.cuh"

namespace cuco {
namespace lsa {

// ---- epochs and flags: cuco/epoch.cuh -----------------------------------------------------------------

// One thread waits, then the CTA proceeds (acquire is made CTA-wide by the fence + barrier).
__device__ inline void cta_wait_epoch(const uint32_t* p, uint32_t e) {
  if (threadIdx.x == 0) wait_epoch(p, e);
  __syncthreads();
}

// Counts CTAs that finished their share of one chunk. Every thread of the CTA calls it after writing its part;
// returns true in thread 0 of the last CTA to arrive (which then publishes the chunk's flag). The counter is
// reset by the last arriver, so it needs no epoch and survives any iteration numbering.
__device__ inline bool cta_arrive_last(uint32_t* counter, uint32_t nctas) {
  __syncthreads();
  bool last = false;
  if (threadIdx.x == 0) {
    __threadfence_system();
    uint32_t old = atomicAdd(counter, 1u);
    if (old == nctas - 1) {
      atomicExch(counter, 0u);
      __threadfence_system();
      last = true;
    }
  }
  return last;
}

// ---- issuers -------------------------------------------------------------------------------------------

// How many issuer groups of type Coop one CTA holds, and which one this thread is in.
// (issuer_groups(nctas) is the total over a set of nctas CTAs.)
template <typename Coop>
struct Issuer;

template <>
struct Issuer<ncclCoopThread> {
  __device__ static int per_cta() { return blockDim.x; }
  __device__ static int index_in_cta() { return threadIdx.x; }
};

template <>
struct Issuer<ncclCoopWarp> {
  __device__ static int per_cta() { return blockDim.x / 32; }
  __device__ static int index_in_cta() { return threadIdx.x / 32; }
};

template <>
struct Issuer<ncclCoopCta> {
  __device__ static int per_cta() { return 1; }
  __device__ static int index_in_cta() { return 0; }
};

// Group id of this thread among the issuer groups of a set of CTAs, given this CTA's index in the set.
template <typename Coop>
__device__ inline size_t issuer_group(int cta_in_set) {
  return (size_t)cta_in_set * Issuer<Coop>::per_cta() + Issuer<Coop>::index_in_cta();
}

template <typename Coop>
__device__ inline size_t issuer_groups(int nctas) {
  return (size_t)nctas * Issuer<Coop>::per_cta();
}

// ---- copies --------------------------------------------------------------------------------------------

// Copy n16 16-byte words. The words are cut into steps of kUnroll * coop.size() consecutive words; group
// `group` of `ngroups` takes steps group, group + ngroups, ... Each thread keeps kUnroll loads in flight, which
// is what hides NVLink latency. Remote (peer) sources are read with ld.global.cg (L2 only: peers rewrite them
// between launches). Both pointers must be 16-byte aligned.
template <int kUnroll, typename Coop>
__device__ inline void copy16(Coop coop, int4* __restrict__ dst, const int4* __restrict__ src, size_t n16,
                              size_t group, size_t ngroups) {
  const size_t lanes = (size_t)coop.size();
  const size_t lane = (size_t)coop.thread_rank();
  const size_t step = lanes * kUnroll;
  for (size_t base = group * step; base < n16; base += ngroups * step) {
    int4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t i = base + u * lanes + lane;
      if (i < n16) v[u] = __ldcg(src + i);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      size_t i = base + u * lanes + lane;
      if (i < n16) dst[i] = v[u];
    }
  }
}

// ---- peers ---------------------------------------------------------------------------------------------

// LSA peer index of world rank `peer`, for a world that is one LSA team (single node).
__device__ inline int lsa_index(const ncclDevComm& dc, int my_rank, int peer) {
  return peer - (my_rank - dc.lsaRank);
}

template <typename T>
__device__ inline T* peer_ptr(const ncclDevComm& dc, ncclWindow_t win, size_t offset, int my_rank, int peer) {
  return (T*)ncclGetLsaPointer(win, offset, lsa_index(dc, my_rank, peer));
}

}  // namespace lsa
}  // namespace cuco
