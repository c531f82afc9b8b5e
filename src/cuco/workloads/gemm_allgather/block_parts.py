"""CUDA text that several GEMM+AllGather blocks share: `block_needs`, the split enqueue's opening, the local-rows
GEMM and the per-chunk GEMMs of the remote rows."""

from __future__ import annotations

#: Opening of a comm kernel's body: the issuer group this CTA belongs to and how many there are.
ISSUER_GROUPS = r"""  const size_t group = cuco::lsa::issuer_group<Issuer>(blockIdx.x);
  const size_t ngroups = cuco::lsa::issuer_groups<Issuer>(gridDim.x);
"""

#: Rows of chunk c of a rank's block (inside a kernel's chunk loop).
CHUNK_ROWS = r"""      const int64_t r0 = c * g.chunk_rows;
      const int64_t rows = g.Mr - r0 < g.chunk_rows ? g.Mr - r0 : g.chunk_rows;
"""

#: Opening of an enqueue that splits the SMs between a comm kernel on the side stream and the GEMM.
SPLIT_ENQUEUE_OPEN = r"""static int enqueue(cuco_ctx* ctx, State* st) {
  const Geo g = geo_of(ctx);
  const Flags f = flags_of(ctx, g);
  const int ncomm = comm_ctas(g);
  cudaStream_t main = ctx->stream, side = ctx->side_stream;
  const char* a_full = (const char*)ctx->buffers[BUF_A_FULL].ptr;
  char* c_out = (char*)ctx->buffers[BUF_C].ptr;
  int rc = 0;
"""

#: The local rows' GEMM on the SMs the comm kernel leaves.
LOCAL_ROWS_GEMM = r"""  rc = gemm_rows(st, ctx, ctx->buffers[BUF_A_LOCAL].ptr, c_out + (size_t)g.me * g.Mr * g.N * 2, g.Mr,
                 ctx->sm_count - ncomm, main);
  if (rc) return rc;
"""


def block_needs(*fields: str) -> str:
    """A block's `block_needs` function setting `n.<field>` for each of `fields` (C++ assignments)."""
    return ("static Needs block_needs(const cuco_ctx* ctx) {\n  Geo g = geo_of(ctx);\n  Needs n;\n"
            + "".join(f"  n.{field};\n" for field in fields) + "  return n;\n}\n")


#: `block_needs` of an LSA block with symmetric flags.
LSA_NEEDS = block_needs("flag_bytes = 4 * local_words(g)", "sym_bytes = 4 * sym_words(g) + 4096",
                        "lsa_barriers = @BARRIERS@")


def remote_chunk_gemms(wait: str, *, first: int = 1, a_offset: str = "(size_t)r0 * g.K * 2") -> str:
    """The enqueue's end: for each peer from step `first` and each chunk, `wait` (C++ lines) then the GEMM of
    that chunk's rows of A_full."""
    return (f"  for (int s = {first}; s < g.W; ++s) {{\n"
            "    const int p = (g.me + s) % g.W;\n"
            "    for (int c = 0; c < g.nchunks; ++c) {\n"
            "      const int64_t r0 = p * g.Mr + c * g.chunk_rows;\n"
            "      const int64_t rows = g.Mr - c * g.chunk_rows < g.chunk_rows ? g.Mr - c * g.chunk_rows : g.chunk_rows;\n"
            f"{wait}"
            f"      if ((rc = gemm_rows(st, ctx, a_full + {a_offset}, c_out + (size_t)r0 * g.N * 2, rows, 0, main)))\n"
            "        return rc;\n"
            "    }\n"
            "  }\n"
            "  return 0;\n"
            "}\n")
