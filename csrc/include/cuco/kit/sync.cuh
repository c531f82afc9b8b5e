// Synchronisation snippets per sync_scope, as device functions a rendered block calls:
//   world / team: one LSA barrier over the world or the LSA team, run as its own one-CTA kernel so that
//                 stream order makes it cover every CTA of the kernels before and after it;
//   signal:       per-peer epoch flags in the symmetric workspace (publish_epoch raises one on a peer;
//                 stream_publish_epoch does it in stream order, after a host-issued copy into that peer).
#pragma once

#include <nccl.h>
#include <nccl_device.h>
#include <stdint.h>

#include "cuco/kit/stream_sync.cuh"
#include "cuco/lsa.cuh"

namespace cuco {
namespace kit {

// One LSA barrier for a whole CTA over the world (world = true) or the LSA team.
__device__ inline void cta_lsa_barrier(const ncclDevComm& dc, bool world) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, world ? ncclTeamWorld(dc) : ncclTeamLsa(dc),
                                         dc.lsaBarrier, 0);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Raise word `word` (uint32, in the symmetric window win_sym) on rank `peer` to `epoch`, with release
// semantics at system scope: what this thread wrote before is visible to the peer once it sees the epoch.
__device__ inline void publish_epoch(const ncclDevComm& dc, ncclWindow_t win_sym, size_t word, int me, int peer,
                                     uint32_t epoch) {
  cuco::lsa::store_release_sys(cuco::lsa::peer_ptr<uint32_t>(dc, win_sym, 4 * word, me, peer), epoch);
}

__global__ void publish_epoch_kernel(ncclDevComm dc, ncclWindow_t win_sym, size_t word, int me, int peer,
                                     const uint32_t* at) {
  __threadfence_system();
  publish_epoch(dc, win_sym, word, me, peer, load_epoch(at));
}

// Word `word` on rank `peer` := the epoch at `at` once the work before it on stream s is complete (e.g. copy-engine
// copies pushed into that peer), release at system scope. One thread of one CTA. 0, or 63 on failure.
inline int stream_publish_epoch(cudaStream_t s, const ncclDevComm& dc, ncclWindow_t win_sym, size_t word, int me,
                                int peer, const uint32_t* at) {
  publish_epoch_kernel<<<1, 1, 0, s>>>(dc, win_sym, word, me, peer, at);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

}  // namespace kit
}  // namespace cuco
