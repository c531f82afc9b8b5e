"""Device code shared by the MoE blocks whose every byte arrives by put (backend=gin and backend=nvshmem): slot
offsets, the row map built from the slot lists that arrived, and the gate-weighted combine of returned outputs."""

from __future__ import annotations

PUT_SHARED_KERNELS = r"""
__device__ inline int64_t slots_before(const int32_t* cnt, int64_t ge) {
  int64_t s = 0;
  for (int64_t f = 0; f < ge; ++f) s += cnt[f];
  return s;
}

// rowmap[r] = (source << 32 | slot) from the segment plan and the slot ids that arrived.
__global__ void put_rowmap_kernel(Geo g, PubLayout P, const char* pub, const int64_t* seg_off, int64_t* rowmap) {
  const int32_t* all = reinterpret_cast<const int32_t*>(pub + P.cnt_all);
  const int32_t* rowslot = reinterpret_cast<const int32_t*>(pub + P.rowslot);
  for (int64_t i = blockIdx.x; i < g.El * g.W; i += gridDim.x) {
    const int64_t e = i / g.W;
    const int p = (int)(i % g.W);
    const int32_t n = all[(int64_t)p * g.E + g.me * g.El + e];
    for (int32_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t r = seg_off[i] + k;
      rowmap[r] = ((int64_t)p << 32) | (int64_t)rowslot[r];
    }
  }
}

// Y[t] = sum_k gate * back[t*K + k] (the returned outputs, slot order).
__global__ void put_combine_kernel(Geo g, PubLayout P, const char* pub, const float* gate, __nv_bfloat16* y) {
  const __nv_bfloat16* back = reinterpret_cast<const __nv_bfloat16*>(pub + P.back);
  for (int64_t t = blockIdx.x; t < g.T; t += gridDim.x)
    for (int64_t c = threadIdx.x; c < g.H; c += blockDim.x) {
      float acc = 0.f;
      for (int64_t k = 0; k < g.K; ++k) acc += gate[t * g.K + k] * __bfloat162float(back[(t * g.K + k) * g.H + c]);
      y[t * g.H + c] = __float2bfloat16(acc);
    }
}
"""
