"""The frozen parts of a rendered KV-transfer candidate: identical for every design point.

Head: includes, the index arithmetic (kv_layout.cuh, inlined so a candidate is one file), the candidate state and
the transfer, flag and barrier helpers every placement composes. Tail: the candidate-ABI entry points, calling the
kit's skeleton. The EVOLVE block between them defines `block_needs(ctx)`, `block_setup(ctx, st)` (the layer plan)
and `enqueue(ctx, st)` in namespace cuco_kv.
"""

from __future__ import annotations

from pathlib import Path

from cuco.kit.template import fill
from cuco.kit.entry_points import skeleton_entry_points

_HERE = Path(__file__).resolve().parent


def layout_code() -> str:
    """kv_layout.cuh without its include guard."""
    return (_HERE / "kv_layout.cuh").read_text().replace("#pragma once\n", "")


HEAD_TEMPLATE = r"""
// KV-cache transfer, prefill -> decode, device-initiated. Rank 2p prefills, rank 2p+1 decodes (W = 1: both).
// Buffers: 0 X0 [S x 4096], 1 W (Wqkv | Wo | Wgu | Wd), 2 tables (prefill table | decode table, int32, symmetric),
// 3 pcache (prefill paged cache), 4 dcache (decode paged cache: the output), 5 stage ([L][2][S][KV] token order);
// caches are [L][2][pool][16][KV] bf16 (kv_layout.cuh).
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuco/abi.h"
#include "cuco/compute/kv_transfer.h"
#include "cuco/kit/skeleton.cuh"
#include "cuco/kit/sync.cuh"
#include "cuco/lsa.cuh"

// ---- index arithmetic (frozen) ------------------------------------------------------------------------------
@LAYOUT@
// ---- frozen helpers: state, pair pointers, transfers, flags, barriers ---------------------------------------
namespace cuco_kv {

enum { BUF_X = 0, BUF_W = 1, BUF_TABLES = 2, BUF_PCACHE = 3, BUF_DCACHE = 4, BUF_STAGE = 5 };

using cuco::kit::launch_ok;
using cuco::kit::Needs;  // what the block asks of the harness; filled by block_needs() inside the EVOLVE block
using cuco::kit::kPrevLaunch;  // which launch's epoch a wait is for (the epoch itself lives on the device)
using cuco::kit::kThisLaunch;
using cuco::kit::stream_set_epoch;
using cuco::kit::stream_wait_epoch;

struct State : cuco::kit::Base {
  Geo g;
  int role = 0, pair = 0;          // ROLE_* bits; the other rank of this rank's pair (itself at W = 1)
  cuco_kvt* plan = nullptr;        // the layer's plans and activations (created by block_setup)
  char* pair_sym = nullptr;        // the pair rank's symmetric workspace (its flags), as this rank maps it
  cudaEvent_t ev_join = nullptr;   // side stream -> main stream, inside a launch
  cudaEvent_t ev_decode = nullptr;       // decode stream -> main stream, inside a launch
  cudaEvent_t* ev_ready = nullptr;  // per chunk of a layer: its K/V are computed (compute stream -> side stream)
  int n_ready = 0;
  cudaEvent_t ev_sent[2] = {};      // per projection slot: the transfer that read it is done (side -> compute)
};

// A buffer of the pair rank as this rank addresses it (this rank's own buffer at W = 1).
static char* pair_buf(cuco_ctx* ctx, State* st, int b) {
  return st->pair == ctx->rank ? (char*)ctx->buffers[b].ptr : cuco::kit::peer_base(st, b, st->pair);
}
static char* own(cuco_ctx* ctx, int b) { return (char*)ctx->buffers[b].ptr; }
static const int32_t* ptab(cuco_ctx* ctx, const State* st) { return (const int32_t*)own(ctx, BUF_TABLES); }
static const int32_t* dtab(cuco_ctx* ctx, const State* st) { return (const int32_t*)own(ctx, BUF_TABLES) + st->g.nblk; }
static const int32_t* pair_dtab(cuco_ctx* ctx, State* st) {
  return (const int32_t*)pair_buf(ctx, st, BUF_TABLES) + st->g.nblk;
}

// The two sides of a block copy (compute library, cuco_kvt_copy_blocks).
static cuco_kvt_side rows_of(State* st, int64_t l) {  // layer l's K/V columns of the projection output
  return cuco_kvt_side{(char*)cuco_kvt_qkv(st->plan, (int)(l & 1)) + 2 * cuco_kvt_q_width(st->plan),
                       cuco_kvt_qkv_ld(st->plan), nullptr, nullptr, 0};
}
static cuco_kvt_side pages_of(char* cache, const int32_t* table, const Geo& g, int64_t l) {
  return cuco_kvt_side{nullptr, 0, cache + 2 * layer_elem(g, l), table, g.pool};
}
static cuco_kvt_side stage_of(char* stage, const Geo& g, int64_t l) {  // identity table over nblk pages
  return cuco_kvt_side{nullptr, 0, stage + 2 * stage_layer_elem(g, l), nullptr, g.nblk};
}

// Layer l up to its K/V (projection into slot l & 1, K/V into this rank's pages), and the rest of it.
static const void* layer_input(cuco_ctx* ctx, State* st, int64_t l) {
  return l ? cuco_kvt_act(st->plan, (int)((l + 1) & 1)) : own(ctx, BUF_X);
}
static int layer_front(cuco_ctx* ctx, State* st, int64_t l, cudaStream_t s) {
  if (int rc = cuco_kvt_project(st->plan, own(ctx, BUF_W), layer_input(ctx, st, l), (int)(l & 1), s)) return rc;
  return cuco_kvt_copy_blocks(rows_of(st, l), pages_of(own(ctx, BUF_PCACHE), ptab(ctx, st), st->g, l), st->g.D, 0,
                              st->g.nblk, 0, 2 * ctx->sm_count, s);
}
static int layer_back(cuco_ctx* ctx, State* st, int64_t l, cudaStream_t s) {
  return cuco_kvt_finish(st->plan, own(ctx, BUF_W), layer_input(ctx, st, l), (int)(l & 1),
                         cuco_kvt_act(st->plan, (int)(l & 1)), s);
}

// The prefill's two streams ordered by events: the side stream's transfer of chunk c of a layer waits for the
// compute stream to have written that chunk's K/V (ready), and the compute stream's projection into a slot waits for
// the transfer that last read the slot (sent). An event wait holds no SM, where a waiting kernel would hold one for
// the whole of the layer it waits through (and cost every GEMM a wave where its tiles fill the GPU exactly). A wait
// binds the last record made before it, so one event per chunk of a layer, and one per slot, serve every layer.
// Recorded inside a graph capture, they become the graph's edges: replays keep the order.
static int make_events(State* st, int nready) {
  st->ev_ready = new (std::nothrow) cudaEvent_t[nready]();
  if (!st->ev_ready) return 24;
  st->n_ready = nready;
  for (int i = 0; i < nready; ++i)
    if (cudaEventCreateWithFlags(&st->ev_ready[i], cudaEventDisableTiming) != cudaSuccess) return 24;
  for (cudaEvent_t& e : st->ev_sent)
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) return 24;
  return 0;
}
static void destroy_events(State* st) {
  for (int i = 0; i < st->n_ready; ++i)
    if (st->ev_ready[i]) cudaEventDestroy(st->ev_ready[i]);
  delete[] st->ev_ready;
  for (cudaEvent_t e : st->ev_sent)
    if (e) cudaEventDestroy(e);
}
static int mark_ready(State* st, int c, cudaStream_t s) {  // chunk c's K/V are written, after the work on s
  return c >= 0 && c < st->n_ready && cudaEventRecord(st->ev_ready[c], s) == cudaSuccess ? 0 : 69;
}
static int after_ready(State* st, int c, cudaStream_t s) {  // s waits for the last mark_ready of chunk c
  return c >= 0 && c < st->n_ready && cudaStreamWaitEvent(s, st->ev_ready[c], 0) == cudaSuccess ? 0 : 69;
}
static int mark_sent(State* st, int64_t l, cudaStream_t s) {  // layer l's slot was read, after the work on s
  return cudaEventRecord(st->ev_sent[l & 1], s) == cudaSuccess ? 0 : 69;
}
static int after_sent(State* st, int64_t l, cudaStream_t s) {  // s waits until layer l's transfer read its slot
  return cudaStreamWaitEvent(s, st->ev_sent[l & 1], 0) == cudaSuccess ? 0 : 69;
}

// Copy-engine transfer of layer l's K and V rows (projection output) into the pair's staging area: one strided
// DMA copy per plane, no SM.
static int copy_engine_rows(cuco_ctx* ctx, State* st, int64_t l, cudaStream_t s) {
  const Geo& g = st->g;
  const cuco_kvt_side src = rows_of(st, l);
  char* dst = pair_buf(ctx, st, BUF_STAGE) + 2 * stage_layer_elem(g, l);
  for (int kv = 0; kv < 2; ++kv)
    if (cudaMemcpy2DAsync(dst + (size_t)kv * g.S * g.D * 2, (size_t)g.D * 2, (const char*)src.rows + kv * g.D * 2,
                          (size_t)src.row_ld * 2, (size_t)g.D * 2, (size_t)g.S, cudaMemcpyDeviceToDevice,
                          s) != cudaSuccess)
      return 66;
  return 0;
}

// Flags. Symmetric (ctx->symmetric_workspace, written by the pair rank): Flags layout (arrived[l][c] | done).
// Local (ctx->workspace): ready[L * nchunks] (stream-ordered "chunk c of layer l is computed"), which the GIN block
// waits on (LSA points order their streams by events) | L more words, unused.
static uint32_t* sym_flags(cuco_ctx* ctx) { return (uint32_t*)ctx->symmetric_workspace.ptr; }
static uint32_t* ready_flag(cuco_ctx* ctx, const Flags& f, int64_t l, int c) {
  return (uint32_t*)ctx->workspace + f.arrived(l, c);
}
static size_t local_flag_bytes(const Flags& f) { return 4 * (size_t)(f.L * f.nchunks + f.L) + 256; }
static size_t sym_flag_bytes(const Flags& f) { return (4 * (size_t)f.words() + 255) / 256 * 256; }

// Raise word `w` of the pair rank's symmetric flags to this launch's epoch, after everything before it on the stream
// (release at system scope: the bytes it follows are visible to the pair rank once it sees the epoch). The epoch is
// read from the device epoch word, so a replayed graph raises the replay's epoch.
__global__ void signal_kernel(uint32_t* word, const uint32_t* epoch_at) {
  __threadfence_system();
  if (threadIdx.x == 0) cuco::lsa::store_release_sys(word, cuco::kit::load_epoch(epoch_at));
}
// Wait until word `w` of this rank's symmetric flags reaches this launch's epoch, or the previous launch's
// (back = cuco::kit::kPrevLaunch; it passes at once on the first launch). One thread spins; acquire.
__global__ void wait_kernel(const uint32_t* word, const uint32_t* epoch_at, int back) {
  cuco::lsa::cta_wait_epoch(word, cuco::kit::load_epoch(epoch_at, back));
}
__global__ void barrier_kernel(ncclDevComm dc) { cuco::kit::cta_lsa_barrier(dc, true); }

static int signal_pair(cuco_ctx* ctx, State* st, int64_t w, cudaStream_t s) {
  signal_kernel<<<1, 32, 0, s>>>((uint32_t*)st->pair_sym + w, st->epoch_at);
  return launch_ok();
}
static int wait_own(cuco_ctx* ctx, State* st, int64_t w, int back, cudaStream_t s) {
  wait_kernel<<<1, 32, 0, s>>>(sym_flags(ctx) + w, st->epoch_at, back);
  return launch_ok();
}
static int barrier(cuco_ctx* ctx, cudaStream_t s) {
  barrier_kernel<<<1, 128, 0, s>>>(ctx->devcomm);
  return launch_ok();
}
// Main stream s waits for everything queued so far on the side stream.
static int join_side(cuco_ctx* ctx, State* st, cudaStream_t s) {
  if (cudaEventRecord(st->ev_join, ctx->side_stream) != cudaSuccess) return 67;
  return cudaStreamWaitEvent(s, st->ev_join, 0) == cudaSuccess ? 0 : 67;
}

// W = 1 holds both roles on one GPU. Its decode side runs on a stream of its own, forked at the launch's start, so
// it waits for arrivals as a separate decode rank would instead of queueing behind the prefill on the main stream: a
// decode side that does not wait then reads the staging area early and fails verification at W = 1 too. At W >= 2
// the decode side is the main stream.
static bool both_roles(const cuco_ctx* ctx) {
  return role_of(ctx->rank, ctx->world) == (ROLE_PREFILL | ROLE_DECODE);
}
static int decode_begin(cuco_ctx* ctx, State* st, cudaStream_t* ds) {
  *ds = both_roles(ctx) ? st->own_stream[0] : ctx->stream;  // the skeleton's own stream (Needs::own_streams)
  if (*ds == ctx->stream) return 0;
  return cudaStreamWaitEvent(*ds, st->ev_start, 0) == cudaSuccess ? 0 : 68;
}
static int decode_end(cuco_ctx* ctx, State* st, cudaStream_t ds) {
  if (ds == ctx->stream) return 0;
  if (cudaEventRecord(st->ev_decode, ds) != cudaSuccess) return 68;
  return cudaStreamWaitEvent(ctx->stream, st->ev_decode, 0) == cudaSuccess ? 0 : 68;
}

__global__ void pair_sym_kernel(ncclDevComm dc, ncclWindow_t win, int me, int pair, char** out) {
  *out = cuco::lsa::peer_ptr<char>(dc, win, 0, me, pair);
}

// Setup shared by every point: geometry, roles, the pair's flags (setup only: it synchronises).
static int frozen_setup(cuco_ctx* ctx, State* st) {
  st->g = geo_make(ctx->dims[0], ctx->dims[1], ctx->dims[2]);
  if (!world_ok(ctx->world) || st->g.L > kMaxLayers) return 20;
  st->role = role_of(ctx->rank, ctx->world);
  st->pair = pair_peer(ctx->rank, ctx->world);
  if (cudaEventCreateWithFlags(&st->ev_join, cudaEventDisableTiming) != cudaSuccess) return 21;
  if (cudaEventCreateWithFlags(&st->ev_decode, cudaEventDisableTiming) != cudaSuccess) return 21;
  st->pair_sym = (char*)ctx->symmetric_workspace.ptr;
  if (st->pair == ctx->rank || !ctx->has_devcomm || !ctx->symmetric_workspace.window || ctx->world != ctx->local_world)
    return 0;  // W = 1, or no LSA path (GIN points address the pair by puts only)
  char** d = nullptr;
  if (cudaMalloc(&d, sizeof(char*)) != cudaSuccess) return 22;
  pair_sym_kernel<<<1, 1, 0, ctx->stream>>>(ctx->devcomm, ctx->symmetric_workspace.window, ctx->rank, st->pair, d);
  int rc = cudaMemcpyAsync(&st->pair_sym, d, sizeof(char*), cudaMemcpyDeviceToHost, ctx->stream) == cudaSuccess &&
                   cudaStreamSynchronize(ctx->stream) == cudaSuccess
               ? 0
               : 23;
  cudaFree(d);
  return rc;
}

}  // namespace cuco_kv
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen): the kit's skeleton around the block ---------------------------
namespace cuco_kv {
struct Candidate {
  using State = cuco_kv::State;
  static constexpr size_t kLibWorkspaceBytes = 0;  // the layer plan owns its cuBLASLt workspace
  static Needs needs(const cuco_ctx* ctx) {
    Needs n = block_needs(ctx);
    n.own_streams = both_roles(ctx) ? 1 : 0;  // W = 1: the decode side's stream (decode_begin)
    return n;
  }
  static int setup(cuco_ctx* ctx, State* st) {
    if (int rc = frozen_setup(ctx, st)) return rc;
    return block_setup(ctx, st);  // the EVOLVE block's layer plan
  }
  static int enqueue(cuco_ctx* ctx, State* st) {
    return cuco_kv::enqueue(ctx, st);
  }
  static void teardown(State* st) {
    cuco_kvt_destroy(st->plan);
    destroy_events(st);
    if (st->ev_join) cudaEventDestroy(st->ev_join);
    if (st->ev_decode) cudaEventDestroy(st->ev_decode);
  }
};
}  // namespace cuco_kv

""" + skeleton_entry_points("cuco_kv::Candidate")


def head() -> str:
    """The frozen head with the index arithmetic inlined."""
    return fill(HEAD_TEMPLATE, {"LAYOUT": layout_code()}, what="kv_transfer frozen head")
