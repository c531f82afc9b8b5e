// One FMHA call of the ring-attention compute library, shared by its two translation units: attention_cp.cu (the
// ring's steps, cooperative) and attention_cp_alone.cu (the single step at W = 1 on the persistent scheduler).
// Two units compile side by side: the persistent instantiations alone take about as long as the rest.
#pragma once

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "cuco/kit/compute/fmha_hopper.cuh"

namespace cuco_attn_impl {

// One batch of dense token-major rows: q_rows queries against k_rows keys, O bf16 or fp32 (o_bf16).
inline cuco::kit::fmha::Problem problem(const void* q, const void* k, const void* v, void* o, bool o_bf16, float* lse,
                                        int64_t q_rows, int64_t k_rows, int heads_q, int heads_kv) {
  cuco::kit::fmha::Problem p{};
  p.q = q, p.k = k, p.v = v, p.o = o, p.lse = lse, p.o_bf16 = o_bf16;
  p.batch = 1, p.heads_q = heads_q, p.heads_kv = heads_kv;
  p.seq_q = (int)q_rows, p.seq_k = (int)k_rows;
  return p;
}

// Dense token-major strides at head dim d, the LSE at lse_ld per head (the library's layout, attention_cp.h).
inline void set_strides(cuco::kit::fmha::Problem& p, int d, int64_t lse_ld) {
  cuco::kit::fmha::set_dense_strides(p, d);
  p.lse_head_stride = lse_ld;
  p.lse_batch_stride = lse_ld * p.heads_q;
}

// O's type per call (RegisterOut: p.o_bf16), the library's strides.
template <int D, class Schedule>
int block(cuco::kit::fmha::Problem& p, int64_t lse_ld, int causal, cudaStream_t s) {
  using cuco::kit::fmha::RegisterOut;
  set_strides(p, D, lse_ld);
  return causal ? cuco::kit::fmha::forward<D, true, RegisterOut, Schedule>(p, s)
                : cuco::kit::fmha::forward<D, false, RegisterOut, Schedule>(p, s);
}

// The head dims at which a call with the GPU to itself takes the persistent scheduler: 3-9 % faster at 32 and 64
// (results/w1/fmha_variants.md, H200); at 128 it was no faster (0.928 vs 0.915 ms causal).
constexpr bool persistent_alone(int head_dim) { return head_dim == 32 || head_dim == 64; }

// block<D, Persistent> at D = 32 or 64 (attention_cp_alone.cu); 9 at another head dim.
__attribute__((visibility("hidden"))) int block_alone(cuco::kit::fmha::Problem& p, int head_dim, int64_t lse_ld,
                                                      int causal, cudaStream_t s);

}  // namespace cuco_attn_impl
