// C interface of GEMM+AllGather's persistent tensor-core GEMM (CUTLASS 3, Hopper, bf16 in/out, fp32 accumulate).
//
// C[M x N] = A[M x K] . B[K x N], all row-major. One launch covers all M rows. Row tiles inside
// [local_row_begin, local_row_end) never wait; a row tile outside it waits, in the producer warp and before its
// TMA loads of A, until the arrival flag of every chunk it overlaps has reached the epoch (`epoch`, or the
// device word at `epoch_at`). Flags are laid out
// [rank p][chunk c]: chunk c of rank p holds rows p*rows_per_rank + [c*chunk_rows, (c+1)*chunk_rows).
// tile_order and the flags are runtime values: one compiled library serves every design point.
#pragma once

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cuco_ag_gemm_order {
  CUCO_AG_ORDER_NATURAL = 0,      // row tiles from row 0 upward
  CUCO_AG_ORDER_LOCAL_FIRST = 1,  // local row tiles first, then the rows after them, wrapping to row 0
};

enum cuco_ag_gemm_config {
  CUCO_AG_TUNED = -1,            // what cuco_ag_gemm_tune measured fastest for this M, N, K, sm_count and device,
                                 // `swizzle` the largest it could pick; untuned: ping-pong at that swizzle
  CUCO_AG_COOP_128x256 = 0,      // cooperative, tile 128x256x64, cluster 2x1x1
  CUCO_AG_PINGPONG_128x128 = 1,  // ping-pong, tile 128x128x64, cluster 2x1x1
  CUCO_AG_NUM_CONFIGS = 2,
};

typedef struct cuco_ag_gemm_args {
  const void* A;  // bf16 [M x lda]
  const void* B;  // bf16 [K x ldb]
  void* C;        // bf16 [M x ldc]
  int64_t M, N, K, lda, ldb, ldc;
  int64_t local_row_begin, local_row_end;  // rows that never wait (empty range: every row may wait)
  int order;                               // cuco_ag_gemm_order
  const uint32_t* flags;                   // arrival flags, device memory; NULL: no row ever waits
  uint32_t epoch;                          // a flag f is up when (int32_t)(f - epoch) >= 0
  const uint32_t* epoch_at;                // non-NULL: the epoch is read from this device word by the kernel
                                           // instead (`epoch` is ignored), so a launch captured in a CUDA graph
                                           // follows the word as it advances between replays
  int64_t rows_per_rank, chunk_rows;       // flag geometry (rows); ignored when flags is NULL
  int chunks_per_rank;
  int sm_count;  // SMs the persistent grid may use; 0: all of the device
  int config;    // cuco_ag_gemm_config
  int swizzle;   // tile-rasterisation swizzle (1, 2, 4 or 8); 0: 1. A raster band spans swizzle*256 rows:
                 // keep it <= the local rows, or local-first order starts on remote rows too
} cuco_ag_gemm_args;

// 0 when `a` can run; else a nonzero code and a sentence (naming the fix) in why[0..why_len).
int cuco_ag_gemm_check(const cuco_ag_gemm_args* a, char* why, int why_len);

// Time each configuration at each swizzle up to max_swizzle (1, 2, 4 or 8) for `a`'s M, N, K and sm_count on the
// current device, with no flags (nothing waits), and remember the fastest for the calls with config CUCO_AG_TUNED
// and swizzle max_swizzle. Each is timed as single launches on a drained stream (median of six, rounds in turned
// order). The fastest differs by shape, by SM count and by how the launch meets the GPU: on one H200, timed behind
// a GPU spin, the best of the grid was within 2 % of cuBLAS where the fixed ping-pong choice was up to 1.13x slower,
// but this function's own timing chose ping-pong on most of those shapes, and its choice was no faster than the fixed
// one there (benchmarks/results/gemm_waves/README.md). It synchronises `stream` and writes C: call it at setup,
// never while a graph is captured. 0 on success, *config and *swizzle (either may be NULL) the choice; else a
// cuco_ag_gemm_check code, 14 (no current device), 16 (max_swizzle not 1, 2, 4 or 8), 17 (the timing failed) or
// 100 + a cutlass::Status.
int cuco_ag_gemm_tune(const cuco_ag_gemm_args* a, int max_swizzle, cudaStream_t stream, int* config, int* swizzle);

// Enqueue the GEMM on `stream`. 0 on success; else the code of cuco_ag_gemm_check, 14 (no current device),
// 15 (the kernel asked for a workspace) or 100 + a cutlass::Status.
int cuco_ag_gemm_persistent(const cuco_ag_gemm_args* a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
