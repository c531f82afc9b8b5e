// Causal attention of a chunk of queries against the whole prefix of keys before and including it (the kit's
// forward_suffix: bottom-right aligned mask), bf16 O: a translation unit of its own, compiled beside the others.
#include "attention_block.cuh"
#include "attention_cp.h"

namespace {

template <int D>
int suffix(cuco::kit::fmha::Problem& p, int64_t lse_ld, cudaStream_t s) {
  cuco_attn_impl::set_strides(p, D, lse_ld);
  return cuco::kit::fmha::forward_suffix<D, cuco::kit::fmha::RegisterOut>(p, s);
}

}  // namespace

extern "C" int cuco_attn_suffix_bf16(const void* q, const void* k, const void* v, void* o, float* lse,
                                     int64_t q_rows, int64_t k_rows, int heads_q, int heads_kv, int head_dim,
                                     int64_t lse_ld, cudaStream_t stream) {
  if (q_rows <= 0) return 0;
  cuco::kit::fmha::Problem p = cuco_attn_impl::problem(q, k, v, o, true, lse, q_rows, k_rows, heads_q, heads_kv);
  switch (head_dim) {
    case 32: return suffix<32>(p, lse_ld, stream);
    case 64: return suffix<64>(p, lse_ld, stream);
    case 128: return suffix<128>(p, lse_ld, stream);
    default: return 9;
  }
}
