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

#: End of the counts kernel: this rank's own counts into its cnt_all[me].
OWN_COUNTS = r"""  const int32_t* cnt = reinterpret_cast<const int32_t*>(pub + P.cnt);
  int32_t* all = reinterpret_cast<int32_t*>(pub + P.cnt_all);
  for (int64_t i = threadIdx.x; i < g.E; i += blockDim.x) all[g.me * g.E + i] = cnt[i];
}
"""

#: The put kernel's job loop: a job per slot (its row, to the expert's owner q), then one per expert (its list).
PUT_JOBS = r"""  const int32_t* cnt = reinterpret_cast<const int32_t*>(pub + P.cnt);
  const size_t group = cuco::lsa::issuer_group<Coop>(blockIdx.x), groups = cuco::lsa::issuer_groups<Coop>(gridDim.x);
  for (int64_t job = group; job < g.slots + g.E; job += groups) {
    if (job < g.slots) {
      const int64_t ge = expert[job];
      const int q = (int)(ge / g.El);
"""

#: The list jobs' opening (after a slot job's put).
PUT_LIST_JOB = r"""    } else {
      const int64_t ge = job - g.slots;
      const int q = (int)(ge / g.El);
"""

#: Thread 0 counts n, the row puts and non-empty lists that peers send this rank.
PEER_ROWS_COUNT = r"""  if (threadIdx.x != 0) return;
  const int32_t* all = reinterpret_cast<const int32_t*>(pub + P.cnt_all);
  uint64_t n = 0;
  for (int p = 0; p < g.W; ++p)
    for (int64_t e = 0; p != g.me && e < g.El; ++e) {
      const int32_t c = all[(int64_t)p * g.E + g.me * g.El + e];
      n += (uint64_t)c + (c > 0 ? 1 : 0);
    }
"""

#: The return kernel's loop over expert-output rows: own rows copied locally, then (else) a peer's row put to p.
RETURN_ROWS = r"""  const size_t group = cuco::lsa::issuer_group<Coop>(blockIdx.x), groups = cuco::lsa::issuer_groups<Coop>(gridDim.x);
  const int64_t n = *total;
  for (int64_t r = group; r < n; r += groups) {
    const int64_t m = rowmap[r];
    const int p = (int)(m >> 32);
    const int64_t j = m & 0xffffffffll;
    if (p == g.me) {
      const int4* src = reinterpret_cast<const int4*>(pub + P.yrows + r * g.H * 2);
      int4* dst = reinterpret_cast<int4*>(pub + P.back + j * g.H * 2);
      Coop coop;
      for (int64_t w = coop.thread_rank(); w < g.H / 8; w += coop.size()) dst[w] = src[w];
    } else {
"""

#: Thread 0 counts n, the outputs of this rank's slots that peers' experts send back.
PEER_OUT_COUNT = r"""  if (threadIdx.x != 0) return;
  const int32_t* cnt = reinterpret_cast<const int32_t*>(pub + P.cnt);
  uint64_t n = 0;
  for (int64_t ge = 0; ge < g.E; ++ge)
    if (ge / g.El != g.me) n += (uint64_t)cnt[ge];
"""

#: Enqueue: the segment plan from the counts, then the side stream waits for it.
PLAN = r"""  plan_kernel<<<1, 1024, 0, cs>>>(g, (const int32_t*)(pub + st->P.cnt_all), W<int64_t>(st, st->L.seg_off),
                                  W<int32_t>(st, st->L.grp_rows), W<int64_t>(st, st->L.grp_off),
                                  W<int32_t>(st, st->L.grp_exp), W<int64_t>(st, st->L.cbase),
                                  W<int64_t>(st, st->L.ostart), W<int64_t>(st, st->L.total));
  if ((rc = launch_ok())) return rc;
  if (cudaEventRecord(st->ev[0], cs) != cudaSuccess || cudaStreamWaitEvent(ss, st->ev[0], 0) != cudaSuccess) return 70;
"""

#: The put blocks' enqueue around their @ENQUEUE@ body, and the namespace's end.
ENQUEUE_AND_CLOSE = r"""static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo& g = st->g;
  cudaStream_t cs = ctx->stream, ss = ctx->side_stream;
  int rc = 0;
@ENQUEUE@
}

}  // namespace cuco_moe
"""
