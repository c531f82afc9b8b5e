"""LSA block text of the ring-attention workload: the point's constants, the SM pull/push kernels (issuers
thread/warp/cta) or copy-engine transfers (ce_block.py), the sync snippets per scope, and the enqueue code per
placement."""

from __future__ import annotations

from cuco.design_space import Directives, format_bytes
from cuco.kit.template import fill
from cuco.workloads.attention_cp.ce_block import CE_ARRIVED, CE_PULL, CE_PUSH, CE_PUSH_SLICES

# copy_engine has no device issuer; its CTA type only names the (unused) kernel template's issuer.
ISSUER_TYPES = {"thread": "ncclCoopThread", "warp": "ncclCoopWarp", "cta": "ncclCoopCta", "copy_engine": "ncclCoopCta"}

PROLOGUE = r"""
namespace cuco_cp {

// ---- design point: @LABEL@ ----
using Issuer = @ISSUER@;  // issuer=@ISSUER_NAME@: the thread group that moves one step of a transfer
constexpr int64_t kChunkBytes = @CHUNK@;  // chunk_bytes=@CHUNK_NAME@ (0: a source's whole block at once)
constexpr int kCommCtas = 16;             // CTAs of a pull/push kernel beside the attention
constexpr int kCommThreads = 512;         // threads of a pull/push CTA
constexpr int kUnroll = 4;                // 16-byte loads in flight per thread

// Slices of a source block: K+V rows of 4 * HKV * D bytes, a multiple of the FMHA's 128-row KV tile.
static cuco::kit::Chunking chunking(const Geo& g) {
  return cuco::kit::make_chunking(g.Sr, kChunkBytes, 4 * kv_row_elems(g), 128);
}

static Needs block_needs(const cuco_ctx* ctx) {
  const Geo g = geo_of(ctx);
  Needs n = flag_needs(g, chunking(g).nchunks);
  n.lsa_barriers = @BARRIERS@;
  return n;
}

// Rows [r0, r1) of a KV block (its K rows and its V rows) from one block base to another, over issuer groups.
__device__ inline void copy_rows(int4* to, const int4* from, const Geo& g, int64_t r0, int64_t r1, size_t group,
                                 size_t ngroups) {
  const int64_t w = row16(g);
  cuco::lsa::copy16<kUnroll>(Issuer(), to + r0 * w, from + r0 * w, (r1 - r0) * w, group, ngroups);
  cuco::lsa::copy16<kUnroll>(Issuer(), to + (g.Sr + r0) * w, from + (g.Sr + r0) * w, (r1 - r0) * w, group, ngroups);
}
@SYNC_KERNELS@
@MOVER@
@ENQUEUE@
}  // namespace cuco_cp
"""

BARRIER_KERNEL = r"""
// sync_scope=@SCOPE@: one LSA barrier over the @TEAM@ team as its own one-CTA kernel; stream order makes it cover
// every kernel and copy before and after it on that stream.
__global__ void barrier_kernel(ncclDevComm dc) { cuco::kit::cta_lsa_barrier(dc, @WORLD@); }
static int barrier(cuco_ctx* ctx, cudaStream_t s) {
  barrier_kernel<<<1, 128, 0, s>>>(ctx->devcomm);
  return launch_ok();
}
"""

WAIT_KERNEL = r"""
// sync_scope=signal: holds a stream until a peer raised this rank's flag to the epoch.
__global__ void wait_kernel(const uint32_t* flag, const uint32_t* epoch_at) {
  if (threadIdx.x == 0) cuco::lsa::wait_epoch(flag, cuco::kit::load_epoch(epoch_at));
}
"""

PULL_KERNEL = r"""
// Pull the KV rows this rank needs from the sources of steps first..W-1 into its ring slots, slice by slice in
// ring-step order; all CTAs share each slice, and the last to finish one raises its landed flag.
__global__ void __launch_bounds__(kCommThreads)
    pull_kernel(ncclDevComm dc, ncclWindow_t win_kv, ncclWindow_t win_sym, const int4* own, int4* ring, Flags f,
                Geo g, int me, int first, int64_t chunk_rows, const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  @ENTRY@
  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
  for (int s = first; s < g.W; ++s) {
    const int src = source_at(me, s, g.W);
    @WAIT_READY@
    const int4* from = src == me ? own : cuco::lsa::peer_ptr<const int4>(dc, win_kv, 0, me, src);
    const int64_t need = kv_rows_needed(g, me, src);
    int c = 0;
    for (int64_t r0 = 0; r0 < need; r0 += chunk_rows, ++c) {
      const int64_t r1 = r0 + chunk_rows < need ? r0 + chunk_rows : need;
      copy_rows(ring + src * block16(g), from, g, r0, r1, group, ngroups);
      if (cuco::lsa::cta_arrive_last(&f.local[f.lf.count(src, c)], gridDim.x)) {
        cuco::lsa::store_release_sys(&f.local[f.lf.chunk(src, c)], epoch);
        @ON_READ@
      }
    }
  }
  @EXIT@
}
"""

PUSH_KERNEL = r"""
// Push this rank's KV rows into ring slot `me` of every rank that reads them (rank me + s reads them at its step
// s: ring order), only the rows it needs; the last CTA to finish a target raises the arrival there.
__global__ void __launch_bounds__(kCommThreads)
    push_kernel(ncclDevComm dc, ncclWindow_t win_ring, ncclWindow_t win_sym, const int4* own, Flags f, Geo g, int me,
                const uint32_t* epoch_at) {
  const uint32_t epoch = cuco::kit::load_epoch(epoch_at);  // this launch's (device epoch word)
  @ENTRY@
  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
  for (int s = 1; s < g.W; ++s) {
    const int t = (me + s) % g.W;
    @WAIT_READY@
    int4* to = cuco::lsa::peer_ptr<int4>(dc, win_ring, (size_t)me * block16(g) * 16, me, t);
    copy_rows(to, own, g, 0, kv_rows_needed(g, t, me), group, ngroups);
    if (cuco::lsa::cta_arrive_last(&f.local[f.lf.count(t, 0)], gridDim.x)) {
      @ON_PUT@
    }
  }
}
"""

SM_PULL = r"""
  pull_kernel<<<@CTAS@, kCommThreads, 0, @STREAM@>>>(ctx->devcomm, ctx->buffers[BUF_KV].window,
                                                ctx->symmetric_workspace.window,
                                                (const int4*)ctx->buffers[BUF_KV].ptr,
                                                (int4*)ctx->buffers[BUF_RING].ptr, f, g, ctx->rank, @FIRST@,
                                                chunking(g).chunk_rows, st->epoch_at);
  if ((rc = launch_ok())) return rc;
"""

SM_PUSH = r"""
  push_kernel<<<kCommCtas, kCommThreads, 0, side>>>(ctx->devcomm, ctx->buffers[BUF_RING].window,
                                                    ctx->symmetric_workspace.window,
                                                    (const int4*)ctx->buffers[BUF_KV].ptr, f, g, ctx->rank,
                                                    st->epoch_at);
  if ((rc = launch_ok())) return rc;
"""

ENQUEUE_HEAD = r"""
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  const Flags f = flags_of(ctx, g, chunking(g).nchunks);
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  (void)side;
  int rc = 0;
"""

DEFERRED = r"""
// placement=deferred: move every block this rank needs (all SMs, or the copy engines), then the W steps.
""" + ENQUEUE_HEAD + r"""@PRE@@MOVE@@POST@  for (int s = 0; s < g.W; ++s) {
    const int src = source_at(ctx->rank, s, g.W);
    const void* kv = s == 0 ? ctx->buffers[BUF_KV].ptr : (const void*)slot(ctx, g, src);
    if ((rc = attend(ctx, g, src, 0, g.Sr, kv, s == 0, cuco_attn_merge_f32, main))) return rc;
  }
  return finish(ctx, g, main);
}
"""

STREAM_OVERLAP = r"""
// placement=stream_overlap: the side stream moves the blocks in ring-step order (kCommCtas SMs pull; the copy
// engines push) while the main stream attends to its own block; then each block as soon as it landed.
""" + ENQUEUE_HEAD + r"""@PRE@@MOVE@@POST@  for (int s = 0; s < g.W; ++s) {
    const int src = source_at(ctx->rank, s, g.W);
@WAIT_LANDED@    const void* kv = s == 0 ? ctx->buffers[BUF_KV].ptr : (const void*)slot(ctx, g, src);
    if ((rc = attend(ctx, g, src, 0, g.Sr, kv, s == 0, cuco_attn_merge_f32, main))) return rc;
  }
  return finish(ctx, g, main);
}
"""

FUSED = r"""
// placement=fused (chunk-pipelined): the side stream moves every block, the own one included, slice by slice into
// the ring (SMs pull; the copy engines push); the main stream waits for each slice's landed or arrival flag (an
// in-stream wait, no SM held) and attends to it at once, merging with the log-sum-exp into the fp32 running output
// (which it starts empty: no slice writes it directly). The FMHA kernel itself does not poll flags.
""" + ENQUEUE_HEAD + r"""@PRE@@MOVE@@POST@  const cuco::kit::Chunking ch = chunking(g);
  void* o32 = running_f32(ctx, g);
  if ((rc = cuco_attn_start_f32(o32, (float*)ctx->buffers[BUF_LSE].ptr, g.Sr, g.hq, g.d, main))) return rc;
  for (int s = 0; s < g.W; ++s) {
    const int src = source_at(ctx->rank, s, g.W);
    const int64_t need = kv_rows_needed(g, ctx->rank, src);
    int c = 0;
    for (int64_t r0 = 0; r0 < need; r0 += ch.chunk_rows, ++c) {
      const int64_t r1 = r0 + ch.chunk_rows < need ? r0 + ch.chunk_rows : need;
@WAIT_SLICE@      const void* kv = slot(ctx, g, src);
      if ((rc = attend(ctx, g, src, r0, r1, kv, false, cuco_attn_merge_f32, main))) return rc;
    }
  }
  return finish_merged(ctx, g, main);
}
"""

SPLIT_PUT_WAIT = r"""
// placement=split_put_wait: the put half (side stream) pushes this rank's block into the ring slot of every rank
// that reads it; the main stream attends to its own block, then the wait half holds it until each block landed.
""" + ENQUEUE_HEAD + r"""@PRE@@MOVE@@POST@  for (int s = 0; s < g.W; ++s) {
    const int src = source_at(ctx->rank, s, g.W);
@WAIT@    const void* kv = s == 0 ? ctx->buffers[BUF_KV].ptr : (const void*)slot(ctx, g, src);
    if ((rc = attend(ctx, g, src, 0, g.Sr, kv, s == 0, cuco_attn_merge_f32, main))) return rc;
  }
  return finish(ctx, g, main);
}
"""

SIGNAL_PULL = {
    "ENTRY": ("if (blockIdx.x == 0 && (int)threadIdx.x < g.W && (int)threadIdx.x != me)  // sync_scope=signal\n"
              "    cuco::kit::publish_epoch(dc, win_sym, f.sf.ready(me), me, threadIdx.x, epoch);  // my KV is ready"),
    "WAIT_READY": "if (src != me) cuco::lsa::cta_wait_epoch(&f.sym[f.sf.ready(src)], epoch);  // src's KV is ready",
    "ON_READ": ("if (r1 == need && src != me)  // done reading src\n"
                "          cuco::kit::publish_epoch(dc, win_sym, f.sf.done(me), me, src, epoch);"),
    "EXIT": ("if (blockIdx.x == 0 && threadIdx.x == 0)  // every reader is done with my KV before I finish\n"
             "    for (int q = 0; q < g.W; ++q)\n"
             "      if (q != me) cuco::lsa::wait_epoch(&f.sym[f.sf.done(q)], epoch);"),
}
SIGNAL_PUSH = {
    "ENTRY": ("if (blockIdx.x == 0 && (int)threadIdx.x < g.W && (int)threadIdx.x != me)  // sync_scope=signal\n"
              "    cuco::kit::publish_epoch(dc, win_sym, f.sf.ready(me), me, threadIdx.x, epoch);  // my ring may be "
              "written"),
    "WAIT_READY": "cuco::lsa::cta_wait_epoch(&f.sym[f.sf.ready(t)], epoch);  // t accepts writes",
    "ON_PUT": "cuco::kit::publish_epoch(dc, win_sym, f.sf.arrive(me, 0), me, t, epoch);  // landed at t",
}


def barrier_calls(point: Directives, stream: str) -> str:
    """The barrier kernel's launch on `stream` (world / team scopes; nothing for signal)."""
    if point.sync_scope == "signal":
        return ""
    return f"  if ((rc = barrier(ctx, {stream}))) return rc;\n"


def _sync_kernels(point: Directives) -> str:
    if point.sync_scope == "signal":
        return WAIT_KERNEL
    return fill(BARRIER_KERNEL, {"SCOPE": point.sync_scope, "TEAM": point.sync_scope if point.sync_scope == "world"
                                 else "LSA", "WORLD": "true" if point.sync_scope == "world" else "false"},
                what="barrier kernel")


def _pull_kernel(point: Directives) -> str:
    if point.sync_scope == "signal":
        subs = SIGNAL_PULL
    else:
        subs = {"ENTRY": f"// sync_scope={point.sync_scope}: barrier kernels run before and after this kernel",
                "WAIT_READY": "", "ON_READ": "", "EXIT": ""}
    return fill(PULL_KERNEL, subs, what="pull kernel")


def _push_kernel(point: Directives) -> str:
    if point.sync_scope == "signal":
        subs = SIGNAL_PUSH
    else:
        subs = {"ENTRY": f"// sync_scope={point.sync_scope}: barrier kernels run before and after this kernel",
                "WAIT_READY": "", "ON_PUT": "// the barrier after this kernel says it landed"}
    return fill(PUSH_KERNEL, subs, what="push kernel")


def _pull_parts(point: Directives) -> tuple[str, str, str]:
    """(mover kernels, PRE+MOVE+POST enqueue text) of a pull placement."""
    ce = point.issuer == "copy_engine"
    stream = "main" if point.placement == "deferred" else "side"
    first = "0" if point.placement == "fused" else "1"
    if ce:
        move = fill(CE_PULL, {"FIRST": first, "STREAM": stream}, what="copy-engine pull")
    else:
        ctas = "ctx->sm_count" if point.placement == "deferred" else "kCommCtas"
        move = fill(SM_PULL, {"CTAS": ctas, "STREAM": stream, "FIRST": first}, what="pull launch")
    mover = "" if ce else _pull_kernel(point)
    return mover, move.lstrip("\n"), stream


def _split_parts(point: Directives) -> tuple[str, str, str]:
    ce = point.issuer == "copy_engine"
    mover = "" if ce else _push_kernel(point)
    move = (fill(CE_PUSH, {"ARRIVED": ""}, what="copy-engine push") if ce else SM_PUSH).lstrip("\n")
    if point.sync_scope == "signal":
        wait = ("    if (s > 0) {  // the wait half: src's rows landed in my ring slot\n"
                "      wait_kernel<<<1, 32, 0, main>>>(&f.sym[f.sf.arrive(src, 0)], st->epoch_at);\n"
                "      if ((rc = launch_ok())) return rc;\n"
                "    }\n")
        post = ""
    else:
        wait = ("    if (s == 1 && (rc = stream_wait_epoch(st, main, &f.local[f.lf.misc(0)])))\n"
                "      return rc;  // every block landed (the barrier after the puts)\n")
        post = (barrier_calls(point, "side") +
                "  if ((rc = stream_set_epoch(st, side, &f.local[f.lf.misc(0)]))) return rc;\n")
    return mover, move + post, wait


def _landed_wait(point: Directives) -> str:
    """stream_overlap's wait before step s > 0: src's arrival flag here (copy engines push), else the local flag
    of its last slice (the pull kernel raises it)."""
    if point.issuer == "copy_engine":
        return ("    if (s > 0 && (rc = stream_wait_epoch(st, main, &f.sym[f.sf.arrive(src, 0)])))\n"
                "      return rc;  // src pushed its rows here\n")
    return ("    if (s > 0) {\n"
            "      const int64_t rows = kv_rows_needed(g, ctx->rank, src), per = chunking(g).chunk_rows;\n"
            "      const int last = (int)((rows + per - 1) / per) - 1;\n"
            "      if ((rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, last)]))) return rc;  // it landed\n"
            "    }\n")


def _slice_wait(point: Directives) -> str:
    """fused's wait before attending to slice c of src: its arrival flag here where a peer pushed it (copy engines),
    else the local flag of the slice (the pull kernel, or this rank's own copy, raises it)."""
    local = "      if ((rc = stream_wait_epoch(st, main, &f.local[f.lf.chunk(src, c)]))) return rc;\n"
    if point.issuer != "copy_engine":
        return local
    return ("      if (src == ctx->rank) {\n  " + local +
            "      } else if ((rc = stream_wait_epoch(st, main, &f.sym[f.sf.arrive(src, c)]))) {\n"
            "        return rc;  // src pushed slice c here\n"
            "      }\n")


def render_lsa(point: Directives, body: tuple[str, str] | None = None) -> str:
    """The EVOLVE block of an LSA point; `body`: its (mover kernels, enqueue) where another module renders them
    (the gathered forms, gather_block.py), else the ring's here."""
    if body is not None:
        mover, enqueue = body
    elif point.placement == "split_put_wait":
        mover, move_post, wait = _split_parts(point)
        enqueue = fill(SPLIT_PUT_WAIT, {"PRE": barrier_calls(point, "side"), "MOVE": move_post, "POST": "",
                                        "WAIT": wait}, what="split_put_wait enqueue")
    else:
        mover, move, stream = _pull_parts(point)
        text = {"deferred": DEFERRED, "stream_overlap": STREAM_OVERLAP, "fused": FUSED}[point.placement]
        barrier = barrier_calls(point, stream)
        subs = {"PRE": barrier, "MOVE": move, "POST": barrier}
        if point.placement == "stream_overlap":
            subs["WAIT_LANDED"] = _landed_wait(point)
            if point.issuer == "copy_engine":
                subs["MOVE"] = fill(CE_PUSH, {"ARRIVED": CE_ARRIVED}, what="copy-engine push").lstrip("\n")
        if point.placement == "fused":
            subs["WAIT_SLICE"] = _slice_wait(point)
            if point.issuer == "copy_engine":
                subs["MOVE"] = CE_PUSH_SLICES.lstrip("\n")
        enqueue = fill(text, subs, what=f"{point.placement} enqueue")
    return fill(PROLOGUE, {
        "LABEL": point.label(),
        "ISSUER": ISSUER_TYPES[point.issuer],
        "ISSUER_NAME": point.issuer,
        "CHUNK": point.chunk_bytes,
        "CHUNK_NAME": format_bytes(point.chunk_bytes),
        "BARRIERS": "0" if point.sync_scope == "signal" else "1",
        "SYNC_KERNELS": _sync_kernels(point),
        "MOVER": mover,
        "ENQUEUE": enqueue,
    }, what=f"attention_cp block {point.label()}")
