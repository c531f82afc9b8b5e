// Host-driven MoE layer (dispatch -> expert FFN -> combine): the program a user brings, in candidate-ABI form,
// and the baseline that fitness is measured against.
//
//   1. sort this rank's token slots by expert (experts are spread evenly, so also by destination rank) and pack
//      the token rows in that order;
//   2. exchange the slot counts (grouped ncclSend/ncclRecv) and read them on the host;
//   3. AlltoAllv of the token rows (grouped ncclSend/ncclRecv, sizes from the counts);
//   4. expert FFN on the received rows (the workload's compute library: CUTLASS grouped GEMM, SwiGLU);
//   5. AlltoAllv of the expert outputs back to their source ranks;
//   6. gate-weighted sum of each token's top-k outputs.
//
// dims = T, H, I, E, K, R. Buffers: 0 X (T x H), 1 experts (T x K int32), 2 gates (T x K fp32), 3 W1, 4 W2,
// 5 Y (T x H), 6 pub, 7 work (the plugin's scratch, unused here: this program brings its own).
#include <stdint.h>
#include <stdio.h>

#include <cuda_bf16.h>

#include "cuco/abi.h"

// The expert FFN of the workload's compute library (compute/moe_ffn.h, published as cuco/compute/moe.h).
// KIT-REQUEST: cuco.fastpath_cache runs the FastPathAgent without the workload's compute include dir, so a seed
// that includes cuco/compute/moe.h fails the fast path's compile check; until it passes
// link_options(...).include_dirs, this program declares the three functions it calls (same C interface).
extern "C" {
typedef struct cuco_moe_ffn cuco_moe_ffn;
int cuco_moe_ffn_create(cuco_moe_ffn** plan, int max_groups, int64_t hidden, int64_t inter, int sm_count);
int cuco_moe_ffn_run(cuco_moe_ffn* plan, int groups, const void* x, const void* w1, const void* w2, void* h1,
                     void* act, void* y, const int32_t* rows, const int64_t* row_offset, const int32_t* expert,
                     cudaStream_t stream);
int cuco_moe_ffn_destroy(cuco_moe_ffn* plan);
}

namespace {

constexpr int kMaxExperts = 1024;

struct Seed {
  int64_t T, H, I, E, K, El, slots, cap;  // cap: rows this rank may receive (every slot of every rank)
  int W, me;
  // symmetric workspace: counts out | counts in | packed rows | received rows | outputs | returned outputs
  int32_t *cnt, *cnt_in;
  __nv_bfloat16 *packed, *recv, *out, *back;
  // work: slot order and ranks, FFN groups and scratch
  int32_t *order, *slot_rank, *g_rows, *g_exp;
  int64_t* g_off;
  __nv_bfloat16 *h1, *act;
  int32_t* h_cnt;  // pinned: own counts [E] then received counts [W * El]
  int32_t* h_rows;
  int64_t* h_off;
  int32_t* h_exp;
  cuco_moe_ffn* ffn;
};

size_t al(size_t b) { return (b + 255) / 256 * 256; }

void geometry(const cuco_ctx* ctx, Seed* s) {
  s->T = ctx->dims[0], s->H = ctx->dims[1], s->I = ctx->dims[2], s->E = ctx->dims[3], s->K = ctx->dims[4];
  s->W = ctx->world, s->me = ctx->rank;
  s->El = s->E / s->W;
  s->slots = s->T * s->K;
  s->cap = s->slots * s->W;
}

size_t sym_bytes(const Seed& s) {
  return 2 * al(4 * s.E) + al(2 * s.slots * s.H) + 2 * al(2 * s.cap * s.H) + al(2 * s.slots * s.H);
}

size_t work_bytes(const Seed& s) {
  return 2 * al(4 * s.slots) + 2 * al(4 * s.W * s.El) + al(8 * s.W * s.El) + al(2 * s.cap * 2 * s.I) +
         al(2 * s.cap * s.I);
}

// Slots grouped by expert: cnt[E], order[] (slot ids, expert by expert), slot_rank[] (place within its expert).
__global__ void sort_slots(const int32_t* expert, int64_t slots, int64_t E, int32_t* cnt, int32_t* order,
                           int32_t* slot_rank) {
  __shared__ int32_t c[kMaxExperts], start[kMaxExperts];
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) c[e] = 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) slot_rank[j] = atomicAdd(&c[expert[j]], 1);
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t acc = 0;
    for (int64_t e = 0; e < E; ++e) start[e] = acc, acc += c[e];
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = c[e];
  for (int64_t j = threadIdx.x; j < slots; j += blockDim.x) order[start[expert[j]] + slot_rank[j]] = (int32_t)j;
}

// packed[i] = X[token of order[i]], one CTA per row.
__global__ void pack_rows(const __nv_bfloat16* x, const int32_t* order, int64_t slots, int64_t K, int64_t H,
                          __nv_bfloat16* packed) {
  for (int64_t i = blockIdx.x; i < slots; i += gridDim.x) {
    const int4* src = reinterpret_cast<const int4*>(x + (order[i] / K) * H);
    int4* dst = reinterpret_cast<int4*>(packed + i * H);
    for (int64_t w = threadIdx.x; w < H / 8; w += blockDim.x) dst[w] = src[w];
  }
}

// Y[t] = sum_k gate * back[position of slot (t, k) in the packed order]; fp32 sum.
__global__ void combine_rows(const int32_t* expert, const float* gate, const int32_t* slot_rank,
                             const int32_t* cnt, int64_t E, int64_t T, int64_t K, int64_t H,
                             const __nv_bfloat16* back, __nv_bfloat16* y) {
  __shared__ int32_t start[kMaxExperts];
  if (threadIdx.x == 0) {
    int32_t acc = 0;
    for (int64_t e = 0; e < E; ++e) start[e] = acc, acc += cnt[e];
  }
  __syncthreads();
  for (int64_t t = blockIdx.x; t < T; t += gridDim.x)
    for (int64_t c = threadIdx.x; c < H; c += blockDim.x) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t j = t * K + k;
        acc += gate[j] * __bfloat162float(back[(start[expert[j]] + slot_rank[j]) * H + c]);
      }
      y[t * H + c] = __float2bfloat16(acc);
    }
}

}  // namespace

extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {
  Seed s;
  geometry(ctx, &s);
  req->symmetric_workspace_bytes = sym_bytes(s);
  req->workspace_bytes = work_bytes(s);
  return 0;
}

extern "C" int cuco_candidate_setup(cuco_ctx* ctx) {
  Seed* s = new Seed();
  ctx->candidate_state = s;
  geometry(ctx, s);
  char* p = (char*)ctx->symmetric_workspace.ptr;
  s->cnt = (int32_t*)p;                    p += al(4 * s->E);
  s->cnt_in = (int32_t*)p;                 p += al(4 * s->E);
  s->packed = (__nv_bfloat16*)p;           p += al(2 * s->slots * s->H);
  s->recv = (__nv_bfloat16*)p;             p += al(2 * s->cap * s->H);
  s->out = (__nv_bfloat16*)p;              p += al(2 * s->cap * s->H);
  s->back = (__nv_bfloat16*)p;
  char* w = (char*)ctx->workspace;
  s->order = (int32_t*)w;                  w += al(4 * s->slots);
  s->slot_rank = (int32_t*)w;              w += al(4 * s->slots);
  s->g_rows = (int32_t*)w;                 w += al(4 * s->W * s->El);
  s->g_exp = (int32_t*)w;                  w += al(4 * s->W * s->El);
  s->g_off = (int64_t*)w;                  w += al(8 * s->W * s->El);
  s->h1 = (__nv_bfloat16*)w;               w += al(2 * s->cap * 2 * s->I);
  s->act = (__nv_bfloat16*)w;
  if (cudaMallocHost(&s->h_cnt, 4 * (s->E + s->W * s->El)) != cudaSuccess) return 1;
  if (cudaMallocHost(&s->h_rows, 4 * s->W * s->El) != cudaSuccess) return 1;
  if (cudaMallocHost(&s->h_off, 8 * s->W * s->El) != cudaSuccess) return 1;
  if (cudaMallocHost(&s->h_exp, 4 * s->W * s->El) != cudaSuccess) return 1;
  return cuco_moe_ffn_create(&s->ffn, (int)(s->W * s->El), s->H, s->I, 0) ? 2 : 0;
}

extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  cudaStream_t st = ctx->stream;
  const int32_t* expert = (const int32_t*)ctx->buffers[1].ptr;
  const float* gate = (const float*)ctx->buffers[2].ptr;
  const int64_t H = s->H, El = s->El;
  sort_slots<<<1, 1024, 0, st>>>(expert, s->slots, s->E, s->cnt, s->order, s->slot_rank);
  pack_rows<<<1024, 256, 0, st>>>((const __nv_bfloat16*)ctx->buffers[0].ptr, s->order, s->slots, s->K, H, s->packed);
  // Counts: El per peer, there and back.
  ncclGroupStart();
  for (int q = 0; q < s->W; ++q) {
    ncclSend(s->cnt + q * El, El, ncclInt32, q, ctx->comm, st);
    ncclRecv(s->cnt_in + q * El, El, ncclInt32, q, ctx->comm, st);
  }
  ncclGroupEnd();
  cudaMemcpyAsync(s->h_cnt, s->cnt, 4 * s->E, cudaMemcpyDeviceToHost, st);
  cudaMemcpyAsync(s->h_cnt + s->E, s->cnt_in, 4 * s->W * El, cudaMemcpyDeviceToHost, st);
  cudaStreamSynchronize(st);  // the AlltoAllv sizes live on the host
  const int32_t* mine = s->h_cnt;
  const int32_t* in = s->h_cnt + s->E;
  // Dispatch: rows for rank q are the contiguous run of experts q*El .. q*El+El-1 in the packed order.
  ncclGroupStart();
  int64_t soff = 0, roff = 0;
  for (int q = 0; q < s->W; ++q) {
    int64_t sn = 0, rn = 0;
    for (int64_t e = 0; e < El; ++e) sn += mine[q * El + e], rn += in[q * El + e];
    ncclSend(s->packed + soff * H, sn * H, ncclBfloat16, q, ctx->comm, st);
    ncclRecv(s->recv + roff * H, rn * H, ncclBfloat16, q, ctx->comm, st);
    soff += sn, roff += rn;
  }
  ncclGroupEnd();
  // Expert FFN: one group per (source rank, local expert), rows in the order they arrived.
  int64_t row = 0;
  for (int p = 0; p < s->W; ++p)
    for (int64_t e = 0; e < El; ++e) {
      const int64_t g = p * El + e;
      s->h_rows[g] = in[g], s->h_off[g] = row, s->h_exp[g] = (int32_t)e;
      row += in[g];
    }
  cudaMemcpyAsync(s->g_rows, s->h_rows, 4 * s->W * El, cudaMemcpyHostToDevice, st);
  cudaMemcpyAsync(s->g_off, s->h_off, 8 * s->W * El, cudaMemcpyHostToDevice, st);
  cudaMemcpyAsync(s->g_exp, s->h_exp, 4 * s->W * El, cudaMemcpyHostToDevice, st);
  int rc = cuco_moe_ffn_run(s->ffn, (int)(s->W * El), s->recv, ctx->buffers[3].ptr, ctx->buffers[4].ptr, s->h1,
                            s->act, s->out, s->g_rows, s->g_off, s->g_exp, st);
  if (rc) return 10 + rc;
  // Combine: outputs travel back the way their tokens came.
  ncclGroupStart();
  soff = 0, roff = 0;
  for (int q = 0; q < s->W; ++q) {
    int64_t sn = 0, rn = 0;
    for (int64_t e = 0; e < El; ++e) sn += in[q * El + e], rn += mine[q * El + e];
    ncclSend(s->out + soff * H, sn * H, ncclBfloat16, q, ctx->comm, st);
    ncclRecv(s->back + roff * H, rn * H, ncclBfloat16, q, ctx->comm, st);
    soff += sn, roff += rn;
  }
  ncclGroupEnd();
  combine_rows<<<1024, 256, 0, st>>>(expert, gate, s->slot_rank, s->cnt, s->E, s->T, s->K, H, s->back,
                                     (__nv_bfloat16*)ctx->buffers[5].ptr);
  return cudaGetLastError() == cudaSuccess ? 0 : 20;
}

extern "C" int cuco_candidate_teardown(cuco_ctx* ctx) {
  Seed* s = (Seed*)ctx->candidate_state;
  if (!s) return 0;
  cuco_moe_ffn_destroy(s->ffn);
  cudaFreeHost(s->h_cnt);
  cudaFreeHost(s->h_rows);
  cudaFreeHost(s->h_off);
  cudaFreeHost(s->h_exp);
  delete s;
  ctx->candidate_state = nullptr;
  return 0;
}
