"""Copy-engine block text of the ring-attention workload (issuer=copy_engine): host-issued DMA copies between
this rank's KV block and the ring slots as the NCCL window maps them (no SM moves data), with their flags."""

from __future__ import annotations

# Host-issued copy-engine transfers (no SM moves data); flags are raised in stream order by one-thread kernels that
# read the device epoch (stream_set_epoch here, kit/stream_sync.cuh; stream_publish_epoch on a peer, kit/sync.cuh).
CE_PULL = r"""
  {  // issuer=copy_engine: DMA copies from the sources' KV blocks (LSA-mapped) into the ring slots
    const cuco::kit::Chunking ch = chunking(g);
    const int64_t rb = 2 * kv_row_elems(g);
    for (int s = @FIRST@; s < g.W; ++s) {
      const int src = source_at(ctx->rank, s, g.W);
      const char* from = src == ctx->rank ? (const char*)ctx->buffers[BUF_KV].ptr : peer_base(st, BUF_KV, src);
      if (!from) return 66;
      char* to = (char*)slot(ctx, g, src);
      const int64_t need = kv_rows_needed(g, ctx->rank, src);
      int c = 0;
      for (int64_t r0 = 0; r0 < need; r0 += ch.chunk_rows, ++c) {
        const int64_t n = (r0 + ch.chunk_rows < need ? ch.chunk_rows : need - r0) * rb;
        if (cudaMemcpyAsync(to + r0 * rb, from + r0 * rb, n, cudaMemcpyDeviceToDevice, @STREAM@) != cudaSuccess ||
            cudaMemcpyAsync(to + (g.Sr + r0) * rb, from + (g.Sr + r0) * rb, n, cudaMemcpyDeviceToDevice, @STREAM@) !=
                cudaSuccess)
          return 67;
        if ((rc = stream_set_epoch(st, @STREAM@, &f.local[f.lf.chunk(src, c)]))) return rc;
      }
    }
  }
"""

#: This rank's rows into ring slot `me` of every reader, readers in the order they attend to this block (reader
#: me + s at its step s); @ARRIVED@ follows each reader's copies. split_put_wait's barrier after the copies says they
#: landed (nothing per reader); stream_overlap raises arrive[me] in the reader's symmetric flags (CE_ARRIVED). Copy
#: engines wrote 2.3-2.8x faster over NVLink than they read at W = 4 with every GPU copying
#: (benchmarks/results/w4/gemm_under_copy_w4.log); the barrier before the copies means every reader has finished the
#: previous launch, whose steps read the slots these copies overwrite.
CE_PUSH = r"""
  {  // issuer=copy_engine: DMA copies of this rank's rows into ring slot `me` of every reader (LSA-mapped)
    const int64_t rb = 2 * kv_row_elems(g);
    const char* from = (const char*)ctx->buffers[BUF_KV].ptr;
    for (int s = 1; s < g.W; ++s) {
      const int t = (ctx->rank + s) % g.W;
      char* to = peer_base(st, BUF_RING, t);
      if (!to) return 66;
      to += ctx->rank * block_bytes(g);
      const int64_t n = kv_rows_needed(g, t, ctx->rank) * rb;
      if (cudaMemcpyAsync(to, from, n, cudaMemcpyDeviceToDevice, side) != cudaSuccess ||
          cudaMemcpyAsync(to + g.Sr * rb, from + g.Sr * rb, n, cudaMemcpyDeviceToDevice, side) != cudaSuccess)
        return 67;
@ARRIVED@    }
  }
"""

#: stream_overlap's @ARRIVED@ of CE_PUSH: reader t's arrive[me], in stream order after the copies.
CE_ARRIVED = r"""      if ((rc = cuco::kit::stream_publish_epoch(side, ctx->devcomm, ctx->symmetric_workspace.window,
                                                f.sf.arrive(ctx->rank, 0), ctx->rank, t, st->epoch_at)))
        return rc;
"""

#: fused with the copy engines: PUSH this rank's rows slice by slice into ring slot `me` of every reader, itself
#: first, then reader me + s (the order readers attend to them), each slice followed by its flag: the local slice
#: flag here, arrive[me][c] in the reader's symmetric flags elsewhere.
CE_PUSH_SLICES = r"""
  {  // issuer=copy_engine: DMA copies, slice by slice, into every reader's ring slot `me`, then the slice's flag
    const cuco::kit::Chunking ch = chunking(g);
    const int64_t rb = 2 * kv_row_elems(g);
    const char* from = (const char*)ctx->buffers[BUF_KV].ptr;
    for (int s = 0; s < g.W; ++s) {
      const int t = (ctx->rank + s) % g.W;
      char* to = t == ctx->rank ? (char*)ctx->buffers[BUF_RING].ptr : peer_base(st, BUF_RING, t);
      if (!to) return 66;
      to += ctx->rank * block_bytes(g);
      const int64_t need = kv_rows_needed(g, t, ctx->rank);
      int c = 0;
      for (int64_t r0 = 0; r0 < need; r0 += ch.chunk_rows, ++c) {
        const int64_t n = (r0 + ch.chunk_rows < need ? ch.chunk_rows : need - r0) * rb;
        if (cudaMemcpyAsync(to + r0 * rb, from + r0 * rb, n, cudaMemcpyDeviceToDevice, side) != cudaSuccess ||
            cudaMemcpyAsync(to + (g.Sr + r0) * rb, from + (g.Sr + r0) * rb, n, cudaMemcpyDeviceToDevice, side) !=
                cudaSuccess)
          return 67;
        if (t == ctx->rank) {
          if ((rc = stream_set_epoch(st, side, &f.local[f.lf.chunk(t, c)]))) return rc;
        } else {
          if ((rc = cuco::kit::stream_publish_epoch(side, ctx->devcomm, ctx->symmetric_workspace.window,
                                                    f.sf.arrive(ctx->rank, c), ctx->rank, t, st->epoch_at)))
            return rc;
        }
      }
    }
  }
"""
