// The candidate skeleton: state every device-initiated candidate keeps and the bodies of the four candidate-ABI
// entry points. A rendered candidate writes the four extern "C" functions itself (the static check wants them
// in the file) and has each call the template here with its workload type W, which provides:
//
//   using State = ...;                              // derives from cuco::kit::Base
//   static constexpr size_t kLibWorkspaceBytes;    // library scratch at the start of ctx->workspace
//   static cuco::kit::Needs needs(const cuco_ctx*);  // the EVOLVE block's requirements
//   static int setup(cuco_ctx*, State*);           // workload state (library handles, plans)
//   static int enqueue(cuco_ctx*, State*);         // the EVOLVE block's operation
//   static void teardown(State*);
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "cuco/abi.h"
#include "cuco/kit/layout.cuh"
#include "cuco/kit/stream_sync.cuh"
#include "cuco/lsa.cuh"

namespace cuco {
namespace kit {

constexpr int kMaxRanks = 72;  // one NVLink domain at most (NVL72)
constexpr int kMaxOwnStreams = 2;

// What a candidate asks of the harness (filled by the EVOLVE block).
struct Needs {
  size_t flag_bytes = 0;  // plain device flags, after the library workspace, zeroed once
  size_t sym_bytes = 0;   // symmetric flags (ctx->symmetric_workspace), zeroed once
  int lsa_barriers = 0;   // >= CTAs that open an LSA barrier session
  int gin_signals = 0;
  int gin_required = 0;
  size_t nvshmem_bytes = 0;  // NVSHMEM symmetric workspace (ctx->nvshmem_workspace); > 0 makes it an NVSHMEM program
  // Streams beside the harness's two, created and destroyed by the skeleton (a candidate never creates one): e.g.
  // a second role on the same GPU at W = 1 that must not queue behind the first. At most kMaxOwnStreams.
  int own_streams = 0;
};

// The device epoch word: one uint32 in its own 256-byte slot after the block's flags in ctx->workspace, zeroed with
// them when the harness allocates the workspace. launch() advances it on the device (stream_sync.cuh), so a launch
// captured in a CUDA graph takes a new epoch on every replay.
constexpr size_t kEpochSlotBytes = 256;
inline size_t epoch_offset(size_t lib_bytes, const Needs& n) { return (lib_bytes + n.flag_bytes + 255) / 256 * 256; }

struct Base {
  cudaEvent_t ev_start = nullptr, ev_side = nullptr;
  Needs needs;
  // Where this launch's epoch lives (device memory, never read by the host): kernels take this pointer and load
  // the epoch at their start (cuco::kit::load_epoch); stream waits and sets take it too.
  uint32_t* epoch_at = nullptr;
  cudaStream_t own_stream[kMaxOwnStreams] = {};  // Needs::own_streams of them, non-blocking; forked by the block
  // Peers' symmetric buffers as this rank maps them (null for this rank and non-symmetric buffers), resolved
  // once at setup so host-issued copy-engine transfers can address them.
  char* peer[CUCO_MAX_BUFFERS][kMaxRanks] = {};
};

inline char* peer_base(Base* st, int buffer, int rank) {
  return (buffer < CUCO_MAX_BUFFERS && rank >= 0 && rank < kMaxRanks) ? st->peer[buffer][rank] : nullptr;
}

// Stream s waits until *flag reaches this launch's epoch (or the previous launch's: back = kPrevLaunch).
inline int stream_wait_epoch(Base* st, cudaStream_t s, const uint32_t* flag, int back = kThisLaunch) {
  return stream_wait_epoch(s, flag, st->epoch_at, back);
}

// *flag := this launch's epoch after the work before it on stream s.
inline int stream_set_epoch(Base* st, cudaStream_t s, uint32_t* flag) {
  return stream_set_epoch(s, flag, st->epoch_at);
}

// flags[0..n) := this launch's epoch after the work before them on stream s (one kernel).
inline int stream_set_epochs(Base* st, cudaStream_t s, uint32_t* flags, int n) {
  return stream_set_epochs(s, flags, n, st->epoch_at);
}

inline int launch_ok() { return cudaGetLastError() == cudaSuccess ? 0 : 64; }

__global__ void peer_bases_kernel(ncclDevComm dc, ncclWindow_t win, int me, int world, char** out) {
  const int p = threadIdx.x;
  if (p < world) out[p] = p == me ? nullptr : cuco::lsa::peer_ptr<char>(dc, win, 0, me, p);
}

// Resolve st->peer for every symmetric buffer of a single-node world (setup only: it synchronises).
inline int resolve_peers(cuco_ctx* ctx, Base* st) {
  if (!ctx->has_devcomm || ctx->world > kMaxRanks || ctx->world != ctx->local_world) return 0;
  char** d = nullptr;
  if (cudaMalloc(&d, sizeof(char*) * kMaxRanks) != cudaSuccess) return 8;
  int rc = 0;
  for (int b = 0; b < ctx->nbuffers && b < CUCO_MAX_BUFFERS && !rc; ++b) {
    if (!ctx->buffers[b].window) continue;
    peer_bases_kernel<<<1, kMaxRanks, 0, ctx->stream>>>(ctx->devcomm, ctx->buffers[b].window, ctx->rank, ctx->world,
                                                         d);
    if (cudaMemcpyAsync(st->peer[b], d, sizeof(char*) * ctx->world, cudaMemcpyDeviceToHost, ctx->stream) !=
            cudaSuccess ||
        cudaStreamSynchronize(ctx->stream) != cudaSuccess)
      rc = 9;
  }
  cudaFree(d);
  return rc;
}

template <class W>
int requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  const Needs n = W::needs(ctx);
  req->workspace_bytes = epoch_offset(W::kLibWorkspaceBytes, n) + kEpochSlotBytes;  // library | flags | epoch
  req->symmetric_workspace_bytes = n.sym_bytes;
  req->lsa_barrier_count = n.lsa_barriers;
  req->gin_signal_count = n.gin_signals;
  req->gin_context_count = n.gin_required ? 1 : 0;
  req->gin_required = n.gin_required;
  req->uses_nvshmem = n.nvshmem_bytes > 0;
  req->nvshmem_workspace_bytes = n.nvshmem_bytes;
  return 0;
}

template <class W>
int setup(cuco_ctx* ctx) {
  typename W::State* st = new typename W::State();
  ctx->candidate_state = st;
  st->needs = W::needs(ctx);
  const size_t epoch_off = epoch_offset(W::kLibWorkspaceBytes, st->needs);
  if (!ctx->workspace || ctx->workspace_bytes < epoch_off + kEpochSlotBytes) return 2;
  st->epoch_at = (uint32_t*)((char*)ctx->workspace + epoch_off);
  if (st->needs.sym_bytes && (!ctx->symmetric_workspace.ptr || ctx->symmetric_workspace.bytes < st->needs.sym_bytes))
    return 3;
  if (st->needs.lsa_barriers && !ctx->has_devcomm) return 4;
  if (st->needs.nvshmem_bytes && (!ctx->nvshmem_workspace || ctx->nvshmem_workspace_bytes < st->needs.nvshmem_bytes))
    return 8;  // the harness did not bring NVSHMEM up for this candidate
  if (st->needs.own_streams < 0 || st->needs.own_streams > kMaxOwnStreams) return 10;
  for (int i = 0; i < st->needs.own_streams; ++i)
    if (cudaStreamCreateWithFlags(&st->own_stream[i], cudaStreamNonBlocking) != cudaSuccess) return 10;
  int rc = W::setup(ctx, st);
  if (rc) return rc;
  if (cudaEventCreateWithFlags(&st->ev_start, cudaEventDisableTiming) != cudaSuccess) return 5;
  if (cudaEventCreateWithFlags(&st->ev_side, cudaEventDisableTiming) != cudaSuccess) return 5;
  return resolve_peers(ctx, st);
}

// One operation: advance the device epoch, fork the side stream off ctx->stream, enqueue the block's work, join it
// back. Nothing here depends on ctx->iteration or any other host value that changes per launch, so a captured
// launch replays as a fresh one: every rank runs the same number of launches (eager or replayed), so the ranks'
// epoch words agree, as ctx->iteration did.
template <class W>
int launch(cuco_ctx* ctx) {
  typename W::State* st = (typename W::State*)ctx->candidate_state;
  advance_epoch_kernel<<<1, 1, 0, ctx->stream>>>(st->epoch_at);  // before ev_start: the side stream sees it too
  if (cudaGetLastError() != cudaSuccess) return 6;
  if (cudaEventRecord(st->ev_start, ctx->stream) != cudaSuccess) return 6;
  if (cudaStreamWaitEvent(ctx->side_stream, st->ev_start, 0) != cudaSuccess) return 6;
  int rc = W::enqueue(ctx, st);
  if (cudaEventRecord(st->ev_side, ctx->side_stream) != cudaSuccess) return 7;
  if (cudaStreamWaitEvent(ctx->stream, st->ev_side, 0) != cudaSuccess) return 7;
  return rc;
}

template <class W>
int teardown(cuco_ctx* ctx) {
  typename W::State* st = (typename W::State*)ctx->candidate_state;
  if (!st) return 0;
  W::teardown(st);
  if (st->ev_start) cudaEventDestroy(st->ev_start);
  if (st->ev_side) cudaEventDestroy(st->ev_side);
  for (cudaStream_t s : st->own_stream)
    if (s) cudaStreamDestroy(s);
  delete st;
  ctx->candidate_state = nullptr;
  return 0;
}

}  // namespace kit
}  // namespace cuco
