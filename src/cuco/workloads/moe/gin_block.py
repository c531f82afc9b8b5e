"""GIN block text (NCCL GIN device API: put with signal) of the MoE workload: placement=split_put_wait,
sync_scope=signal, bf16 dispatch.

Every byte reaches a peer by an RDMA put: counts to every rank, token rows (and the slot ids of each expert's
rows) to the experts' owners, expert outputs back to their sources; no LSA load or store touches a peer. Signals
count puts and are never reset: each launch raises the expected value through the signal's shadow
(increaseSignalShadow + waitSignalMeetShadow). Compile-verified here; it runs only where GIN is available (an
RDMA NIC; the harness reports 'unsupported' otherwise).
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

COOP_OF = {"thread": "ncclCoopThread", "warp": "ncclCoopWarp", "cta": "ncclCoopCta"}

GIN_KERNELS = r"""
// GIN signals: CLEAR (every rank started this launch, so its previous one is over), COUNTS, ROWS (token rows
// and slot lists landed here), OUT (expert outputs of my slots came back).
enum { GS_CLEAR = 0, GS_COUNTS = 1, GS_ROWS = 2, GS_OUT = 3, GS_SIGNALS = 4 };
using Coop = @COOP@;  // issuer=@ISSUER@
@SHARED@

// Handshake, then this rank's counts into every rank's cnt_all[me] (its own copy locally).
__global__ void gin_counts_kernel(ncclDevComm dc, ncclWindow_t win_pub, Geo g, PubLayout P, char* pub) {
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
  if (threadIdx.x == 0) {
    for (int q = 0; q < g.W; ++q)
      if (q != g.me) gin.signal(world, q, ncclGin_SignalInc{(ncclGinSignal_t)GS_CLEAR});
    gin.increaseSignalShadow(GS_CLEAR, g.W - 1);
    gin.waitSignalMeetShadow(ncclCoopThread(), GS_CLEAR);
    for (int q = 0; q < g.W; ++q)
      if (q != g.me)
        gin.put(world, q, win_pub, (size_t)(P.cnt_all + 4 * g.me * g.E), win_pub, (size_t)P.cnt, (size_t)(4 * g.E),
                ncclGin_SignalInc{(ncclGinSignal_t)GS_COUNTS}, ncclGin_None{}, ncclCoopThread());
    gin.increaseSignalShadow(GS_COUNTS, g.W - 1);
    gin.waitSignalMeetShadow(ncclCoopThread(), GS_COUNTS);
    gin.flush(ncclCoopThread());
  }
""" + OWN_COUNTS + r"""
// Put: every slot of a peer's expert as one row put, and for each such expert the list of my slot ids.
__global__ void gin_put_rows_kernel(ncclDevComm dc, ncclWindow_t win_x, ncclWindow_t win_pub, Geo g, PubLayout P,
                                    const char* pub, const int32_t* expert, const int32_t* slot_rank,
                                    const int64_t* cbase) {
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
""" + PUT_JOBS + r"""      if (q == g.me) continue;
      gin.put(world, q, win_pub, (size_t)(P.recv + (cbase[ge] + slot_rank[job]) * g.H * 2), win_x,
              (size_t)((job / g.K) * g.H * 2), (size_t)(g.H * 2), ncclGin_SignalInc{(ncclGinSignal_t)GS_ROWS},
              ncclGin_None{}, Coop());
""" + PUT_LIST_JOB + r"""      if (q == g.me || cnt[ge] == 0) continue;
      gin.put(world, q, win_pub, (size_t)(P.rowslot + 4 * cbase[ge]), win_pub,
              (size_t)(P.order + 4 * slots_before(cnt, ge)), (size_t)(4 * cnt[ge]),
              ncclGin_SignalInc{(ncclGinSignal_t)GS_ROWS}, ncclGin_None{}, Coop());
    }
  }
  gin.flush(Coop());
}

// This rank's own slots: rows and slot ids into its own receive rows (local copies).
template <int kRows>
__global__ void gin_own_rows_kernel(Geo g, PubLayout P, char* pub, const __nv_bfloat16* x, const int32_t* expert,
                                    const int32_t* slot_rank, const int64_t* cbase) {
  for (int64_t j = Rows<kRows>::group(); j < g.slots; j += Rows<kRows>::groups()) {
    const int64_t ge = expert[j];
    if (ge / g.El != g.me) continue;
    const int64_t r = cbase[ge] + slot_rank[j];
    copy_row<kRows>(reinterpret_cast<__nv_bfloat16*>(pub + P.recv) + r * g.H, x + (j / g.K) * g.H, g.H);
    if (Rows<kRows>::lane() == 0) reinterpret_cast<int32_t*>(pub + P.rowslot)[r] = (int32_t)j;
  }
}

// Wait for every peer's rows and slot lists: one signal per row put and per non-empty list.
__global__ void gin_wait_rows_kernel(ncclDevComm dc, Geo g, PubLayout P, const char* pub) {
""" + PEER_ROWS_COUNT + r"""  ncclGin gin(dc, 0);
  gin.increaseSignalShadow(GS_ROWS, n);
  gin.waitSignalMeetShadow(ncclCoopThread(), GS_ROWS);
}

// Expert outputs back to their sources (slot order in the source's back rows); own rows by local copy.
__global__ void gin_return_kernel(ncclDevComm dc, ncclWindow_t win_pub, Geo g, PubLayout P, char* pub,
                                  const int64_t* rowmap, const int64_t* total) {
  ncclGin gin(dc, 0);
  const ncclTeam world = ncclTeamWorld(dc);
""" + RETURN_ROWS + r"""      gin.put(world, p, win_pub, (size_t)(P.back + j * g.H * 2), win_pub, (size_t)(P.yrows + r * g.H * 2),
              (size_t)(g.H * 2), ncclGin_SignalInc{(ncclGinSignal_t)GS_OUT}, ncclGin_None{}, Coop());
    }
  }
  gin.flush(Coop());
}

// Wait for the outputs of my slots that peers' experts computed, then Y[t] = sum_k gate * back[t*K + k].
__global__ void gin_wait_out_kernel(ncclDevComm dc, Geo g, PubLayout P, const char* pub) {
""" + PEER_OUT_COUNT + r"""  ncclGin gin(dc, 0);
  gin.increaseSignalShadow(GS_OUT, n);
  gin.waitSignalMeetShadow(ncclCoopThread(), GS_OUT);
}

"""

GIN_ENQUEUE = r"""
  // backend=gin, placement=split_put_wait, sync_scope=signal: puts on the side stream, own rows computed meanwhile
  char* pub = st->pub.p[g.me];
  ncclWindow_t win_pub = ctx->buffers[BUF_PUB].window, win_x = ctx->buffers[BUF_X].window;
  const int32_t* expert = (const int32_t*)ctx->buffers[BUF_EXPERT].ptr;
  if ((rc = route(ctx, st, false, cs))) return rc;
  gin_counts_kernel<<<1, 256, 0, cs>>>(ctx->devcomm, win_pub, g, st->P, pub);
""" + PLAN + r"""  gin_put_rows_kernel<<<kCommCtas, 256, 0, ss>>>(ctx->devcomm, win_x, win_pub, g, st->P, pub, expert,
                                                 W<int32_t>(st, st->L.slot_rank), W<int64_t>(st, st->L.cbase));
  gin_own_rows_kernel<kGroup><<<2 * ctx->sm_count, 256, 0, cs>>>(g, st->P, pub,
      (const __nv_bfloat16*)ctx->buffers[BUF_X].ptr, expert, W<int32_t>(st, st->L.slot_rank),
      W<int64_t>(st, st->L.cbase));
  if ((rc = launch_ok())) return rc;
  if ((rc = ffn(ctx, st, st->ffn_part, GROUPS_OWN, cs))) return rc;
  gin_wait_rows_kernel<<<1, 32, 0, cs>>>(ctx->devcomm, g, st->P, pub);
  if ((rc = ffn(ctx, st, st->ffn_all, GROUPS_PEERS, cs))) return rc;
  put_rowmap_kernel<<<1024, 256, 0, cs>>>(g, st->P, pub, W<int64_t>(st, st->L.seg_off), W<int64_t>(st, st->L.rowmap));
  gin_return_kernel<<<2 * ctx->sm_count, 256, 0, cs>>>(ctx->devcomm, win_pub, g, st->P, pub,
                                                       W<int64_t>(st, st->L.rowmap), W<int64_t>(st, st->L.total));
  gin_wait_out_kernel<<<1, 32, 0, cs>>>(ctx->devcomm, g, st->P, pub);
  put_combine_kernel<<<4 * ctx->sm_count, 256, 0, cs>>>(g, st->P, pub, (const float*)ctx->buffers[BUF_GATE].ptr,
                                                        (__nv_bfloat16*)ctx->buffers[BUF_Y].ptr);
  return launch_ok();"""

GIN_BLOCK = r"""
namespace cuco_moe {

// ---- design point: @LABEL@ ----
constexpr int kGroup = @GROUP@;         // issuer=@ISSUER@: threads moving one local row (0: the whole CTA)
constexpr int kCommCtas = @COMM_CTAS@;  // CTAs of the put kernel beside the FFN
@KERNELS@
static Needs block_needs(const cuco_ctx* ctx) {
  (void)ctx;
  Needs n;
  n.flag_bytes = 256;
  n.comm_ctas = kCommCtas;
  n.gin_signals = GS_SIGNALS;
  n.gin_required = 1;
  return n;
}

static int block_setup(cuco_ctx*, State*) { return 0; }  // nothing to prepare beyond the frozen setup

""" + ENQUEUE_AND_CLOSE
