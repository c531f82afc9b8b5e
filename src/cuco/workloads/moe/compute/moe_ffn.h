// MoE expert FFN compute library: y = (silu(x W_gate^T) * (x W_up^T)) W_down^T per group of rows, on tensor
// cores (CUTLASS Hopper grouped GEMM, bf16 in/out, fp32 accumulate). Built once per configuration; candidates
// and the workload plugin call it through this C interface.
//
// A "group" is a run of consecutive rows that all go to one local expert. Row counts, row offsets and expert
// ids live in DEVICE memory and are read by the GPU when the call runs: a candidate can compute them on the
// device (e.g. from counts its peers published) without a host round trip.
//
// Layouts (row-major, bf16): x [rows x H], w1 [E_local x 2I x H] (gate rows 0..I-1, up rows I..2I-1),
// w2 [E_local x H x I], h1 [rows x 2I] and act [rows x I] scratch, y [rows x H]. Group g covers rows
// row_offset[g] .. row_offset[g] + rows[g] - 1 of x, h1, act and y.
#pragma once

#include <stdint.h>

#include <cuda_runtime.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cuco_moe_ffn cuco_moe_ffn;

// A plan for up to `max_groups` groups at hidden size `hidden` and expert size `inter`, whose GEMMs use at
// most `sm_count` SMs (0: all SMs of the current device). Allocates its device arrays; returns 0 on success.
int cuco_moe_ffn_create(cuco_moe_ffn** plan, int max_groups, int64_t hidden, int64_t inter, int sm_count);

// The same with each GEMM's SM count and the order in which the up GEMM deals its tiles. up_sm_count,
// down_sm_count: the SMs of the up and of the down GEMM (0: all); a plan whose up GEMM waits for arriving rows
// leaves SMs to whatever raises their flags, while its down GEMM, which starts only after every row has been read,
// can take them all. rows_in_order != 0: every tile of a band of 128 rows before the next band (raster along N), so
// rows are taken in order, what cuco_moe_ffn_run_arrival needs to start on the rows that have landed; 0: down the
// rows of one band of columns first (raster along M, CUTLASS's default for grouped GEMMs). cuco_moe_ffn_create is
// up_sm_count = down_sm_count = sm_count, rows_in_order 0.
int cuco_moe_ffn_create_ex(cuco_moe_ffn** plan, int max_groups, int64_t hidden, int64_t inter, int up_sm_count,
                           int down_sm_count, int rows_in_order);

// Enqueue the FFN of `groups` groups on `stream`. rows, row_offset and expert are device arrays of `groups`
// entries; a group of 0 rows does nothing. Never synchronises the host. Returns 0 on success.
int cuco_moe_ffn_run(cuco_moe_ffn* plan, int groups, const void* x, const void* w1, const void* w2, void* h1,
                     void* act, void* y, const int32_t* rows, const int64_t* row_offset, const int32_t* expert,
                     cudaStream_t stream);

// The same, with group g's output rows at y_group[g] instead of y + row_offset[g] * H wherever y_group (a device
// array of `groups` pointers, or NULL) holds a non-null entry: any address the GPU can store to with TMA, another
// GPU's memory mapped here included (its rows packed, H columns). y still receives the other groups.
int cuco_moe_ffn_run_to(cuco_moe_ffn* plan, int groups, const void* x, const void* w1, const void* w2, void* h1,
                        void* act, void* y, void* const* y_group, const int32_t* rows, const int64_t* row_offset,
                        const int32_t* expert, cudaStream_t stream);

// The same, for rows that are still arriving: the rows of x are cut into chunks of chunk_rows rows, and chunk c
// has landed when chunk_flags[c] - *epoch_at >= 0 (int32; epoch_at in device memory, read when the GEMM runs).
// Before loading a tile's rows of x the up GEMM waits until their chunks have landed (acquire, system scope), so
// the rows of one group that are there are computed while the rest arrive: use a plan made with rows_in_order.
// Whatever raises the flags must not need the SMs the up GEMM occupies (make the plan's up GEMM with fewer SMs
// than the device has where SM kernels raise them), or the wait never ends; and launch them before this call, or
// at least once before: CUDA loads a kernel at its first launch (lazy loading), and that load can wait for the
// running GEMM that waits for it. chunk_flags NULL: cuco_moe_ffn_run_to.
int cuco_moe_ffn_run_arrival(cuco_moe_ffn* plan, int groups, const void* x, const void* w1, const void* w2, void* h1,
                             void* act, void* y, void* const* y_group, const int32_t* rows, const int64_t* row_offset,
                             const int32_t* expert, const uint32_t* chunk_flags, const uint32_t* epoch_at,
                             int64_t chunk_rows, cudaStream_t stream);

// Human-readable description of the kernel configuration (for reports).
const char* cuco_moe_ffn_config(void);

int cuco_moe_ffn_destroy(cuco_moe_ffn* plan);

#ifdef __cplusplus
}  // extern "C"
#endif
