"""LSA block text for the deferred, stream_overlap and split_put_wait placements."""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.gemm_allgather.block_parts import (
    CHUNK_ROWS,
    ISSUER_GROUPS,
    LOCAL_ROWS_GEMM,
    LSA_NEEDS,
    SPLIT_ENQUEUE_OPEN,
    block_needs,
    remote_chunk_gemms,
)
from cuco.workloads.gemm_allgather.common_block import (
    BLOCK_SESSION_CLOSE,
    BLOCK_SESSION_OPEN,
    barrier_launch,
)

# ---- deferred: gather everything (many CTAs), then one full GEMM ------------------------------------------

DEFERRED = r"""
constexpr int kGatherThreads = 512;

// Gather every rank's block into A_full (own rows too), all CTAs of the grid sharing each block.
__global__ void __launch_bounds__(kGatherThreads)
    gather_kernel(ncclDevComm dc, ncclWindow_t win_a, const int4* a_local, int4* a_full, Geo g) {
  @ENTRY@
""" + ISSUER_GROUPS + r"""  for (int s = 0; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    const int4* src = p == g.me ? a_local : cuco::lsa::peer_ptr<const int4>(dc, win_a, 0, g.me, p);
    cuco::lsa::copy16<kUnroll>(Issuer(), a_full + p * g.Mr * g.row16, src, g.Mr * g.row16, group, ngroups);
  }
  @EXIT@
}

""" + block_needs("flag_bytes = 4 * local_words(g)", "sym_bytes = 4096", "lsa_barriers = @BARRIERS@") + r"""
// placement=deferred: communication first (a wide gather kernel), then the whole GEMM.
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  cudaStream_t main = ctx->stream;
  int rc = 0;
@PRE@  gather_kernel<<<ctx->sm_count, kGatherThreads, 0, main>>>(
      ctx->devcomm, ctx->buffers[BUF_A_LOCAL].window, (const int4*)ctx->buffers[BUF_A_LOCAL].ptr,
      (int4*)ctx->buffers[BUF_A_FULL].ptr, g);
  if ((rc = launch_ok())) return rc;
@POST@  return gemm_rows(st, ctx, ctx->buffers[BUF_A_FULL].ptr, ctx->buffers[BUF_C].ptr, g.M, 0, main);
}
"""

# ---- stream_overlap: LSA pull on a few CTAs (side stream) under the local-rows GEMM ----------------------

#: The pull kernel and its needs, shared with placement=fused (fused_block.py).
PULL_KERNEL = r"""
// Pull every peer's block, chunk by chunk, into A_full with a few CTAs. All CTAs share each chunk so chunks
// land in order; the last CTA to finish a chunk publishes its epoch in chunk[p][c], which the GEMM waits on.
__global__ void __launch_bounds__(kCommThreads)
    pull_kernel(ncclDevComm dc, ncclWindow_t win_a, ncclWindow_t win_sym, int4* a_full, Flags f, Geo g,
                const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  @ENTRY@
""" + ISSUER_GROUPS + r"""  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    @WAIT_READY@
    const int4* src = cuco::lsa::peer_ptr<const int4>(dc, win_a, 0, g.me, p);
    for (int c = 0; c < g.nchunks; ++c) {
""" + CHUNK_ROWS + r"""      cuco::lsa::copy16<kUnroll>(Issuer(), a_full + (p * g.Mr + r0) * g.row16, src + r0 * g.row16,
                                 rows * g.row16, group, ngroups);
      const int fi = p * g.nchunks + c;
      if (cuco::lsa::cta_arrive_last(&f.count[fi], gridDim.x)) {
        cuco::lsa::store_release_sys(&f.chunk[fi], epoch);
        @ON_PEER_READ@
      }
    }
  }
  @EXIT@
}

""" + LSA_NEEDS + r"""
"""

STREAM_OVERLAP = PULL_KERNEL + r"""// placement=stream_overlap: the pull kernel runs on the side stream on comm_ctas() SMs; the main stream
// multiplies the local rows on the other SMs, then each remote chunk as soon as its flag says it landed.
""" + SPLIT_ENQUEUE_OPEN + r"""@PRE@  pull_kernel<<<ncomm, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_A_LOCAL].window,
                                               ctx->symmetric_workspace.window,
                                               (int4*)ctx->buffers[BUF_A_FULL].ptr, f, g, st->epoch_at);
  if ((rc = launch_ok())) return rc;
@POST@""" + LOCAL_ROWS_GEMM + remote_chunk_gemms(
    "      if ((rc = stream_wait_epoch(st, main, &f.chunk[p * g.nchunks + c]))) return rc;\n")

# ---- split_put_wait: push local rows into peers' A_full; a wait kernel before each remote GEMM ----------

SPLIT_PUT_WAIT = r"""
// Push this rank's block into every peer's (symmetric) A_full, chunk by chunk; the last CTA to finish a chunk
// raises arrive[me][c] on the receiving peer.
__global__ void __launch_bounds__(kCommThreads)
    put_kernel(ncclDevComm dc, ncclWindow_t win_full, ncclWindow_t win_sym, const int4* a_local, Flags f, Geo g,
               const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  @ENTRY@
""" + ISSUER_GROUPS + r"""  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    @WAIT_READY@
    for (int c = 0; c < g.nchunks; ++c) {
""" + CHUNK_ROWS + r"""      int4* dst = cuco::lsa::peer_ptr<int4>(dc, win_full, (size_t)(g.me * g.Mr + r0) * g.row16 * 16, g.me, p);
      cuco::lsa::copy16<kUnroll>(Issuer(), dst, a_local + r0 * g.row16, rows * g.row16, group, ngroups);
      if (cuco::lsa::cta_arrive_last(&f.count[p * g.nchunks + c], gridDim.x))
        cuco::lsa::store_release_sys(
            cuco::lsa::peer_ptr<uint32_t>(dc, win_sym, 4 * sym_arrive(g, g.me, c), g.me, p), epoch);
    }
  }
  @EXIT@
}

// The wait half: holds the GEMM stream until chunk c of rank p has arrived here.
__global__ void wait_kernel(const uint32_t* arrive, const uint32_t* epoch_at) {
  if (threadIdx.x == 0) cuco::lsa::wait_epoch(arrive, cuco::kit::load_epoch(epoch_at));
}

""" + LSA_NEEDS + r"""
// placement=split_put_wait: put kernel (side stream, few CTAs) | local-rows GEMM | per chunk: wait kernel,
// GEMM of the arrived rows.
""" + SPLIT_ENQUEUE_OPEN + r"""@PRE@  put_kernel<<<ncomm, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_A_FULL].window,
                                              ctx->symmetric_workspace.window,
                                              (const int4*)ctx->buffers[BUF_A_LOCAL].ptr, f, g, st->epoch_at);
  if ((rc = launch_ok())) return rc;
@POST@""" + LOCAL_ROWS_GEMM + remote_chunk_gemms(
    "      wait_kernel<<<1, 32, 0, main>>>(&f.sym[sym_arrive(g, p, c)], st->epoch_at);\n"
    "      if ((rc = launch_ok())) return rc;\n")


def pull_snippets(point: Directives) -> dict[str, str]:
    """Entry/exit sync of a kernel that READS peers' memory (pull): peers must be in this epoch before we read,
    and must not refill what we read until we are done."""
    scope = point.sync_scope
    if scope == "block":
        return {"ENTRY": BLOCK_SESSION_OPEN, "EXIT": BLOCK_SESSION_CLOSE, "WAIT_READY": "",
                "ON_PEER_READ": ""}
    if scope == "signal":
        return {
            "ENTRY": "publish_ready(dc, win_sym, g, epoch);  // sync_scope=signal: my input is ready",
            "WAIT_READY": "cuco::lsa::cta_wait_epoch(&f.sym[SYM_READY + p], epoch);  // p's input is ready",
            "ON_PEER_READ": "if (c == g.nchunks - 1) publish_done(dc, win_sym, g, p, epoch);  // done with p",
            "EXIT": ("if (blockIdx.x == 0 && threadIdx.x == 0)  // peers done reading mine before I finish\n"
                       "    for (int q = 0; q < g.W; ++q)\n"
                       "      if (q != g.me) cuco::lsa::wait_epoch(&f.sym[sym_done(g, q)], epoch);"),
        }
    return {"ENTRY": f"// sync_scope={scope}: barrier kernels run before and after this kernel",
            "EXIT": "", "WAIT_READY": "", "ON_PEER_READ": ""}


def _push_snippets(point: Directives) -> dict[str, str]:
    """Entry sync of a kernel that WRITES peers' memory (push): a peer must have finished its previous operation
    (which reads its A_full) before we overwrite it; arrival is flagged per chunk."""
    scope = point.sync_scope
    if scope == "block":
        return {"ENTRY": BLOCK_SESSION_OPEN, "EXIT": BLOCK_SESSION_CLOSE, "WAIT_READY": ""}
    if scope == "signal":
        return {
            "ENTRY": "publish_ready(dc, win_sym, g, epoch);  // sync_scope=signal: my A_full may be written",
            "WAIT_READY": "cuco::lsa::cta_wait_epoch(&f.sym[SYM_READY + p], epoch);  // p accepts writes",
            "EXIT": "",
        }
    return {"ENTRY": f"// sync_scope={scope}: a barrier kernel runs before this kernel",
            "EXIT": "", "WAIT_READY": ""}


def side_barriers(point: Directives) -> str:
    """LSA barriers of a side-stream comm kernel: one per comm CTA (block), none (signal), else one."""
    return {"block": "kMaxCommCtas", "signal": "0"}.get(point.sync_scope, "1")


def render_lsa(point: Directives) -> str:
    """The placement-specific part of an LSA block (deferred, stream_overlap or split_put_wait)."""
    if point.placement == "deferred":
        subs = {k: v for k, v in pull_snippets(point).items() if k in ("ENTRY", "EXIT")}
        barrier = barrier_launch(point, "main")
        subs.update({"BARRIERS": "ctx->sm_count" if point.sync_scope == "block" else "1",
                     "PRE": barrier, "POST": barrier})
        return fill(DEFERRED, subs, what="deferred block")
    if point.placement == "stream_overlap":
        template, subs, post = STREAM_OVERLAP, pull_snippets(point), barrier_launch(point, "side")
    elif point.placement == "split_put_wait":
        template, subs, post = SPLIT_PUT_WAIT, _push_snippets(point), ""
    else:
        raise ValueError(f"render_lsa does not handle placement={point.placement}")
    subs.update({"BARRIERS": side_barriers(point), "PRE": barrier_launch(point, "side"), "POST": post})
    return fill(template, subs, what=f"{point.placement} block")
