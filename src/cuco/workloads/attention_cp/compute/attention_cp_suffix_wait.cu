// The gathered form's causal call that waits for its keys inside the kernel (the kit's forward_suffix_arrival:
// bottom-right aligned mask, each KV tile's source flag awaited by the producer warp, persistent on fewer SMs than
// the device has): a translation unit of its own, compiled beside the others.
#include "attention_block.cuh"
#include "attention_cp.h"
#include "cuco/kit/compute/fmha_arrival.cuh"

namespace {

template <int D>
int suffix_wait(cuco::kit::fmha::Problem& p, int64_t lse_ld, const cuco::kit::fmha::KvArrival& a, int sm_count,
                cudaStream_t s) {
  cuco_attn_impl::set_strides(p, D, lse_ld);
  return cuco::kit::fmha::forward_suffix_arrival<D>(p, a, sm_count, s);
}

}  // namespace

extern "C" int cuco_attn_suffix_wait_bf16(const void* q, const void* k, const void* v, void* o, float* lse,
                                          int64_t q_rows, int64_t k_rows, int heads_q, int heads_kv, int head_dim,
                                          int64_t lse_ld, const cuco_attn_arrival* arrival, int sm_count,
                                          cudaStream_t stream) {
  if (q_rows <= 0) return 0;
  cuco::kit::fmha::Problem p = cuco_attn_impl::problem(q, k, v, o, true, lse, q_rows, k_rows, heads_q, heads_kv);
  cuco::kit::fmha::KvArrival a;
  if (arrival != nullptr)
    a = cuco::kit::fmha::KvArrival{arrival->flag0, arrival->epoch_at, arrival->src_stride, arrival->chunk_rows,
                                   arrival->row0, arrival->world, arrival->zigzag};
  switch (head_dim) {
    case 32: return suffix_wait<32>(p, lse_ld, a, sm_count, stream);
    case 64: return suffix_wait<64>(p, lse_ld, a, sm_count, stream);
    case 128: return suffix_wait<128>(p, lse_ld, a, sm_count, stream);
    default: return 9;
  }
}
