"""Copy-engine block text (issuer=copy_engine): LSA-mapped buffers moved by the GPU's DMA engines.

No SM moves data, so the GEMM keeps every SM. The copies are stream copies between this rank's buffers and its
peers' buffers as mapped by the NCCL window (the LSA pointers, resolved once at setup); LSA barrier kernels on
the same stream bracket them (sync_scope world/team). Per-chunk epoch flags raised in stream order (one-thread
kernels that read the device epoch word, kit/stream_sync.cuh) tell the GEMM stream which rows have landed: local
flags where this rank copies into its own A_full, the receiver's symmetric flags where it pushes into a peer's.
"""

from __future__ import annotations

from cuco.design_space import Directives
from cuco.kit.template import fill
from cuco.workloads.gemm_allgather.block_parts import CHUNK_ROWS, block_needs, remote_chunk_gemms
from cuco.workloads.gemm_allgather.fused_block import FUSED_GEMM

# Every copy-engine block asks for the same: local flags and one LSA barrier (a one-CTA kernel opens it).
CE_NEEDS = block_needs("flag_bytes = 4 * local_words(g)", "sym_bytes = 4096", "lsa_barriers = 1")

CE_DEFERRED = r"""
// placement=deferred, issuer=copy_engine: barrier | copy every rank's block into A_full | barrier | one GEMM.
@NEEDS@
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  cudaStream_t main = ctx->stream;
  const size_t block = (size_t)g.Mr * g.K * 2;
  char* a_full = (char*)ctx->buffers[BUF_A_FULL].ptr;
  int rc = 0;
@PRE@  for (int s = 0; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    const char* src = p == g.me ? (const char*)ctx->buffers[BUF_A_LOCAL].ptr : peer_base(st, BUF_A_LOCAL, p);
    if (!src) return 66;
    if (cudaMemcpyAsync(a_full + p * block, src, block, cudaMemcpyDeviceToDevice, main) != cudaSuccess) return 67;
  }
@POST@  return gemm_rows(st, ctx, a_full, ctx->buffers[BUF_C].ptr, g.M, 0, main);
}
"""

#: Every copy-engine block that pushes chunks also raises symmetric arrival flags on the peers it writes.
CE_PUSH_NEEDS = block_needs("flag_bytes = 4 * local_words(g)", "sym_bytes = 4 * sym_words(g) + 4096",
                            "lsa_barriers = 1")

#: The side stream's pushes of this rank's block into every peer's A_full, chunk by chunk, each chunk's arrival flag
#: raised on that peer after it. Pushing, not pulling: copy engines writing over NVLink ran 2.3-2.8x faster than
#: reading at W = 4 with every GPU copying (benchmarks/results/w4/gemm_under_copy_w4.log: push 300-367 GB/s into each
#: GPU, pull 124-132). The barrier before it means every peer has finished the previous launch, whose GEMM read the
#: rows these copies overwrite. Peer me - s multiplies this rank's rows at its step s: the first reader first.
CE_CHUNK_PUSHES = r"""  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me - s + g.W) % g.W;
    char* dst = peer_base(st, BUF_A_FULL, p);
    if (!dst) return 66;
    for (int c = 0; c < g.nchunks; ++c) {
""" + CHUNK_ROWS + r"""      const size_t off = r0 * row_bytes;
      if (cudaMemcpyAsync(dst + g.me * g.Mr * row_bytes + off, a_local + off, rows * row_bytes,
                          cudaMemcpyDeviceToDevice, side) != cudaSuccess)
        return 67;
      if ((rc = cuco::kit::stream_publish_epoch(side, ctx->devcomm, ctx->symmetric_workspace.window,
                                                sym_arrive(g, g.me, c), g.me, p, st->epoch_at)))
        return rc;
    }
  }
"""

#: Opening of an enqueue whose side stream pushes chunks (CE_CHUNK_PUSHES).
CE_PUSH_OPEN = r"""static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  const Flags f = flags_of(ctx, g);
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  const char* a_local = (const char*)ctx->buffers[BUF_A_LOCAL].ptr;
  char* a_full = (char*)ctx->buffers[BUF_A_FULL].ptr;
  const size_t row_bytes = (size_t)g.K * 2;
  int rc = 0;
"""

CE_CHUNK_PUSH = r"""
// placement=stream_overlap, issuer=copy_engine: the side stream pushes this rank's block into every peer's A_full,
// chunk by chunk, with copy engines, and after each chunk raises arrive[me][c] in that peer's symmetric flags; the
// main stream multiplies the local rows on all SMs, then each remote chunk once its arrival flag is up.
@NEEDS@
""" + CE_PUSH_OPEN + r"""  char* c_out = (char*)ctx->buffers[BUF_C].ptr;
@PRE@""" + CE_CHUNK_PUSHES + r"""@POST@  char* c_local = c_out + (size_t)g.me * g.Mr * g.N * 2;
  rc = gemm_rows(st, ctx, a_local, c_local, g.Mr, 0, main);
  if (rc) return rc;
""" + remote_chunk_gemms(
    "      if ((rc = stream_wait_epoch(st, main, &f.sym[sym_arrive(g, p, c)]))) return rc;\n",
    a_offset="(size_t)r0 * row_bytes")

CE_PUSH = r"""
// placement=split_put_wait, issuer=copy_engine: the side stream pushes this rank's block into every peer's A_full
// with copy engines, meets the peers at a barrier (after it, every peer's rows have landed here), then multiplies
// the remote rows on the side stream, beside the local-rows GEMM of the main stream: the two GEMMs share the SMs,
// so the second fills the first one's last wave.
@NEEDS@
static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  const char* a_local = (const char*)ctx->buffers[BUF_A_LOCAL].ptr;
  char* a_full = (char*)ctx->buffers[BUF_A_FULL].ptr;
  char* c_out = (char*)ctx->buffers[BUF_C].ptr;
  const size_t block = (size_t)g.Mr * g.K * 2;
  int rc = 0;
@PRE@  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    char* dst = peer_base(st, BUF_A_FULL, p);
    if (!dst) return 66;
    if (cudaMemcpyAsync(dst + g.me * block, a_local, block, cudaMemcpyDeviceToDevice, side) != cudaSuccess)
      return 67;
  }
@POST@  rc = gemm_rows(st, ctx, a_local, c_out + (size_t)g.me * g.Mr * g.N * 2, g.Mr, 0, main);
  if (rc) return rc;
  for (int s = 1; s < g.W; ++s) {
    const int p = (g.me + s) % g.W;
    if ((rc = gemm_rows(st, ctx, a_full + p * block, c_out + (size_t)p * g.Mr * g.N * 2, g.Mr, 0, side))) return rc;
  }
  return 0;
}
"""

CE_FUSED = FUSED_GEMM + r"""
// placement=fused, issuer=copy_engine: the side stream copies the local block into A_full (doubling pieces), then
// pushes this rank's block into every peer's A_full, chunk by chunk, with copy engines, raising arrive[me][c] there
// after each; ONE persistent GEMM over A_full follows row arrival on every SM but kFlagSms (local row tiles first; a
// remote tile's loads wait for its chunk's arrival flag, which the peer that pushed it raised in this rank's
// symmetric flags). No SM moves data: the SMs left free run only the side stream's one-CTA barrier and flag
// kernels, which the GEMM's spinning producers must never starve (at W = 1 nothing is pushed or waited for, and the
// GEMM takes every SM).
constexpr int kFlagSms = 2;  // one cluster of 2 CTAs
@NEEDS@
""" + CE_PUSH_OPEN + r"""  // chunk[p][c] is arrive[p][c] here: raised by the peer
  // that pushed it, and by local_pieces for this rank's own rows
  Flags arrivals = f;
  arrivals.chunk = f.sym + sym_arrive(g, 0, 0);
  (void)a_full;
  if (g.W > 1 && (rc = local_pieces(ctx, st, g, arrivals, side))) return rc;  // local rows first
@PRE@""" + CE_CHUNK_PUSHES + r"""@POST@  const int sms = ctx->sm_count - (g.W > 1 ? kFlagSms : 0);
  return persistent_gemm(ctx, st, g, arrivals, sms, main, g.W > 1);
}
"""


def render_ce(point: Directives, barrier_launch) -> str:
    """The placement-specific part of a copy-engine block; `barrier_launch(point, stream)` gives the barrier
    kernel launches that bracket the copies."""
    if point.placement == "deferred":
        text, stream = CE_DEFERRED, "main"
    elif point.placement == "stream_overlap":
        text, stream = CE_CHUNK_PUSH, "side"
    elif point.placement == "split_put_wait":
        text, stream = CE_PUSH, "side"
    elif point.placement == "fused":
        text, stream = CE_FUSED, "side"
    else:
        raise ValueError(f"render_ce does not handle placement={point.placement}")
    barrier = barrier_launch(point, stream)
    needs = CE_PUSH_NEEDS if text in (CE_CHUNK_PUSH, CE_FUSED) else CE_NEEDS
    return fill(text, {"NEEDS": needs, "PRE": barrier, "POST": barrier}, what="copy-engine block")
