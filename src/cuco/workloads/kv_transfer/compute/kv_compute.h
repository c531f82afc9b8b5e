// The KV-transfer workload's compute library (published as cuco/compute/kv_transfer.h, linked as
// libkv_transfer_compute.so): one Llama-3-8B-like prefill layer on library kernels, and the paged-cache copies.
//
// Layer (S tokens, hidden H = 4096, MLP F = 14336, head dim 128, KV width D = 128 * kv_heads, query heads Hq =
// the largest multiple of kv_heads <= 32, so Q width QW = 128 * Hq), bf16 row-major, fp32 accumulate:
//   qkv = rms(x) . Wqkv             [S x (QW + 2D)]: Q columns, then K (D), then V (D)      cuBLASLt
//   o   = causal GQA attention(q, k, v) [S x QW]                                            CUTLASS Hopper FMHA
//   h   = x + o . Wo                [S x H]   (residual in the GEMM epilogue, beta = 1)     cuBLASLt
//   gu  = rms(h) . Wgu              [S x 2F]  (gate columns, then up columns)                cuBLASLt
//   a   = silu(gate) * up           [S x F]
//   y   = h + a . Wd                [S x H]   (the next layer's x)                           cuBLASLt
// rms(v): RMSNorm of each row with unit scale and eps 1e-5 (Llama's pre-norm as initialised), so activations stay
// O(1) through any number of layers. Weights: one buffer, Wqkv [H x (QW+2D)] | Wo [QW x H] | Wgu [H x 2F] | Wd [F x H] (cuco_kvt_weight_offsets).
//
// Paged caches (vLLM-style): per layer two planes (K, V) of `pool` pages of 16 tokens x D; page p of plane kv of
// layer l starts at element ((l * 2 + kv) * pool + p) * 16 * D; a block table maps logical block b (tokens 16b ..
// 16b+15) to its page.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUCO_KVT_HIDDEN 4096
#define CUCO_KVT_MLP 14336
#define CUCO_KVT_HEAD_DIM 128
#define CUCO_KVT_MAX_QHEADS 32
#define CUCO_KVT_BLOCK 16

typedef struct cuco_kvt cuco_kvt;  // plans and activations of one layer shape (S, D)

// Element offsets of Wqkv, Wo, Wgu, Wd in the weight buffer, and its total elements, for KV width D.
void cuco_kvt_weight_offsets(int64_t D, int64_t out[4], int64_t* total);
// Query heads for KV width D (0 when D is not a positive multiple of 128 or kv_heads > 32).
int cuco_kvt_query_heads(int64_t D);

// Plans for S tokens and KV width D. sm_count > 0 keeps the GEMMs on that many SMs (the rest stay free for
// communication kernels), 0 uses all. kv_chunk_rows > 0 also plans the K/V projection over chunks of that many
// rows (a multiple of 16) for cuco_kvt_kv_rows. 0 on success.
int cuco_kvt_create(cuco_kvt** out, int64_t S, int64_t D, int sm_count, int64_t kv_chunk_rows);
int cuco_kvt_destroy(cuco_kvt* plan);

// The projection output of slot 0 or 1 ([S x (QW + 2D)]; K at column QW, V at QW + D) and the layer activations
// of slot 0 or 1 ([S x H], a layer's output and the next one's input). Owned by the plan.
void* cuco_kvt_qkv(cuco_kvt* plan, int slot);
void* cuco_kvt_act(cuco_kvt* plan, int slot);
int64_t cuco_kvt_qkv_ld(const cuco_kvt* plan);   // QW + 2D
int64_t cuco_kvt_q_width(const cuco_kvt* plan);  // QW

// qkv[slot] = x . Wqkv over all rows (one GEMM).
int cuco_kvt_project(cuco_kvt* plan, const void* weights, const void* x, int slot, cudaStream_t stream);
// Only the Q columns of every row, or only the K/V columns of rows [row0, row0 + rows) (rows <= kv_chunk_rows):
// the projection in pieces, so K/V chunks can leave as soon as they are computed.
int cuco_kvt_project_q(cuco_kvt* plan, const void* weights, const void* x, int slot, cudaStream_t stream);
int cuco_kvt_project_kv_rows(cuco_kvt* plan, const void* weights, const void* x, int slot, int64_t row0,
                             int64_t rows, cudaStream_t stream);
// Only the Q columns, from the rows the K/V chunks of this layer already normalised: call after
// cuco_kvt_project_kv_rows has covered rows [0, S) of the same input, on the same stream.
int cuco_kvt_project_q_normed(cuco_kvt* plan, const void* weights, int slot, cudaStream_t stream);
// Attention, output projection, MLP: y = layer(x) given qkv[slot]; y may not alias x.
int cuco_kvt_finish(cuco_kvt* plan, const void* weights, const void* x, int slot, void* y, cudaStream_t stream);

// Block copies between token rows and paged caches, for blocks [b0, b1) of one layer, both planes (K and V).
// A side is either token rows (rows != NULL: K of token t at rows + t * row_ld, V at + D) or pages (pages != NULL:
// plane kv of page p at pages + (kv * pool + p) * 16 * D, the layer's base; table NULL = identity). Either side may
// be a peer's memory (an LSA pointer). `group` threads move one block (1, 32, or 0 = a whole CTA of 256); `ctas`
// CTAs share the blocks. Stream-ordered, no flags.
typedef struct {
  void* rows;
  int64_t row_ld;
  void* pages;
  const int32_t* table;
  int64_t pool;
} cuco_kvt_side;
int cuco_kvt_copy_blocks(cuco_kvt_side src, cuco_kvt_side dst, int64_t D, int64_t b0, int64_t b1, int group,
                         int ctas, cudaStream_t stream);

#ifdef __cplusplus
}  // extern "C"
#endif
