"""NVSHMEM block text of the MoE workload (backend=nvshmem): placement=split_put_wait, sync_scope=signal, bf16.

The GIN protocol (gin_block.py) over NVSHMEM: counts, token rows and slot lists reach their owners by
put-with-signal into the owner's `pub`, which lives in the NVSHMEM workspace (same address on every PE); expert
outputs return the same way. Signals are counters that only grow; each wait raises its expected value in a
device-local shadow first. Unlike GIN, this rank's own rows also arrive by a put (to itself, on the side stream)
under their own signal: the own-rows FFN waits for it, so the arrival path is exercised at W = 1 too.
"""

from __future__ import annotations

from cuco.workloads.moe.put_protocol import (
    ENQUEUE_AND_CLOSE,
    OWN_COUNTS,
    PEER_OUT_COUNT,
    PEER_ROWS_COUNT,
    PLAN,
    PUT_JOBS,
    PUT_LIST_JOB,
    RETURN_ROWS,
)

PUT_OF = {"thread": "nvshmem_putmem_signal", "warp": "nvshmemx_putmem_signal_warp",
          "cta": "nvshmemx_putmem_signal_block"}

NV_KERNELS = r"""
// Signals (uint64 counters after pub in the NVSHMEM workspace): CLEAR (every rank started this launch, so its
// previous one is over), COUNTS, ROWS (peers' token rows and slot lists), OWN (this rank's own rows and lists),
// OUT (expert outputs of my slots came back). shadow[] (device-local) holds what each wait expects.
enum { NS_CLEAR = 0, NS_COUNTS = 1, NS_ROWS = 2, NS_OWN = 3, NS_OUT = 4, NS_SIGNALS = 5 };
using Coop = @COOP@;  // issuer=@ISSUER@
@SHARED@

__host__ __device__ inline uint64_t* nv_signals(char* pub, const PubLayout& P) {
  return reinterpret_cast<uint64_t*>(pub + ((P.bytes + 255) / 256) * 256);
}

__device__ inline void wait_for(uint64_t* sig, uint64_t* shadow, int which, uint64_t n) {
  shadow[which] += n;
  nvshmem_signal_wait_until(&sig[which], NVSHMEM_CMP_GE, shadow[which]);
}

// Handshake, then this rank's counts into every rank's cnt_all[me] (its own copy locally).
__global__ void nv_counts_kernel(Geo g, PubLayout P, char* pub, uint64_t* shadow) {
  uint64_t* sig = nv_signals(pub, P);
  if (threadIdx.x == 0) {
    for (int q = 0; q < g.W; ++q)
      if (q != g.me) nvshmemx_signal_op(&sig[NS_CLEAR], 1, NVSHMEM_SIGNAL_ADD, q);
    wait_for(sig, shadow, NS_CLEAR, (uint64_t)(g.W - 1));
    for (int q = 0; q < g.W; ++q)
      if (q != g.me)
        nvshmem_putmem_signal(pub + P.cnt_all + 4 * g.me * g.E, pub + P.cnt, (size_t)(4 * g.E), &sig[NS_COUNTS], 1,
                              NVSHMEM_SIGNAL_ADD, q);
    wait_for(sig, shadow, NS_COUNTS, (uint64_t)(g.W - 1));
  }
  __syncthreads();
""" + OWN_COUNTS + r"""
// Every slot's row to its expert's owner, and for each expert the list of my slot ids (to myself too: OWN).
__global__ void nv_put_rows_kernel(Geo g, PubLayout P, char* pub, const char* x, const int32_t* expert,
                                   const int32_t* slot_rank, const int64_t* cbase) {
  uint64_t* sig = nv_signals(pub, P);
""" + PUT_JOBS + r"""      @PUT@(pub + P.recv + (cbase[ge] + slot_rank[job]) * g.H * 2, x + (job / g.K) * g.H * 2, (size_t)(g.H * 2),
            &sig[q == g.me ? NS_OWN : NS_ROWS], 1, NVSHMEM_SIGNAL_ADD, q);
""" + PUT_LIST_JOB + r"""      if (cnt[ge] == 0) continue;
      @PUT@(pub + P.rowslot + 4 * cbase[ge], pub + P.order + 4 * slots_before(cnt, ge), (size_t)(4 * cnt[ge]),
            &sig[q == g.me ? NS_OWN : NS_ROWS], 1, NVSHMEM_SIGNAL_ADD, q);
    }
  }
}

// Wait for my own rows and lists (one signal per row and per non-empty list of my experts).
__global__ void nv_wait_own_kernel(Geo g, PubLayout P, char* pub, uint64_t* shadow) {
  if (threadIdx.x != 0) return;
  const int32_t* cnt = reinterpret_cast<const int32_t*>(pub + P.cnt);
  uint64_t n = 0;
  for (int64_t e = 0; e < g.El; ++e) {
    const int32_t c = cnt[g.me * g.El + e];
    n += (uint64_t)c + (c > 0 ? 1 : 0);
  }
  wait_for(nv_signals(pub, P), shadow, NS_OWN, n);
}

// Wait for every peer's rows and slot lists.
__global__ void nv_wait_rows_kernel(Geo g, PubLayout P, char* pub, uint64_t* shadow) {
""" + PEER_ROWS_COUNT + r"""  wait_for(nv_signals(pub, P), shadow, NS_ROWS, n);
}

// Expert outputs back to their sources (slot order in the source's back rows); own rows by local copy.
__global__ void nv_return_kernel(Geo g, PubLayout P, char* pub, const int64_t* rowmap, const int64_t* total) {
  uint64_t* sig = nv_signals(pub, P);
""" + RETURN_ROWS + r"""      @PUT@(pub + P.back + j * g.H * 2, pub + P.yrows + r * g.H * 2, (size_t)(g.H * 2), &sig[NS_OUT], 1,
            NVSHMEM_SIGNAL_ADD, p);
    }
  }
}

// Wait for the outputs of my slots that peers' experts computed.
__global__ void nv_wait_out_kernel(Geo g, PubLayout P, char* pub, uint64_t* shadow) {
""" + PEER_OUT_COUNT + r"""  wait_for(nv_signals(pub, P), shadow, NS_OUT, n);
}

"""

NV_ENQUEUE = r"""
  // backend=nvshmem, placement=split_put_wait, sync_scope=signal: puts on the side stream (own rows included)
  char* pub = st->pub.p[g.me];  // the NVSHMEM workspace (block_setup)
  uint64_t* shadow = reinterpret_cast<uint64_t*>(ctx->workspace);
  const int32_t* expert = (const int32_t*)ctx->buffers[BUF_EXPERT].ptr;
  if ((rc = route(ctx, st, false, cs))) return rc;
  nv_counts_kernel<<<1, 256, 0, cs>>>(g, st->P, pub, shadow);
""" + PLAN + r"""  nv_put_rows_kernel<<<kCommCtas, 256, 0, ss>>>(g, st->P, pub, (const char*)ctx->buffers[BUF_X].ptr, expert,
                                                W<int32_t>(st, st->L.slot_rank), W<int64_t>(st, st->L.cbase));
  if ((rc = launch_ok())) return rc;
  nv_wait_own_kernel<<<1, 32, 0, cs>>>(g, st->P, pub, shadow);
  if ((rc = ffn(ctx, st, st->ffn_part, GROUPS_OWN, cs))) return rc;
  nv_wait_rows_kernel<<<1, 32, 0, cs>>>(g, st->P, pub, shadow);
  if ((rc = ffn(ctx, st, st->ffn_all, GROUPS_PEERS, cs))) return rc;
  put_rowmap_kernel<<<1024, 256, 0, cs>>>(g, st->P, pub, W<int64_t>(st, st->L.seg_off), W<int64_t>(st, st->L.rowmap));
  nv_return_kernel<<<2 * ctx->sm_count, 256, 0, cs>>>(g, st->P, pub, W<int64_t>(st, st->L.rowmap),
                                                      W<int64_t>(st, st->L.total));
  nv_wait_out_kernel<<<1, 32, 0, cs>>>(g, st->P, pub, shadow);
  put_combine_kernel<<<4 * ctx->sm_count, 256, 0, cs>>>(g, st->P, pub, (const float*)ctx->buffers[BUF_GATE].ptr,
                                                       (__nv_bfloat16*)ctx->buffers[BUF_Y].ptr);
  return launch_ok();"""

NV_BLOCK = r"""
#include "cuco/kit/nvshmem.cuh"  // backend=nvshmem
namespace cuco_moe {

// ---- design point: @LABEL@ ----
constexpr int kGroup = @GROUP@;         // issuer=@ISSUER@
constexpr int kCommCtas = @COMM_CTAS@;  // CTAs of the put kernel beside the FFN
@KERNELS@
static Needs block_needs(const cuco_ctx* ctx) {
  Geo g = geo_make(ctx->dims, ctx->world, ctx->rank);
  PubLayout P = pub_layout(g);
  Needs n;
  n.flag_bytes = 256;  // the signal shadows
  n.comm_ctas = kCommCtas;
  n.nvshmem_bytes = (size_t)((P.bytes + 255) / 256 * 256) + 8 * NS_SIGNALS;
  return n;
}

// pub lives in the NVSHMEM workspace (peers put into it); this module attaches its NVSHMEM device state.
static int block_setup(cuco_ctx* ctx, State* st) {
  st->pub.p[ctx->rank] = (char*)ctx->nvshmem_workspace;
  return cuco::kit::nvshmem_attach(ctx);
}

""" + ENQUEUE_AND_CLOSE
