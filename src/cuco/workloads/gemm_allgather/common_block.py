"""Block text shared by every placement: the design-point constants, geometry, flag layout and sync snippets."""

from __future__ import annotations

from cuco.design_space import Directives, format_bytes
from cuco.kit.template import fill

# copy_engine has no device issuer; its CTA type serves the barrier kernels only.
ISSUER_TYPES = {"thread": "ncclCoopThread", "warp": "ncclCoopWarp", "cta": "ncclCoopCta", "copy_engine": "ncclCoopCta"}

PROLOGUE = r"""
namespace cuco_ag {

// ---- design point: @LABEL@ ----
using Issuer = @ISSUER@;  // issuer=@ISSUER_NAME@: the thread group that moves one step of a transfer
constexpr int64_t kChunkBytes = @CHUNK@;  // chunk_bytes=@CHUNK_NAME@ (0: a rank's whole block at once)
constexpr int kCommThreads = 1024;        // threads of a pull/push CTA
constexpr int kUnroll = 4;                // 16-byte loads in flight per thread
constexpr int kMinCommCtas = 8, kMaxCommCtas = 16;  // 8: best measured on 2x H200 at every bench shape
constexpr double kCommGBsPerCta = 38.0;   // LSA pull rate of one 1024-thread CTA (~317 GB/s on 8 CTAs, H200)
constexpr double kGemmTflops = 700.0;     // bf16 cuBLASLt rate, to size the communication's SM share

@BLOCK_SETUP@

// Problem geometry of this launch.
struct Geo {
  int64_t M, K, N, Mr;  // Mr = M / W rows per rank
  int64_t chunk_rows;   // rows per chunk (a multiple of 128)
  int64_t row16;        // 16-byte words per row of A
  int W, me, nchunks;   // nchunks per rank block
};

static Geo geo_of(const cuco_ctx* ctx) {
  Geo g;
  g.M = ctx->dims[0];
  g.K = ctx->dims[1];
  g.N = ctx->dims[2];
  g.W = ctx->world;
  g.me = ctx->rank;
  g.Mr = g.M / g.W;
  g.row16 = g.K * 2 / 16;
  const cuco::kit::Chunking c = cuco::kit::make_chunking(g.Mr, kChunkBytes, g.K * 2, 128);
  g.chunk_rows = c.chunk_rows;
  g.nchunks = c.nchunks;
  return g;
}

// CTAs for the communication kernel: enough to finish moving the remote rows within ~75% of the local-rows
// GEMM, so the transfer hides under it while taking as few SMs from the GEMM as possible.
static int comm_ctas(const Geo& g) {
  double local_s = 2.0 * g.Mr * g.K * g.N / (kGemmTflops * 1e12);
  double bytes = (double)(g.W - 1) * g.Mr * g.K * 2;
  int n = (int)(bytes / (0.75 * local_s) / (kCommGBsPerCta * 1e9)) + 1;
  return n < kMinCommCtas ? kMinCommCtas : (n > kMaxCommCtas ? kMaxCommCtas : n);
}

// Flags (uint32 epochs), laid out by cuco/kit/layout.cuh. Symmetric, written by peers: ready[W] | done[W] |
// arrive[W * nchunks]. Local: chunk[W * nchunks] | count[W * nchunks] | misc[64].
enum { SYM_READY = 0 };
static size_t sym_words(const Geo& g) { return cuco::kit::SymFlags{g.W, g.nchunks}.words(); }
static size_t local_words(const Geo& g) { return cuco::kit::LocalFlags{g.W, g.nchunks}.words(); }
__host__ __device__ inline size_t sym_done(const Geo& g, int rank) { return cuco::kit::SymFlags{g.W, g.nchunks}.done(rank); }
__host__ __device__ inline size_t sym_arrive(const Geo& g, int rank, int c) {
  return cuco::kit::SymFlags{g.W, g.nchunks}.arrive(rank, c);
}

struct Flags {
  uint32_t* chunk;
  uint32_t* count;
  uint32_t* misc;
  uint32_t* sym;  // this rank's symmetric flags (peers write into theirs through LSA)
};

static Flags flags_of(cuco_ctx* ctx, const Geo& g) {
  uint32_t* l = local_flags(ctx);
  const cuco::kit::LocalFlags lf{g.W, g.nchunks};
  return Flags{l + lf.chunk(0, 0), l + lf.count(0, 0), l + lf.misc(0), (uint32_t*)ctx->symmetric_workspace.ptr};
}

// Tell every peer that this rank reached `epoch` (ready[me] on each peer); CTA 0 does it.
__device__ inline void publish_ready(const ncclDevComm& dc, ncclWindow_t win_sym, const Geo& g, uint32_t epoch) {
  if (blockIdx.x == 0 && threadIdx.x < g.W && (int)threadIdx.x != g.me)
    cuco::kit::publish_epoch(dc, win_sym, SYM_READY + g.me, g.me, threadIdx.x, epoch);
}

// Tell peer p that this rank finished reading p's memory for `epoch` (done[me] on p).
__device__ inline void publish_done(const ncclDevComm& dc, ncclWindow_t win_sym, const Geo& g, int p, uint32_t epoch) {
  cuco::kit::publish_epoch(dc, win_sym, sym_done(g, g.me), g.me, p, epoch);
}
@BARRIER_KERNEL@
"""

BARRIER_KERNEL = r"""
// sync_scope=@SCOPE@: one LSA barrier over the @TEAM_NAME@ team, as its own one-CTA kernel; stream order makes it
// cover every CTA of the kernels before and after it.
__global__ void barrier_kernel(ncclDevComm dc) { cuco::kit::cta_lsa_barrier(dc, @WORLD@); }
"""

EPILOGUE = r"""
}  // namespace cuco_ag
"""

BLOCK_SESSION_OPEN = (
    "ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), dc, ncclTeamLsa(dc), dc.lsaBarrier, blockIdx.x);\n"
    "  bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);  // sync_scope=block: this CTA meets its peers' twins"
)
BLOCK_SESSION_CLOSE = "bar.sync(ncclCoopCta(), cuda::memory_order_release);  // nobody refills what a twin still reads"


def uses_barrier_kernel(point: Directives) -> bool:
    """True when the point synchronises with a barrier kernel (world or team scope)."""
    return point.sync_scope in ("world", "team")


def prologue(point: Directives) -> str:
    """The block's opening text for `point`: its constants and, where it uses one, the barrier kernel."""
    barrier = ""
    if uses_barrier_kernel(point) and point.backend == "lsa":
        barrier = fill(BARRIER_KERNEL, {"SCOPE": point.sync_scope,
                                        "TEAM_NAME": point.sync_scope if point.sync_scope == "world" else "LSA",
                                        "WORLD": "true" if point.sync_scope == "world" else "false"})
    setup = ("// backend=nvshmem: this module attaches its NVSHMEM device state (the harness brought NVSHMEM up).\n"
             "static int block_setup(cuco_ctx* ctx, State*) { return cuco::kit::nvshmem_attach(ctx); }"
             if point.backend == "nvshmem" else
             "static int block_setup(cuco_ctx*, State*) { return 0; }  // nothing to prepare beyond the frozen setup")
    return fill(PROLOGUE, {"LABEL": point.label(), "ISSUER": ISSUER_TYPES[point.issuer], "ISSUER_NAME": point.issuer,
                           "CHUNK": point.chunk_bytes, "CHUNK_NAME": format_bytes(point.chunk_bytes),
                           "BARRIER_KERNEL": barrier, "BLOCK_SETUP": setup}, what="GEMM+AllGather prologue")


def barrier_launch(point: Directives, stream: str, indent: str = "  ") -> str:
    """Host code launching the grid-wide barrier kernel on `stream` (world/team scopes), else nothing."""
    if not uses_barrier_kernel(point):
        return ""
    return (f"{indent}barrier_kernel<<<1, 128, 0, {stream}>>>(ctx->devcomm);\n"
            f"{indent}if ((rc = launch_ok())) return rc;\n")
