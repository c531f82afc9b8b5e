// The ring's single step at W = 1 on the FMHA's persistent scheduler (attention_block.cuh): a translation unit of
// its own, compiled beside attention_cp.cu.
#include "attention_block.cuh"

namespace cuco_attn_impl {

int block_alone(cuco::kit::fmha::Problem& p, int head_dim, int64_t lse_ld, int causal, cudaStream_t s) {
  using cuco::kit::fmha::Persistent;
  switch (head_dim) {
    case 32: return block<32, Persistent>(p, lse_ld, causal, s);
    case 64: return block<64, Persistent>(p, lse_ld, causal, s);
    default: return 9;
  }
}

}  // namespace cuco_attn_impl
