"""The frozen parts of a rendered GEMM+AllGather candidate: identical for every design point.

Everything here is outside the EVOLVE block: includes, the cuBLASLt plan cache, the stream-wait helper, the
candidate-ABI entry points (requirements, setup, launch with the side-stream fork/join, teardown). The block
supplies `block_needs(ctx)` (what to ask the harness for) and `enqueue(ctx, state)` (the operation).
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def lt_gemm_text() -> str:
    """lt_gemm.cuh without its include guard, inlined so a candidate is one self-contained file."""
    text = (_HERE / "lt_gemm.cuh").read_text()
    return text.replace("#pragma once\n", "")


HEAD = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <mma.h>

#include "cuco/abi.h"
#include "cuco/lsa.cuh"

// ---- cuBLASLt plans (frozen) ----------------------------------------------------------------------------
@LT_GEMM@
// ---- frozen helpers: buffers, GEMM plan cache, stream waits ---------------------------------------------
namespace cuco_ag {

// Buffer indices in ctx->buffers (the workload plugin's order). All bf16, row-major.
enum { BUF_A_LOCAL = 0, BUF_B = 1, BUF_C = 2, BUF_A_FULL = 3 };
constexpr size_t kLtWorkspaceBytes = 32u << 20;  // cuBLASLt workspace at the start of ctx->workspace
constexpr int kMaxPlans = 32;
constexpr int kMaxRanks = 72;  // one NVLink domain at most (NVL72)

// What the block asks of the harness; filled by block_needs() inside the EVOLVE block.
struct Needs {
  size_t flag_bytes = 0;  // plain device flags, after the cuBLASLt workspace, zeroed once
  size_t sym_bytes = 0;   // symmetric flags (ctx->symmetric_workspace), zeroed once
  int lsa_barriers = 0;   // >= CTAs that open an LSA barrier session
  int gin_signals = 0;
  int gin_required = 0;
};

struct State {
  cublasLtHandle_t lt = nullptr;  // this candidate's cuBLASLt handle (created at setup)
  LtGemm plans[kMaxPlans];
  int nplans = 0;
  cudaEvent_t ev_start = nullptr, ev_side = nullptr;
  CUresult (*wait_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  CUresult (*write_value32)(CUstream, CUdeviceptr, cuuint32_t, unsigned int) = nullptr;
  Needs needs;
  uint32_t epoch = 0;  // cuco::lsa::epoch_of(ctx->iteration) of the current launch
  // Peers' symmetric buffers as this rank maps them (LSA pointers; null for this rank and for non-symmetric
  // buffers), resolved once at setup so that host-issued copy-engine transfers can address them.
  char* peer[CUCO_MAX_BUFFERS][kMaxRanks] = {};
};

static char* peer_base(State* st, int buffer, int rank) {
  return (buffer < CUCO_MAX_BUFFERS && rank >= 0 && rank < kMaxRanks) ? st->peer[buffer][rank] : nullptr;
}

// C rows = A rows . B for `rows` rows (A row-major K wide, C row-major N wide) on stream s. sm_target > 0 keeps
// the GEMM on that many SMs. Plans are cached per (rows, sm_target); the first launch pays for the heuristic.
static int gemm_rows(State* st, cuco_ctx* ctx, const void* a_rows, void* c_rows, int64_t rows, int sm_target,
                     cudaStream_t s) {
  if (rows <= 0) return 0;
  if (sm_target >= ctx->sm_count) sm_target = 0;
  LtGemm* plan = nullptr;
  for (int i = 0; i < st->nplans; ++i)
    if (st->plans[i].rows == rows && st->plans[i].sm_target == sm_target) plan = &st->plans[i];
  if (!plan) {
    if (st->nplans == kMaxPlans) return 61;
    plan = &st->plans[st->nplans++];
    int rc = lt_gemm_plan(st->lt, plan, rows, ctx->dims[1], ctx->dims[2], CUDA_R_16BF,
                          kLtWorkspaceBytes, sm_target);
    if (rc) return 1000 + rc;
  }
  return lt_gemm_run(st->lt, plan, a_rows, ctx->buffers[BUF_B].ptr, c_rows, ctx->workspace,
                     s);
}

__global__ void wait_epoch_kernel(const uint32_t* flag, uint32_t e) {
  if (threadIdx.x == 0) cuco::lsa::wait_epoch(flag, e);
}

// Stream s waits until *flag (device memory) reaches epoch e: cuStreamWaitValue32 (no SM held), else a kernel.
static int stream_wait_epoch(State* st, cudaStream_t s, uint32_t* flag, uint32_t e) {
  if (st->wait_value32)
    return st->wait_value32((CUstream)s, (CUdeviceptr)flag, e, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS ? 0 : 62;
  wait_epoch_kernel<<<1, 32, 0, s>>>(flag, e);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

__global__ void set_epoch_kernel(uint32_t* flag, uint32_t e) {
  if (threadIdx.x == 0) cuco::lsa::store_release_sys(flag, e);
}

// *flag (device memory) := e once the work before it on stream s is complete (cuStreamWriteValue32 fences it
// after that work), else a one-thread kernel.
static int stream_set_epoch(State* st, cudaStream_t s, uint32_t* flag, uint32_t e) {
  if (st->write_value32)
    return st->write_value32((CUstream)s, (CUdeviceptr)flag, e, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS ? 0
                                                                                                             : 65;
  set_epoch_kernel<<<1, 32, 0, s>>>(flag, e);
  return cudaGetLastError() == cudaSuccess ? 0 : 63;
}

__global__ void peer_bases_kernel(ncclDevComm dc, ncclWindow_t win, int me, int world, char** out) {
  const int p = threadIdx.x;
  if (p < world) out[p] = p == me ? nullptr : cuco::lsa::peer_ptr<char>(dc, win, 0, me, p);
}

// Resolve st->peer for every symmetric buffer of a single-node world (setup only: it synchronises).
static int resolve_peers(cuco_ctx* ctx, State* st) {
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

// The block's plain flags live after the cuBLASLt workspace.
static uint32_t* local_flags(cuco_ctx* ctx) { return (uint32_t*)((char*)ctx->workspace + kLtWorkspaceBytes); }

static inline int launch_ok() { return cudaGetLastError() == cudaSuccess ? 0 : 64; }

}  // namespace cuco_ag
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen) ----------------------------------------------------------------
extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  cuco_ag::Needs n = cuco_ag::block_needs(ctx);
  req->workspace_bytes = cuco_ag::kLtWorkspaceBytes + n.flag_bytes;
  req->symmetric_workspace_bytes = n.sym_bytes;
  req->lsa_barrier_count = n.lsa_barriers;
  req->gin_signal_count = n.gin_signals;
  req->gin_context_count = n.gin_required ? 1 : 0;
  req->gin_required = n.gin_required;
  return 0;
}

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  cuco_ag::State* st = new cuco_ag::State();
  ctx->candidate_state = st;
  st->needs = cuco_ag::block_needs(ctx);
  if (ctx->workspace_bytes < cuco_ag::kLtWorkspaceBytes + st->needs.flag_bytes) return 2;
  if (st->needs.sym_bytes && (!ctx->symmetric_workspace.ptr || ctx->symmetric_workspace.bytes < st->needs.sym_bytes))
    return 3;
  if (st->needs.lsa_barriers && !ctx->has_devcomm) return 4;
  if (cublasLtCreate(&st->lt) != CUBLAS_STATUS_SUCCESS) return 10;
  if (cudaEventCreateWithFlags(&st->ev_start, cudaEventDisableTiming) != cudaSuccess) return 5;
  if (cudaEventCreateWithFlags(&st->ev_side, cudaEventDisableTiming) != cudaSuccess) return 5;
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuStreamWaitValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    st->wait_value32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
  if (cudaGetDriverEntryPointByVersion("cuStreamWriteValue32", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    st->write_value32 = (CUresult(*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int))fn;
  (void)cudaGetLastError();
  return cuco_ag::resolve_peers(ctx, st);
}

// One operation: fork the side stream off ctx->stream, enqueue the block's work, join it back.
extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  cuco_ag::State* st = (cuco_ag::State*)ctx->candidate_state;
  st->epoch = cuco::lsa::epoch_of(ctx->iteration);
  if (cudaEventRecord(st->ev_start, ctx->stream) != cudaSuccess) return 6;
  if (cudaStreamWaitEvent(ctx->side_stream, st->ev_start, 0) != cudaSuccess) return 6;
  int rc = cuco_ag::enqueue(ctx, st);
  if (cudaEventRecord(st->ev_side, ctx->side_stream) != cudaSuccess) return 7;
  if (cudaStreamWaitEvent(ctx->stream, st->ev_side, 0) != cudaSuccess) return 7;
  return rc;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  cuco_ag::State* st = (cuco_ag::State*)ctx->candidate_state;
  if (!st) return 0;
  for (int i = 0; i < st->nplans; ++i) cuco_ag::lt_gemm_destroy(&st->plans[i]);
  if (st->ev_start) cudaEventDestroy(st->ev_start);
  if (st->ev_side) cudaEventDestroy(st->ev_side);
  if (st->lt) cublasLtDestroy(st->lt);
  delete st;
  ctx->candidate_state = nullptr;
  return 0;
}
"""


def head() -> str:
    return HEAD.replace("@LT_GEMM@", lt_gemm_text())
