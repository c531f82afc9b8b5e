// Host-driven KV transfer (disaggregated prefill -> decode): the program a user brings, in candidate-ABI form, and
// the baseline that fitness is measured against. Rank 2p prefills, rank 2p+1 decodes (W = 1: rank 0 does both).
//
// Per layer l:
//   prefill: QKV projection, K/V into its paged cache (its block table), attention + output projection + MLP
//            (the workload's compute library: cuBLASLt GEMMs, CUTLASS Hopper FMHA); then the layer's pages gathered
//            into a contiguous send buffer (K then V, token order) and ncclSend to the decode rank;
//   decode:  ncclRecv into its staging area, then scatter into its own paged cache (its block table).
//
// dims = S, KV, L. Buffers: 0 X0, 1 W, 2 tables (prefill table, decode table), 3 pcache, 4 dcache, 5 stage.
#include <stdint.h>
#include <stdio.h>

#include <cuda_bf16.h>

#include "cuco/abi.h"
#include "cuco/compute/kv_transfer.h"

namespace {

struct Seed {
  int64_t S, D, L, nblk, pool, ld, qw;
  int me, W, peer;
  bool prefill, decode;
  cuco_kvt* layer;
  __nv_bfloat16* send;  // symmetric workspace: one layer's K and V, token order
};

void geometry(const cuco_ctx* ctx, Seed* s) {
  s->S = ctx->dims[0], s->D = ctx->dims[1], s->L = ctx->dims[2];
  s->nblk = s->S / CUCO_KVT_BLOCK;
  s->pool = s->nblk + (s->nblk + 7) / 8;
  s->me = ctx->rank, s->W = ctx->world;
  s->prefill = s->W == 1 || s->me % 2 == 0;
  s->decode = s->W == 1 || s->me % 2 == 1;
  s->peer = s->W == 1 ? s->me : (s->me ^ 1);
}

// Plane kv of layer l of a paged cache: (l * 2 + kv) * pool pages of 16 x D.
char* layer_pages(void* cache, const Seed* s, int64_t l) {
  return (char*)cache + (size_t)(l * 2 * s->pool * CUCO_KVT_BLOCK * s->D) * 2;
}

}  // namespace

extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  Seed s;
  geometry(ctx, &s);
  req->symmetric_workspace_bytes = (size_t)(2 * s.S * s.D) * 2;
  return 0;
}

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  Seed* s = new Seed();
  ctx->candidate_state = s;
  geometry(ctx, s);
  s->send = (__nv_bfloat16*)ctx->symmetric_workspace.ptr;
  s->layer = nullptr;
  s->qw = (int64_t)cuco_kvt_query_heads(s->D) * CUCO_KVT_HEAD_DIM;
  s->ld = s->qw + 2 * s->D;
  return s->prefill ? cuco_kvt_create(&s->layer, s->S, s->D, 0, 0) : 0;
}

extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  cudaStream_t st = ctx->stream;
  const void* w = ctx->buffers[1].ptr;
  const int32_t* tables = (const int32_t*)ctx->buffers[2].ptr;
  const size_t n = (size_t)(2 * s->S * s->D);
  for (int64_t l = 0; l < s->L; ++l) {
    if (s->prefill) {
      const int slot = (int)(l & 1);
      const void* x = l ? cuco_kvt_act(s->layer, slot ^ 1) : ctx->buffers[0].ptr;
      if (cuco_kvt_project(s->layer, w, x, slot, st)) return 10;
      cuco_kvt_side rows = {(char*)cuco_kvt_qkv(s->layer, slot) + 2 * s->qw, s->ld, nullptr, nullptr, 0};
      cuco_kvt_side mine = {nullptr, 0, layer_pages(ctx->buffers[3].ptr, s, l), tables, s->pool};
      if (cuco_kvt_copy_blocks(rows, mine, s->D, 0, s->nblk, 0, 2 * ctx->sm_count, st)) return 11;
      if (cuco_kvt_finish(s->layer, w, x, slot, cuco_kvt_act(s->layer, slot), st)) return 12;
      // The layer's K/V out of the pages into one contiguous message (K plane, then V plane, token order).
      cuco_kvt_side packed = {nullptr, 0, s->send, nullptr, s->nblk};
      if (cuco_kvt_copy_blocks(mine, packed, s->D, 0, s->nblk, 0, 2 * ctx->sm_count, st)) return 13;
    }
    __nv_bfloat16* recv = (__nv_bfloat16*)ctx->buffers[5].ptr + (size_t)l * n;
    ncclGroupStart();
    if (s->prefill) ncclSend(s->send, n, ncclBfloat16, s->peer, ctx->comm, st);
    if (s->decode) ncclRecv(recv, n, ncclBfloat16, s->peer, ctx->comm, st);
    ncclGroupEnd();
    if (s->decode) {
      cuco_kvt_side staged = {nullptr, 0, recv, nullptr, s->nblk};
      cuco_kvt_side theirs = {nullptr, 0, layer_pages(ctx->buffers[4].ptr, s, l), tables + s->nblk, s->pool};
      if (cuco_kvt_copy_blocks(staged, theirs, s->D, 0, s->nblk, 0, 2 * ctx->sm_count, st)) return 14;
    }
  }
  return cudaGetLastError() == cudaSuccess ? 0 : 20;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  if (!s) return 0;
  cuco_kvt_destroy(s->layer);
  delete s;
  ctx->candidate_state = nullptr;
  return 0;
}
