"""The frozen parts of a rendered ring-attention candidate: identical for every design point.

Head: includes, buffer indices, the candidate state (the kit's Base: events, stream ops, peer table), flag
addressing and the attention call over one slice of a source's KV block (the compute library). Tail: the
candidate-ABI entry points, calling the kit's skeleton. The EVOLVE block between them defines
`block_needs(ctx)` and `enqueue(ctx, st)` in namespace cuco_cp.
"""

from __future__ import annotations

from cuco.kit.entry_points import skeleton_entry_points

HEAD = r"""
// Ring attention (FlashAttention forward, context parallel), device-initiated.
// O_r = softmax(Q_r K^T / sqrt(D)) V over the whole sequence on every rank r, with the log-sum-exp of every row;
// causal with the zigzag layout, or full. Buffers: 0 Q, 1 KV (own block, symmetric), 2 O, 3 LSE, 4 ring
// (symmetric, slot p holds rank p's KV block), 5 work (an fp32 partial O, its LSE, the fp32 running O). Layouts
// and the zigzag schedule: cuco/compute/attention_cp.h. The EVOLVE block defines block_needs(ctx) and enqueue(ctx, st).
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>

#include "cuco/abi.h"
#include "cuco/compute/attention_cp.h"  // cuco_attn_block_f32 / cuco_attn_merge_f32 (compute library), zigzag layout
#include "cuco/kit/layout.cuh"
#include "cuco/kit/skeleton.cuh"
#include "cuco/kit/sync.cuh"
#include "cuco/lsa.cuh"

namespace cuco_cp {

enum { BUF_Q = 0, BUF_KV = 1, BUF_O = 2, BUF_LSE = 3, BUF_RING = 4, BUF_WORK = 5 };

using cuco::kit::launch_ok;
using cuco::kit::Needs;  // what the block asks of the harness; filled by block_needs() inside the EVOLVE block
using cuco::kit::peer_base;
using cuco::kit::stream_set_epoch;
using cuco::kit::stream_wait_epoch;
using cuco_attn::Geo;
using cuco_attn::kv_row_elems;
using cuco_attn::kv_rows_needed;
using cuco_attn::source_at;

struct State : cuco::kit::Base {};

static Geo geo_of(const cuco_ctx* ctx) { return cuco_attn::geo_of_dims(ctx->dims, ctx->world); }
__host__ __device__ inline size_t block_bytes(const Geo& g) { return (size_t)(2 * cuco_attn::kv_block_elems(g)); }
// 16-byte words of one K (or V) row, and of a whole block.
__host__ __device__ inline int64_t row16(const Geo& g) { return kv_row_elems(g) * 2 / 16; }
__host__ __device__ inline int64_t block16(const Geo& g) { return 2 * g.Sr * row16(g); }

// Flags (uint32 epochs), laid out by cuco/kit/layout.cuh. Symmetric (written by peers): ready[W] | done[W] |
// arrive[W * nchunks]; local: chunk[W * nchunks] (landed) | count[W * nchunks] | misc[64].
struct Flags {
  uint32_t* local;
  uint32_t* sym;
  cuco::kit::LocalFlags lf;
  cuco::kit::SymFlags sf;
};

static Flags flags_of(cuco_ctx* ctx, const Geo& g, int nchunks) {
  return Flags{(uint32_t*)ctx->workspace, (uint32_t*)ctx->symmetric_workspace.ptr,
               cuco::kit::LocalFlags{g.W, nchunks}, cuco::kit::SymFlags{g.W, nchunks}};
}

static Needs flag_needs(const Geo& g, int nchunks) {
  Needs n;
  n.flag_bytes = 4 * cuco::kit::LocalFlags{g.W, nchunks}.words();
  n.sym_bytes = 4 * cuco::kit::SymFlags{g.W, nchunks}.words();
  return n;
}

// The fp32 running output in work (after the fp32 partial O and its LSE): every schedule merges into it and rounds
// it to bf16 O once, at the end (finish).
static inline void* running_f32(cuco_ctx* ctx, const Geo& g) {
  return (char*)ctx->buffers[BUF_WORK].ptr + cuco_attn::work_running_at(g);
}

// Attention of this rank's queries to rows [a, b) of src's KV block at `kv`, in fp32: direct for the first slice of
// the own block (it writes the running output and the LSE), an fp32 partial folded in by `merge` otherwise
// (cuco_attn_merge_f32). At W = 1 a direct call takes the whole block and writes bf16 O itself.
static inline int attend(cuco_ctx* ctx, const Geo& g, int src, int64_t a, int64_t b, const void* kv, bool direct,
                         cuco_attn::MergeFn merge, cudaStream_t s) {
  char* work = (char*)ctx->buffers[BUF_WORK].ptr;
  return cuco_attn::attend_rows(g, ctx->rank, src, a, b, ctx->buffers[BUF_Q].ptr, kv, running_f32(ctx, g),
                                (float*)ctx->buffers[BUF_LSE].ptr, work,
                                (float*)(work + cuco_attn::work_partial_lse_at(g)), direct, merge,
                                ctx->buffers[BUF_O].ptr, s);
}

// O = bf16(the running output): the one rounding, after the last merge (none at W = 1: the direct step wrote O).
static inline int finish(cuco_ctx* ctx, const Geo& g, cudaStream_t s) {
  return cuco_attn::ring_finish(g, ctx->buffers[BUF_O].ptr, (const char*)ctx->buffers[BUF_WORK].ptr, s);
}

// The same rounding whatever W, for a schedule that merged every slice (none direct).
static inline int finish_merged(cuco_ctx* ctx, const Geo& g, cudaStream_t s) {
  return cuco_attn::round_running(g, ctx->buffers[BUF_O].ptr, (const char*)ctx->buffers[BUF_WORK].ptr, s);
}

// This rank's ring slot of src (where src's block lands).
static const char* slot(cuco_ctx* ctx, const Geo& g, int src) {
  return (const char*)ctx->buffers[BUF_RING].ptr + src * block_bytes(g);
}

}  // namespace cuco_cp
"""

TAIL = r"""
// ---- candidate ABI entry points (frozen): the kit's skeleton around the block ---------------------------
namespace cuco_cp {
struct Candidate {
  using State = cuco_cp::State;
  static constexpr size_t kLibWorkspaceBytes = 0;  // the flags start ctx->workspace
  static Needs needs(const cuco_ctx* ctx) { return block_needs(ctx); }
  static int setup(cuco_ctx*, State*) { return 0; }
  static int enqueue(cuco_ctx* ctx, State* st) { return cuco_cp::enqueue(ctx, st); }
  static void teardown(State*) {}
};
}  // namespace cuco_cp

""" + skeleton_entry_points("cuco_cp::Candidate")


def head() -> str:
    """The frozen head of every rendered candidate."""
    return HEAD
