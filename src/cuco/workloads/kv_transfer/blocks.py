"""Block text of the LSA placements: the prefill role's launch code per placement, and the decode role's wait half
of the staged protocols (split_put_wait, copy engine). Filled by render.py."""

from __future__ import annotations

#: sync_scope=signal: raise layer l's arrival flag on the decode rank (after the layer's transfer, on @STREAM@).
SIGNAL_LAYER = "      if ((rc = signal_pair(ctx, st, f.arrived(l, 0), @STREAM@))) return rc;  // layer l has landed\n"
#: sync_scope=signal: raise chunk c of layer l's arrival flag on the decode rank (side stream).
SIGNAL_CHUNK = "        if ((rc = signal_pair(ctx, st, f.arrived(l, c), ss))) return rc;  // chunk c has landed\n"

# Compute every layer, then every layer's pages straight into the decode rank's pages.
DEFERRED = r"""    // placement=deferred: the layer stack on every SM, then every layer's pages into the decode pages
    for (int64_t l = 0; l < g.L; ++l)
      if (kCompute && ((rc = layer_front(ctx, st, l, cs)) || (rc = layer_back(ctx, st, l, cs)))) return rc;
    for (int64_t l = 0; l < g.L; ++l) {
      rc = cuco_kvt_copy_blocks(pages_of(own(ctx, BUF_PCACHE), ptab(ctx, st), g, l),
                                pages_of(pair_buf(ctx, st, BUF_DCACHE), pair_dtab(ctx, st), g, l), g.D, 0, g.nblk,
                                kGroup, 2 * ctx->sm_count, cs);
      if (rc) return rc;
@SIGNAL_LAYER@    }"""

STREAM_OVERLAP = r"""    // placement=stream_overlap: layer l's pages leave on the side stream while layer l+1 computes
    for (int64_t l = 0; l < g.L; ++l) {
      if (kCompute && (rc = layer_front(ctx, st, l, cs))) return rc;
      if ((rc = mark_ready(st, 0, cs))) return rc;  // layer l's K/V exist in its pages
      if (kCompute && (rc = layer_back(ctx, st, l, cs))) return rc;
      if ((rc = after_ready(st, 0, ss))) return rc;
      rc = cuco_kvt_copy_blocks(pages_of(own(ctx, BUF_PCACHE), ptab(ctx, st), g, l),
                                pages_of(pair_buf(ctx, st, BUF_DCACHE), pair_dtab(ctx, st), g, l), g.D, 0, g.nblk,
                                kGroup, kCommCtas, ss);
      if (rc) return rc;
@SIGNAL_LAYER@    }"""

COPY_ENGINE = r"""    // placement=stream_overlap, issuer=copy_engine: layer l's K/V rows to the decode staging by DMA
    for (int64_t l = 0; l < g.L; ++l) {
      if (l >= 2 && (rc = after_sent(st, l - 2, cs))) return rc;  // slot reuse
      if (kCompute && (rc = layer_front(ctx, st, l, cs))) return rc;
      if ((rc = mark_ready(st, 0, cs))) return rc;
      if (kCompute && (rc = layer_back(ctx, st, l, cs))) return rc;
      if ((rc = after_ready(st, 0, ss))) return rc;
      if ((rc = copy_engine_rows(ctx, st, l, ss))) return rc;
      if ((rc = mark_sent(st, l, ss))) return rc;  // its rows may be reused
    }"""

SPLIT_PUT_WAIT = r"""    // placement=split_put_wait: put kernels (side stream) move each computed layer by chunks into
    // the decode rank's staging area; the decode rank's wait half scatters them
@WAIT_DONE@
    for (int64_t l = 0; l < g.L; ++l) {
      if (l >= 2 && (rc = after_sent(st, l - 2, cs))) return rc;  // slot reuse
      if (kCompute && (rc = layer_front(ctx, st, l, cs))) return rc;
      if ((rc = mark_ready(st, 0, cs))) return rc;
      if (kCompute && (rc = layer_back(ctx, st, l, cs))) return rc;
      if ((rc = after_ready(st, 0, ss))) return rc;
      for (int c = 0; c < ch.nchunks; ++c) {
        const int64_t b0 = chunk_first_block(ch, c), b1 = chunk_end_block(ch, c);
        rc = cuco_kvt_copy_blocks(rows_of(st, l), stage_of(pair_buf(ctx, st, BUF_STAGE), g, l), g.D, b0, b1, kGroup,
                                  kCommCtas, ss);
        if (rc) return rc;
@SIGNAL_CHUNK@      }
      if ((rc = mark_sent(st, l, ss))) return rc;  // its rows may be reused
    }"""

FUSED = r"""    // placement=fused: the K/V projection in chunks of whole blocks; each chunk leaves for the decode
    // rank's pages straight from the projection output once its GEMM is done (an event, no SM held)
    for (int64_t l = 0; l < g.L; ++l) {
      if (l >= 2 && (rc = after_sent(st, l - 2, cs))) return rc;  // slot reuse
      const void* x = layer_input(ctx, st, l);
      for (int c = 0; c < ch.nchunks; ++c) {
        rc = kCompute ? cuco_kvt_project_kv_rows(st->plan, own(ctx, BUF_W), x, (int)(l & 1),
                                                 cuco::kit::chunk_begin(ch, c), cuco::kit::chunk_len(ch, c), cs)
                      : 0;
        if (rc || (rc = mark_ready(st, c, cs))) return rc;
      }
      // the chunks above normalised every row of x: Q reads them as they are
      if (kCompute && ((rc = cuco_kvt_project_q_normed(st->plan, own(ctx, BUF_W), (int)(l & 1), cs)) ||
                       (rc = cuco_kvt_copy_blocks(rows_of(st, l), pages_of(own(ctx, BUF_PCACHE), ptab(ctx, st), g, l),
                                                  g.D, 0, g.nblk, 0, 2 * ctx->sm_count, cs)) ||
                       (rc = layer_back(ctx, st, l, cs))))
        return rc;
      for (int c = 0; c < ch.nchunks; ++c) {
        if ((rc = after_ready(st, c, ss))) return rc;
        const int64_t b0 = chunk_first_block(ch, c), b1 = chunk_end_block(ch, c);
        rc = cuco_kvt_copy_blocks(rows_of(st, l), pages_of(pair_buf(ctx, st, BUF_DCACHE), pair_dtab(ctx, st), g, l),
                                  g.D, b0, b1, kGroup, kCommCtas, ss);
        if (rc) return rc;
@SIGNAL_CHUNK@      }
      if ((rc = mark_sent(st, l, ss))) return rc;  // its rows may be reused
    }"""

PREFILL = {"deferred": DEFERRED, "stream_overlap": STREAM_OVERLAP, "copy_engine": COPY_ENGINE,
           "split_put_wait": SPLIT_PUT_WAIT, "fused": FUSED}

#: The wait half of split_put_wait with signals: each chunk is scattered into this rank's pages (its own table) as
#: soon as its flag is up; then the prefill rank may write the staging area again.
DECODE_STAGED = r"""    cudaStream_t ds;  // the decode side's stream (decode_begin)
    if ((rc = decode_begin(ctx, st, &ds))) return rc;
    for (int64_t l = 0; l < g.L; ++l)
      for (int c = 0; c < f.nchunks; ++c) {
        if ((rc = wait_own(ctx, st, f.arrived(l, c), kThisLaunch, ds))) return rc;  // chunk c of layer l has landed
        const int64_t b0 = chunk_first_block(ch, c), b1 = chunk_end_block(ch, c);
        rc = cuco_kvt_copy_blocks(stage_of(own(ctx, BUF_STAGE), g, l),
                                  pages_of(own(ctx, BUF_DCACHE), dtab(ctx, st), g, l), g.D, b0, b1, 0,
                                  2 * ctx->sm_count, ds);
        if (rc) return rc;
      }
    if ((rc = signal_pair(ctx, st, f.done(), ds))) return rc;  // the staging area may be written again
    if ((rc = decode_end(ctx, st, ds))) return rc;"""
