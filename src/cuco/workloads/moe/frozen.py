"""The frozen parts of a rendered MoE candidate: identical for every design point.

Head: includes, the shared device code (moe_dev.cuh and moe_rows.cuh, inlined so a candidate is one file), the
candidate state (on the kit's Base: events, stream ops, epoch), peer-address resolution and the sync kernels.
Tail: the candidate-ABI entry points, calling the kit's skeleton (csrc/include/cuco/kit/skeleton.cuh). The EVOLVE
block between them defines `block_needs(ctx)`, `block_setup(ctx, st)` and `enqueue(ctx, st)` in namespace cuco_moe.
"""

from __future__ import annotations

from pathlib import Path

from cuco.kit.entry_points import skeleton_entry_points
from cuco.kit.template import fill

_HERE = Path(__file__).resolve().parent


def device_code() -> str:
    """moe_dev.cuh then moe_rows.cuh, without their include guards and includes of each other and of lsa.cuh (the
    head includes it)."""
    text = (_HERE / "moe_dev.cuh").read_text() + "\n" + (_HERE / "moe_rows.cuh").read_text()
    for line in ("#pragma once\n", '#include "cuco/lsa.cuh"\n', '#include "moe_dev.cuh"\n'):
        text = text.replace(line, "")
    return text


HEAD_TEMPLATE = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuco/abi.h"
#include "cuco/compute/moe.h"
#include "cuco/kit/skeleton.cuh"
#include "cuco/kit/sync.cuh"
#include "cuco/lsa.cuh"

// ---- shared MoE device code (frozen) ----------------------------------------------------------------------
@DEVICE_CODE@
// ---- frozen helpers: state, flags, peers, sync kernels ------------------------------------------------------
namespace cuco_moe {

using cuco::kit::launch_ok;
using cuco::kit::kPrevLaunch;  // which launch's epoch a wait is for (the epoch itself lives on the device)
using cuco::kit::kThisLaunch;
using cuco::kit::stream_wait_epoch;

// The exchange alone (benchmarks/moe.py times dispatch and combine by themselves): kFfn = false skips the expert
// FFN, kCombine = false the combine as well. Such a candidate moves the bytes but computes nothing; it cannot verify.
constexpr bool kFfn = true;
constexpr bool kCombine = true;

// What the block asks: of the harness (the kit's Needs; the symmetric flags below are added by the frozen tail),
// and the CTAs its communication kernels take beside the FFN. Filled by block_needs() inside the EVOLVE block.
struct Needs : cuco::kit::Needs {
  int comm_ctas = 0;  // CTAs of the communication kernels that run beside the FFN (0: none)
  bool outputs_at_sources = false;  // the block calls ffn_to_sources (setup makes its plan only then)
  bool rows_arriving = false;  // the block calls ffn_arriving (setup makes its plan only then)
};

// Symmetric flags (ctx->symmetric_workspace), uint32 epochs, slot s of writer p at word s * kMaxWorld + p.
enum { SIG_READY = 0, SIG_OUT = 1, SIG_DONE = 2, SIG_ARRIVED = 3, SIG_SLOTS = 4 };
constexpr size_t kSymBytes = 4 * SIG_SLOTS * kMaxWorld;

// The kit's Base keeps the events that fork and join the side stream, the needs and the device epoch word.
struct State : cuco::kit::Base {
  Geo g;
  PubLayout P;
  WorkLayout L;
  int comm_ctas = 0;                 // Needs::comm_ctas of the block
  cuco_moe_ffn* ffn_all = nullptr;   // FFN on every SM
  cuco_moe_ffn* ffn_part = nullptr;  // FFN leaving comm_ctas SMs to the communication kernels
  cuco_moe_ffn* ffn_segs = nullptr;  // FFN on every SM over the El * W segment groups (outputs at the sources)
  // FFN whose up GEMM leaves comm_ctas SMs, takes rows in order and waits for each tile's rows to land
  cuco_moe_ffn* ffn_arriving = nullptr;
  cudaEvent_t ev[2] = {};
  PeerBases x = {}, pub = {}, sym = {};  // every rank's X, pub and symmetric flags as this rank maps them
  char* work = nullptr;
};

template <typename T>
static T* W(State* st, int64_t off) { return reinterpret_cast<T*>(st->work + off); }
template <typename T>
static T* Pub(State* st, int64_t off) { return reinterpret_cast<T*>(st->pub.p[st->g.me] + off); }

// sync_scope=world: one LSA barrier over the world team as a one-CTA kernel; stream order makes it cover every
// kernel before and after it on that stream.
__global__ void barrier_kernel(ncclDevComm dc) { cuco::kit::cta_lsa_barrier(dc, true); }

// sync_scope=signal: this rank raises its flag `slot` on every rank (itself included) to this launch's epoch (read
// from the device epoch word: a replayed graph raises it to the replay's epoch).
__global__ void signal_all_kernel(PeerBases sym, int slot, int me, int world, const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);
  __threadfence_system();
  if ((int)threadIdx.x < world)
    cuco::lsa::store_release_sys(reinterpret_cast<uint32_t*>(sym.p[threadIdx.x]) + slot * kMaxWorld + me, epoch);
}

// ... and waits until every rank raised its flag `slot` here (one thread per source: per-source signals) to this
// launch's epoch, or the previous launch's (back = cuco::kit::kPrevLaunch; on the first launch it passes at once).
__global__ void wait_all_kernel(const uint32_t* mine, int slot, int world, const uint32_t* epoch_at, int back) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at, back);
  if ((int)threadIdx.x < world) cuco::lsa::wait_epoch(mine + slot * kMaxWorld + threadIdx.x, epoch);
  __syncthreads();
}

static int signal_all(cuco_ctx* ctx, State* st, cudaStream_t s, int slot) {
  signal_all_kernel<<<1, 128, 0, s>>>(st->sym, slot, ctx->rank, ctx->world, st->epoch_at);
  return launch_ok();
}

static int wait_all(cuco_ctx* ctx, State* st, cudaStream_t s, int slot, int back) {
  wait_all_kernel<<<1, 128, 0, s>>>((const uint32_t*)ctx->symmetric_workspace.ptr, slot, ctx->world, st->epoch_at,
                                    back);
  return launch_ok();
}

static int barrier(cuco_ctx* ctx, cudaStream_t s) {
  barrier_kernel<<<1, 128, 0, s>>>(ctx->devcomm);
  return launch_ok();
}

// Every rank's address of one symmetric window, this rank's own included (the kit's peer table leaves it out and
// has no entry for the symmetric workspace). Setup only: it synchronises.
__global__ void peer_bases_kernel(ncclDevComm dc, ncclWindow_t win, int me, int world, char** out) {
  const int p = threadIdx.x;
  if (p < world) out[p] = cuco::lsa::peer_ptr<char>(dc, win, 0, me, p);
}

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
                                 W<int64_t>(st, st->L.ostart), W<int64_t>(st, st->L.total));
  const int blocks = (int)(g.El * g.W < 1024 ? g.El * g.W : 1024);
  rowmap_kernel<<<blocks, 256, 0, s>>>(g, st->pub, st->P, W<int32_t>(st, st->L.cnt_all),
                                       W<int64_t>(st, st->L.seg_off), W<int64_t>(st, st->L.rowmap),
                                       W<int32_t>(st, st->L.seg_rows), W<int32_t>(st, st->L.seg_exp),
                                       W<void*>(st, st->L.seg_out));
  return launch_ok();
}

// FFN over the group set `which` (GROUPS_ALL, GROUPS_OWN, ... in moe_dev.cuh) of the received rows.
static int ffn(cuco_ctx* ctx, State* st, cuco_moe_ffn* plan, int which, cudaStream_t s) {
  if (!kFfn) return 0;
  const Geo& g = st->g;
  return cuco_moe_ffn_run(plan, (int)g.El, Pub<char>(st, st->P.recv), ctx->buffers[BUF_W1].ptr,
                          ctx->buffers[BUF_W2].ptr, W<char>(st, st->L.h1), W<char>(st, st->L.act),
                          Pub<char>(st, st->P.yrows), W<int32_t>(st, st->L.grp_rows) + which * g.El,
                          W<int64_t>(st, st->L.grp_off) + which * g.El, W<int32_t>(st, st->L.grp_exp), s);
}

// FFN over every received row while they still arrive: the up GEMM starts a tile as soon as the chunks of its rows
// (chunk_rows rows each, flag[c] raised to this launch's epoch by the pulls) have landed.
static int ffn_arriving(cuco_ctx* ctx, State* st, const uint32_t* flag, int64_t chunk_rows, cudaStream_t s) {
  if (!kFfn) return 0;
  const Geo& g = st->g;
  const int64_t all = GROUPS_ALL * g.El;
  return cuco_moe_ffn_run_arrival(st->ffn_arriving, (int)g.El, Pub<char>(st, st->P.recv), ctx->buffers[BUF_W1].ptr,
                                  ctx->buffers[BUF_W2].ptr, W<char>(st, st->L.h1), W<char>(st, st->L.act),
                                  Pub<char>(st, st->P.yrows), nullptr, W<int32_t>(st, st->L.grp_rows) + all,
                                  W<int64_t>(st, st->L.grp_off) + all, W<int32_t>(st, st->L.grp_exp), flag,
                                  st->epoch_at, chunk_rows, s);
}

// FFN of the peers' rows, one group per segment (e, p), each group's outputs stored by the down GEMM's epilogue
// straight into its source's back rows (NVLink stores: nothing to pull at the combine). The exchange alone
// (kFfn = false) stores the received rows there instead: the same bytes.
static int ffn_to_sources(cuco_ctx* ctx, State* st, cudaStream_t s) {
  const Geo& g = st->g;
  if (kFfn)
    return cuco_moe_ffn_run_to(st->ffn_segs, (int)(g.El * g.W), Pub<char>(st, st->P.recv), ctx->buffers[BUF_W1].ptr,
                               ctx->buffers[BUF_W2].ptr, W<char>(st, st->L.h1), W<char>(st, st->L.act),
                               Pub<char>(st, st->P.yrows), W<void*>(st, st->L.seg_out),
                               W<int32_t>(st, st->L.seg_rows), W<int64_t>(st, st->L.seg_off),
                               W<int32_t>(st, st->L.seg_exp), s);
  if (!kCombine) return 0;
  segment_put_kernel<<<2 * ctx->sm_count, 256, 0, s>>>(g, Pub<__nv_bfloat16>(st, st->P.recv),
                                                       W<int32_t>(st, st->L.seg_rows), W<int64_t>(st, st->L.seg_off),
                                                       W<void*>(st, st->L.seg_out));
  return launch_ok();
}

// returned: this rank's slots at other ranks were stored into P.back by their owners (order layout), read there.
static int combine(cuco_ctx* ctx, State* st, cudaStream_t s, bool returned = false) {
  if (!kCombine) return 0;
  const Geo& g = st->g;
  const int blocks = (int)(g.T < 4 * ctx->sm_count ? g.T : 4 * ctx->sm_count);
  combine_kernel<<<blocks, 256, 0, s>>>(g, (const int32_t*)ctx->buffers[BUF_EXPERT].ptr,
                                        (const float*)ctx->buffers[BUF_GATE].ptr, W<int32_t>(st, st->L.slot_rank),
                                        W<int64_t>(st, st->L.cbase), st->pub, st->P,
                                        returned ? Pub<__nv_bfloat16>(st, st->P.back) : nullptr,
                                        W<int64_t>(st, st->L.ostart), (__nv_bfloat16*)ctx->buffers[BUF_Y].ptr);
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

// Copy engines: every rank's X into this rank's staging area (pub's stage, block p from rank p), on stream s. Each
// rank starts at its own block and goes round from the next rank: at every step the W readers read W different
// ranks (in rank order all W would read rank 0 first, sharing its outbound links).
static int stage_pulls(State* st, cudaStream_t s) {
  const Geo& g = st->g;
  const size_t block = (size_t)g.T * g.H * 2;
  for (int i = 0; i < g.W; ++i) {
    const int p = (g.me + i) % g.W;
    if (cudaMemcpyAsync(Pub<char>(st, st->P.stage) + p * block, st->x.p[p], block, cudaMemcpyDeviceToDevice, s) !=
        cudaSuccess)
      return 66;
  }
  return 0;
}

// Copy engines: this rank's X into block `me` of every peer's staging area, on stream s, from the next rank round
// (a permutation at every step). Writing over NVLink, not reading: copy engines wrote 2.3-2.8x faster than they read
// at W = 4 with every GPU copying (benchmarks/results/w4/gemm_under_copy_w4.log). The caller's barriers order it: the
// one before (every peer finished the previous launch, whose gathers read its staging) and one after (every
// rank's pushes have landed).
static int stage_pushes(State* st, cudaStream_t s) {
  const Geo& g = st->g;
  const size_t block = (size_t)g.T * g.H * 2;
  for (int i = 1; i < g.W; ++i) {
    const int q = (g.me + i) % g.W;
    if (cudaMemcpyAsync(st->pub.p[q] + st->P.stage + g.me * block, st->x.p[g.me], block, cudaMemcpyDeviceToDevice,
                        s) != cudaSuccess)
      return 66;
  }
  return 0;
}

static uint32_t* local_flags(cuco_ctx* ctx) { return (uint32_t*)ctx->workspace; }

// Setup shared by every point, before the block's own: geometry, layouts, peers' addresses, the FFN plans (the
// segment-groups plan only for a block that stores outputs at their sources).
static int frozen_setup(cuco_ctx* ctx, State* st, const Needs& needs) {
  st->comm_ctas = needs.comm_ctas;
  st->g = geo_make(ctx->dims, ctx->world, ctx->rank);
  st->P = pub_layout(st->g);
  st->L = work_layout(st->g);
  st->work = (char*)ctx->buffers[BUF_WORK].ptr;
  if (!ctx->has_devcomm || ctx->world > kMaxWorld) return 4;
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
  if (cuco_moe_ffn_create(&st->ffn_part, (int)st->g.El, st->g.H, st->g.I, ctx->sm_count - st->comm_ctas)) return 11;
  if (needs.outputs_at_sources &&
      cuco_moe_ffn_create(&st->ffn_segs, (int)(st->g.El * st->g.W), st->g.H, st->g.I, 0))
    return 12;
  // the up GEMM's waiting CTAs hold their SMs: the kernels that raise the flags keep comm_ctas SMs of their own;
  // the down GEMM starts once every row has been read, so it takes them all
  if (needs.rows_arriving &&
      (st->comm_ctas < 1 || cuco_moe_ffn_create_ex(&st->ffn_arriving, (int)st->g.El, st->g.H, st->g.I,
                                                   ctx->sm_count - st->comm_ctas, ctx->sm_count, 1)))
    return 13;
  for (cudaEvent_t& e : st->ev)
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return 5;
  return 0;
}

}  // namespace cuco_moe
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen): the kit's skeleton around the block ---------------------------
namespace cuco_moe {
struct Candidate {
  using State = cuco_moe::State;
  static constexpr size_t kLibWorkspaceBytes = 0;  // the FFN plans own their scratch (the work buffer)
  static cuco::kit::Needs needs(const cuco_ctx* ctx) {
    cuco::kit::Needs n = block_needs(ctx);
    n.sym_bytes = kSymBytes;  // the per-source flags, whatever the block
    return n;
  }
  static int setup(cuco_ctx* ctx, State* st) {
    if (int rc = frozen_setup(ctx, st, block_needs(ctx))) return rc;
    return block_setup(ctx, st);  // the EVOLVE block's own preparation (e.g. attaching NVSHMEM)
  }
  static int enqueue(cuco_ctx* ctx, State* st) {
    return cuco_moe::enqueue(ctx, st);
  }
  static void teardown(State* st) {
    cuco_moe_ffn_destroy(st->ffn_all);
    cuco_moe_ffn_destroy(st->ffn_part);
    cuco_moe_ffn_destroy(st->ffn_segs);
    cuco_moe_ffn_destroy(st->ffn_arriving);
    for (cudaEvent_t e : st->ev)
      if (e) cudaEventDestroy(e);
  }
};
}  // namespace cuco_moe

""" + skeleton_entry_points("cuco_moe::Candidate")


def head() -> str:
    """The frozen head with the shared device code inlined."""
    return fill(HEAD_TEMPLATE, {"DEVICE_CODE": device_code()}, what="moe frozen head")
