"""The frozen parts of a rendered MoE candidate: identical for every design point.

Head: includes, the shared device code (moe_dev.cuh, inlined so a candidate is one file), the candidate state,
stream flag helpers, peer-address resolution and the sync kernels. Tail: the candidate-ABI entry points. The
EVOLVE block between them defines `block_needs(ctx)` and `enqueue(ctx, st)` in namespace cuco_moe.
"""

from __future__ import annotations

from pathlib import Path

from cuco.kit.template import fill

_HERE = Path(__file__).resolve().parent


def device_code() -> str:
    """moe_dev.cuh without its include guard and its lsa.cuh include (the head includes it)."""
    text = (_HERE / "moe_dev.cuh").read_text()
    return text.replace("#pragma once\n", "").replace('#include "cuco/lsa.cuh"\n', "")


HEAD_TEMPLATE = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuco/abi.h"
#include "cuco/compute/moe.h"
#include "cuco/kit/stream_sync.cuh"
#include "cuco/lsa.cuh"

// ---- shared MoE device code (frozen) ----------------------------------------------------------------------
@DEVICE_CODE@
// ---- frozen helpers: state, flags, peers, sync kernels ------------------------------------------------------
namespace cuco_moe {

// What the block asks of the harness; filled by block_needs() inside the EVOLVE block.
struct Needs {
  size_t flag_bytes = 0;  // plain device flags and chunk tables (ctx->workspace), zeroed once
  int lsa_barriers = 0;   // >= CTAs that open an LSA barrier session
  int comm_ctas = 0;      // CTAs of the communication kernels that run beside the FFN (0: none)
  int gin_signals = 0;    // backend=gin: distinct GIN signal ids
  int gin_required = 0;   // backend=gin: peers are reached by RDMA puts only (no LSA pointer is resolved)
  size_t nvshmem_bytes = 0;  // backend=nvshmem: NVSHMEM workspace (pub lives there; peers reached by puts only)
};

// Symmetric flags (ctx->symmetric_workspace), uint32 epochs, slot s of writer p at word s * kMaxWorld + p.
enum { SIG_READY = 0, SIG_OUT = 1, SIG_DONE = 2, SIG_ARRIVED = 3, SIG_SLOTS = 4 };
constexpr size_t kSymBytes = 4 * SIG_SLOTS * kMaxWorld;

struct State {
  Geo g;
  PubLayout P;
  WorkLayout L;
  Needs needs;
  cuco_moe_ffn* ffn_all = nullptr;   // FFN on every SM
  cuco_moe_ffn* ffn_part = nullptr;  // FFN leaving comm_ctas SMs to the communication kernels
  cudaEvent_t ev_start = nullptr, ev_side = nullptr, ev[4] = {};
  cuco::kit::StreamOps ops;  // stream-ordered flag waits (kit)
  PeerBases x = {}, pub = {}, sym = {};  // every rank's X, pub and symmetric flags as this rank maps them
  uint32_t epoch = 0, prev_epoch = 0;    // this launch's epoch and the previous launch's (0: none)
  char* work = nullptr;
};

static inline int launch_ok() { return cudaGetLastError() == cudaSuccess ? 0 : 64; }

template <typename T>
static T* W(State* st, int64_t off) { return reinterpret_cast<T*>(st->work + off); }
template <typename T>
static T* Pub(State* st, int64_t off) { return reinterpret_cast<T*>(st->pub.p[st->g.me] + off); }

// Stream s waits until *flag reaches epoch e: cuStreamWaitValue32 (no SM held), else a one-thread kernel.
static int stream_wait_epoch(State* st, cudaStream_t s, uint32_t* flag, uint32_t e) {
  return cuco::kit::stream_wait_epoch(st->ops, s, flag, e);
}

// sync_scope=world: one LSA barrier over the world team as a one-CTA kernel; stream order makes it cover every
// kernel before and after it on that stream.
__global__ void barrier_kernel(ncclDevComm dc) {
  ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamWorld(dc), dc.lsaBarrier, 0);
  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// sync_scope=signal: this rank raises its flag `slot` on every rank (itself included) to `epoch`.
__global__ void signal_all_kernel(PeerBases sym, int slot, int me, int world, uint32_t epoch) {
  __threadfence_system();
  if ((int)threadIdx.x < world)
    cuco::lsa::store_release_sys(reinterpret_cast<uint32_t*>(sym.p[threadIdx.x]) + slot * kMaxWorld + me, epoch);
}

// ... and waits until every rank raised its flag `slot` here (one thread per source: per-source signals).
__global__ void wait_all_kernel(const uint32_t* mine, int slot, int world, uint32_t epoch) {
  if ((int)threadIdx.x < world) cuco::lsa::wait_epoch(mine + slot * kMaxWorld + threadIdx.x, epoch);
  __syncthreads();
}

static int signal_all(cuco_ctx* ctx, State* st, cudaStream_t s, int slot) {
  signal_all_kernel<<<1, 128, 0, s>>>(st->sym, slot, ctx->rank, ctx->world, st->epoch);
  return launch_ok();
}

static int wait_all(cuco_ctx* ctx, State* st, cudaStream_t s, int slot, uint32_t epoch) {
  wait_all_kernel<<<1, 128, 0, s>>>((const uint32_t*)ctx->symmetric_workspace.ptr, slot, ctx->world, epoch);
  return launch_ok();
}

static int barrier(cuco_ctx* ctx, cudaStream_t s) {
  barrier_kernel<<<1, 128, 0, s>>>(ctx->devcomm);
  return launch_ok();
}

__global__ void peer_bases_kernel(ncclDevComm dc, ncclWindow_t win, int me, int world, char** out) {
  const int p = threadIdx.x;
  if (p < world) out[p] = cuco::lsa::peer_ptr<char>(dc, win, 0, me, p);
}

// Every rank's address of one symmetric window (setup only: it synchronises).
static int resolve(cuco_ctx* ctx, ncclWindow_t win, PeerBases* out) {
  char** d = nullptr;
  if (cudaMalloc(&d, sizeof(char*) * kMaxWorld) != cudaSuccess) return 8;
  peer_bases_kernel<<<1, kMaxWorld, 0, ctx->stream>>>(ctx->devcomm, win, ctx->rank, ctx->world, d);
  int rc = cudaMemcpyAsync(out->p, d, sizeof(char*) * ctx->world, cudaMemcpyDeviceToHost, ctx->stream) ==
                   cudaSuccess &&
               cudaStreamSynchronize(ctx->stream) == cudaSuccess
           ? 0
           : 9;
  cudaFree(d);
  return rc;
}

// This launch's routing tables, once every rank has published its counts and slot order: every rank's counts,
// the receive plan, the row map.
static int tables(cuco_ctx* ctx, State* st, cudaStream_t s) {
  const Geo& g = st->g;
  gather_counts_kernel<<<1, 1024, 0, s>>>(g, st->pub, st->P, W<int32_t>(st, st->L.cnt_all));
  plan_kernel<<<1, 1024, 0, s>>>(g, W<int32_t>(st, st->L.cnt_all), W<int64_t>(st, st->L.seg_off),
                                 W<int32_t>(st, st->L.grp_rows), W<int64_t>(st, st->L.grp_off),
                                 W<int32_t>(st, st->L.grp_exp), W<int64_t>(st, st->L.cbase),
                                 W<int64_t>(st, st->L.total));
  const int blocks = (int)(g.El * g.W < 1024 ? g.El * g.W : 1024);
  rowmap_kernel<<<blocks, 256, 0, s>>>(g, st->pub, st->P, W<int32_t>(st, st->L.cnt_all),
                                       W<int64_t>(st, st->L.seg_off), W<int64_t>(st, st->L.rowmap));
  return launch_ok();
}

// FFN over `which` groups (0: all rows, 1: own tokens' rows, 2: peers' rows) of the received rows.
static int ffn(cuco_ctx* ctx, State* st, cuco_moe_ffn* plan, int which, cudaStream_t s) {
  const Geo& g = st->g;
  return cuco_moe_ffn_run(plan, (int)g.El, Pub<char>(st, st->P.recv), ctx->buffers[BUF_W1].ptr,
                          ctx->buffers[BUF_W2].ptr, W<char>(st, st->L.h1), W<char>(st, st->L.act),
                          Pub<char>(st, st->P.yrows), W<int32_t>(st, st->L.grp_rows) + which * g.El,
                          W<int64_t>(st, st->L.grp_off) + which * g.El, W<int32_t>(st, st->L.grp_exp), s);
}

static int combine(cuco_ctx* ctx, State* st, cudaStream_t s) {
  const Geo& g = st->g;
  const int blocks = (int)(g.T < 4 * ctx->sm_count ? g.T : 4 * ctx->sm_count);
  combine_kernel<<<blocks, 256, 0, s>>>(g, (const int32_t*)ctx->buffers[BUF_EXPERT].ptr,
                                        (const float*)ctx->buffers[BUF_GATE].ptr, W<int32_t>(st, st->L.slot_rank),
                                        W<int64_t>(st, st->L.cbase), st->pub, st->P,
                                        (__nv_bfloat16*)ctx->buffers[BUF_Y].ptr);
  return launch_ok();
}

// Route this rank's slots (counts and order into pub, where peers read them) and, for fp8 dispatch, quantise.
static int route(cuco_ctx* ctx, State* st, bool fp8, cudaStream_t s) {
  const Geo& g = st->g;
  route_kernel<<<1, 1024, 0, s>>>((const int32_t*)ctx->buffers[BUF_EXPERT].ptr, g.slots, g.E,
                                  Pub<int32_t>(st, st->P.cnt), Pub<int32_t>(st, st->P.order),
                                  W<int32_t>(st, st->L.slot_rank));
  if (fp8)
    quant_kernel<<<2 * ctx->sm_count, 256, 0, s>>>((const __nv_bfloat16*)ctx->buffers[BUF_X].ptr, g.T, g.H,
                                                   Pub<__nv_fp8_e4m3>(st, st->P.xq), Pub<float>(st, st->P.xs));
  return launch_ok();
}

// Copy engines: every rank's X (or only the peers') into the local staging area, on stream s.
static int stage_copies(State* st, bool peers_only, cudaStream_t s) {
  const Geo& g = st->g;
  for (int p = 0; p < g.W; ++p) {
    if (peers_only && p == g.me) continue;
    if (cudaMemcpyAsync(W<char>(st, st->L.stage) + (size_t)p * g.T * g.H * 2, st->x.p[p], (size_t)g.T * g.H * 2,
                        cudaMemcpyDeviceToDevice, s) != cudaSuccess)
      return 66;
  }
  return 0;
}

static uint32_t* local_flags(cuco_ctx* ctx) { return (uint32_t*)ctx->workspace; }

}  // namespace cuco_moe
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen) ----------------------------------------------------------------
extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  cuco_moe::Needs n = cuco_moe::block_needs(ctx);
  req->workspace_bytes = n.flag_bytes;
  req->symmetric_workspace_bytes = cuco_moe::kSymBytes;
  req->lsa_barrier_count = n.lsa_barriers;
  req->gin_signal_count = n.gin_signals;
  req->gin_context_count = n.gin_required ? 1 : 0;
  req->gin_required = n.gin_required;
  req->uses_nvshmem = n.nvshmem_bytes > 0;
  req->nvshmem_workspace_bytes = n.nvshmem_bytes;
  return 0;
}

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  using namespace cuco_moe;
  State* st = new State();
  ctx->candidate_state = st;
  st->needs = block_needs(ctx);
  st->g = geo_make(ctx->dims, ctx->world, ctx->rank);
  st->P = pub_layout(st->g);
  st->L = work_layout(st->g);
  st->work = (char*)ctx->buffers[BUF_WORK].ptr;
  if (!ctx->has_devcomm || ctx->world > kMaxWorld) return 4;
  if (ctx->workspace_bytes < st->needs.flag_bytes || ctx->symmetric_workspace.bytes < kSymBytes) return 3;
  if (st->needs.nvshmem_bytes && ctx->nvshmem_workspace_bytes < st->needs.nvshmem_bytes) return 3;
  if (st->needs.gin_required || st->needs.nvshmem_bytes) {  // only this rank's own buffers are addressed directly
    st->x.p[ctx->rank] = (char*)ctx->buffers[BUF_X].ptr;
    st->pub.p[ctx->rank] = (char*)ctx->buffers[BUF_PUB].ptr;
    st->sym.p[ctx->rank] = (char*)ctx->symmetric_workspace.ptr;
  } else {
    if (ctx->world != ctx->local_world) return 4;  // LSA: one node
    int rc = resolve(ctx, ctx->buffers[BUF_X].window, &st->x);
    if (!rc) rc = resolve(ctx, ctx->buffers[BUF_PUB].window, &st->pub);
    if (!rc) rc = resolve(ctx, ctx->symmetric_workspace.window, &st->sym);
    if (rc) return rc;
  }
  if (cuco_moe_ffn_create(&st->ffn_all, (int)st->g.El, st->g.H, st->g.I, 0)) return 10;
  if (cuco_moe_ffn_create(&st->ffn_part, (int)st->g.El, st->g.H, st->g.I, ctx->sm_count - st->needs.comm_ctas))
    return 11;
  if (cudaEventCreateWithFlags(&st->ev_start, cudaEventDisableTiming) != cudaSuccess) return 5;
  if (cudaEventCreateWithFlags(&st->ev_side, cudaEventDisableTiming) != cudaSuccess) return 5;
  for (cudaEvent_t& e : st->ev)
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return 5;
  cuco::kit::load_stream_ops(&st->ops);
  return block_setup(ctx, st);  // the EVOLVE block's own preparation (e.g. attaching NVSHMEM)
}

// One operation: fork the side stream off ctx->stream, enqueue the block's work, join it back.
extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  cuco_moe::State* st = (cuco_moe::State*)ctx->candidate_state;
  st->epoch = cuco::lsa::epoch_of(ctx->iteration);
  if (cudaEventRecord(st->ev_start, ctx->stream) != cudaSuccess) return 6;
  if (cudaStreamWaitEvent(ctx->side_stream, st->ev_start, 0) != cudaSuccess) return 6;
  int rc = cuco_moe::enqueue(ctx, st);
  if (cudaEventRecord(st->ev_side, ctx->side_stream) != cudaSuccess) return 7;
  if (cudaStreamWaitEvent(ctx->stream, st->ev_side, 0) != cudaSuccess) return 7;
  st->prev_epoch = st->epoch;
  return rc;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  cuco_moe::State* st = (cuco_moe::State*)ctx->candidate_state;
  if (!st) return 0;
  cuco_moe_ffn_destroy(st->ffn_all);
  cuco_moe_ffn_destroy(st->ffn_part);
  if (st->ev_start) cudaEventDestroy(st->ev_start);
  if (st->ev_side) cudaEventDestroy(st->ev_side);
  for (cudaEvent_t e : st->ev)
    if (e) cudaEventDestroy(e);
  delete st;
  ctx->candidate_state = nullptr;
  return 0;
}
"""


def head() -> str:
    """The frozen head with the shared device code inlined."""
    return fill(HEAD_TEMPLATE, {"DEVICE_CODE": device_code()}, what="moe frozen head")
