"""LSA block text of ring attention's gathered forms (attend=hybrid or gathered; the layout is
`cuco_attn::gather_*` in the compute library's header): one pull kernel moves the K/V rows this rank needs from
every source into one region, in the order its calls need them, with one landed flag per source; the main stream
attends in at most two calls (after the hybrid's own step), each once the sources it reads have landed (deferred,
stream_overlap), or, for the gathered form's fused placement, at once with its FMHA waiting for each KV tile's
source inside the kernel."""

from __future__ import annotations

import textwrap

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.attention_cp.lsa_block import ENQUEUE_HEAD, SIGNAL_PULL, barrier_calls

GATHER_KERNEL = r"""
// attend=@ATTEND@: pull the K/V rows this rank needs from every source into the region (cuco_attn::gather_runs:
// K rows at [0, S), V rows at [S, 2S)), sources in the order the calls need them; all CTAs share each source, and
// the last to finish one raises its landed flag.
__global__ void __launch_bounds__(kCommThreads)
    gather_kernel(ncclDevComm dc, ncclWindow_t win_kv, ncclWindow_t win_sym, const int4* own, int4* region, Flags f,
                  Geo g, int me, const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  @ENTRY@
  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
  const int64_t w = row16(g);
  for (int k = 0; k < g.W; ++k) {
    const int src = cuco_attn::gather_source(g, me, k, kForm);
    if (src < 0) continue;
    @WAIT_READY@
    const int4* from = src == me ? own : cuco::lsa::peer_ptr<const int4>(dc, win_kv, 0, me, src);
    cuco_attn::RowRun run[2];
    const int n = cuco_attn::gather_runs(g, me, src, kForm, run);
    for (int i = 0; i < n; ++i) {
      const size_t words = (size_t)(run[i].n * w);
      cuco::lsa::copy16<kUnroll>(Issuer(), region + run[i].to * w, from + run[i].from * w, words, group, ngroups);
      cuco::lsa::copy16<kUnroll>(Issuer(), region + (g.S + run[i].to) * w, from + (g.Sr + run[i].from) * w, words,
                                 group, ngroups);
    }
    if (cuco::lsa::cta_arrive_last(&f.local[f.lf.count(src, 0)], gridDim.x)) {
      cuco::lsa::store_release_sys(&f.local[f.lf.chunk(src, 0)], epoch);
      @ON_READ@
    }
  }
  @EXIT@
}

// One call over the region (cuco_attn::gather_attend): the hybrid's merge into the fp32 running output after its
// step 0; the gathered form's straight into O and the LSE.
static inline int attend_region(cuco_ctx* ctx, const Geo& g, const cuco_attn::GatherCall& c, cudaStream_t s,
                                const cuco_attn_arrival* arrival = nullptr, int sm_count = 0) {
  char* work = (char*)ctx->buffers[BUF_WORK].ptr;
  return cuco_attn::gather_attend(g, kForm, c, ctx->buffers[BUF_Q].ptr, ctx->buffers[BUF_RING].ptr,
                                  running_f32(ctx, g), (float*)ctx->buffers[BUF_LSE].ptr, work,
                                  (float*)(work + cuco_attn::work_partial_lse_at(g)), cuco_attn_merge_f32,
                                  ctx->buffers[BUF_O].ptr, s, arrival, sm_count);
}
"""

GATHER_LAUNCH = r"""
  gather_kernel<<<@CTAS@, kCommThreads, 0, @STREAM@>>>(ctx->devcomm, ctx->buffers[BUF_KV].window,
                                                  ctx->symmetric_workspace.window,
                                                  (const int4*)ctx->buffers[BUF_KV].ptr,
                                                  (int4*)ctx->buffers[BUF_RING].ptr, f, g, ctx->rank, st->epoch_at);
  if ((rc = launch_ok())) return rc;
"""

ENQUEUE = "\n@WHAT@" + ENQUEUE_HEAD + r"""@PRE@@MOVE@@POST@@OWN_STEP@@ARRIVAL@  cuco_attn::GatherCall c[2];
  const int n = cuco_attn::gather_calls(g, ctx->rank, kForm, c);
@LANDED@  for (int k = 0; k < n; ++k) {
@WAIT@    if ((rc = attend_region(ctx, g, c[k], main@ARRIVAL_ARGS@))) return rc;
  }
  return @FINISH@;
}
"""

#: The hybrid's first step: the ring's step 0, the own block in place (direct: it writes the running output).
OWN_STEP = ("  if ((rc = attend(ctx, g, ctx->rank, 0, g.Sr, ctx->buffers[BUF_KV].ptr, true, cuco_attn_merge_f32, "
            "main)))\n    return rc;  // the own block, while the rest lands\n")

#: stream_overlap's wait before a call: the landed flag of every source it reads and no earlier call waited for.
WAIT_SOURCES = r"""    for (int src = 0; src < g.W; ++src) {
      if (!((c[k].waits & ~landed) >> src & 1u)) continue;
      if ((rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, 0)]))) return rc;  // src's rows landed
    }
    landed |= c[k].waits;
"""

#: fused's calls wait inside the kernel: where each source's landed flag is, for the FMHA's producer warp.
ARRIVAL = r"""  // placement=fused: each KV tile's source flag, awaited by the FMHA's producer warp (cuco_attn_arrival)
  const cuco_attn_arrival arrival = {&f.local[f.lf.chunk(0, 0)], st->epoch_at,
                                     (int64_t)(f.lf.chunk(1, 0) - f.lf.chunk(0, 0)), g.causal ? g.half : g.Sr, 0,
                                     g.W, g.causal};
"""

#: fused's split of the SMs: the waiting calls' CTAs (the fewest that give them the waves the pulls' kCommCtas leave
#: room for; cuco_attn::fused_fmha_ctas), the pulls every SM besides.
FMHA_CTAS = ("  const int fmha_ctas = cuco_attn::fused_fmha_ctas(g, ctx->sm_count, kCommCtas);  "
             "// the pulls take the rest\n")

#: fused's wait before a call: none for a causal call (it waits inside the kernel); the stream waits for a full-
#: attention call (one call over every key: no waiting FMHA of that mask is built).
WAIT_UNMASKED = r"""    if (!c[k].suffix) {
      for (int src = 0; src < g.W; ++src)
        if ((c[k].waits >> src & 1u) && (rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, 0)]))) return rc;
    }
"""

WHAT = {
    ("deferred", "hybrid"): ("every row this rank needs moves first (all SMs), then the own block in place and at most "
                             "two merged calls over the region."),
    ("deferred", "gathered"): ("every row this rank needs, its own included, moves to its global position first (all "
                               "SMs), then one call per zigzag chunk against the key prefix (bottom-right causal)."),
    ("stream_overlap", "hybrid"): ("the side stream pulls the lower ranks' rows, then the higher ones' (kCommCtas "
                                   "SMs), while the main stream attends to its own block in place; each merged call "
                                   "starts once the sources it reads have landed."),
    ("stream_overlap", "gathered"): ("the side stream copies the own rows, then pulls the lower ranks', then the "
                                     "higher ones' (kCommCtas SMs); each zigzag chunk's call starts once the sources "
                                     "of its key prefix have landed."),
    ("fused", "gathered"): ("the side stream moves the rows as stream_overlap does, on every SM the waiting calls "
                            "do not need; each zigzag chunk's call is launched at once, persistent on the fewest SMs "
                            "that give it the waves that kCommCtas SMs for the pulls leave room for, and its producer "
                            "warp waits for each KV tile's source inside the kernel, so the attention of the keys "
                            "that have landed runs while the rest arrive (full attention: the stream waits, one "
                            "call)."),
}


def _comment(text: str) -> str:
    return "\n".join("// " + line for line in textwrap.wrap(text, 114))


def _kernel(point: Directives) -> str:
    attend = point.get("attend")
    if point.sync_scope == "signal":
        subs = dict(SIGNAL_PULL)
        subs["ON_READ"] = ("if (src != me)  // done reading src\n"
                           "        cuco::kit::publish_epoch(dc, win_sym, f.sf.done(me), me, src, epoch);")
    else:
        subs = {"ENTRY": f"// sync_scope={point.sync_scope}: barrier kernels run before and after this kernel",
                "WAIT_READY": "", "ON_READ": "", "EXIT": ""}
    return fill(GATHER_KERNEL, {**subs, "ATTEND": attend}, what="gather kernel")


def render_gather(point: Directives) -> tuple[str, str]:
    """(mover kernels, enqueue) of an LSA point whose attend directive is hybrid or gathered."""
    attend, deferred, fused = point.get("attend"), point.placement == "deferred", point.placement == "fused"
    stream = "main" if deferred else "side"
    barrier = barrier_calls(point, stream)
    ctas = "ctx->sm_count" if deferred else "ctx->sm_count - fmha_ctas" if fused else "kCommCtas"
    move = fill(GATHER_LAUNCH, {"CTAS": ctas, "STREAM": stream}, what="gather launch").lstrip("\n")
    if fused:
        move = FMHA_CTAS + move
    enqueue = fill(ENQUEUE, {
        "WHAT": _comment(f"placement={point.placement}, attend={attend}: {WHAT[(point.placement, attend)]}"),
        "PRE": barrier,
        "MOVE": move,
        "POST": barrier,
        "OWN_STEP": OWN_STEP if attend == "hybrid" else "",
        "WAIT": "" if deferred else WAIT_UNMASKED if fused else WAIT_SOURCES,
        "LANDED": "" if deferred or fused else "  uint32_t landed = 0;  // sources already waited for\n",
        "ARRIVAL": ARRIVAL if fused else "",
        "ARRIVAL_ARGS": ", &arrival, fmha_ctas" if fused else "",
        "FINISH": "finish(ctx, g, main)" if attend == "hybrid" else "0",
    }, what=f"{point.placement}/{attend} enqueue")
    return "constexpr int kForm = cuco_attn::k%sForm;  // attend=%s\n%s" % (
        attend.capitalize(), attend, _kernel(point)), enqueue
