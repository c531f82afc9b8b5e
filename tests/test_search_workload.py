"""A small GEMM+AllGather-like workload for the search tests (render = a short program with EVOLVE-BLOCKs), and
checks that it behaves like a workload should."""

from __future__ import annotations

from pathlib import Path

from cuco.design_space import DesignSpace, Directives, Topology, format_bytes
from cuco.workload import Shape, ShapeError, Workload

TOPOLOGY = Topology(world=2, nodes=1, gin_available=False, nvshmem_available=False)
SHAPE = Shape((8192, 8192, 8192))


ISSUERS = ("thread", "warp", "cta")  # the SM issuers this toy template renders


def _space(topology: Topology) -> DesignSpace:
    return DesignSpace(topology=topology).restrict(issuers=ISSUERS)


def render(d: Directives) -> str:
    """A candidate whose mutable part spells out the design point (so distinct points read differently)."""
    chunk = d.chunk_bytes or 64 * 1024 * 1024
    lines = [
        f"constexpr int kChunkBytes = {d.chunk_bytes};  // {format_bytes(d.chunk_bytes)}",
        f"constexpr int kChunksPerRank = {max(1, (64 * 1024 * 1024) // chunk)};",
        f"__device__ void issue_{d.backend}_{d.issuer}(char* dst, const char* src, int n) {{",
        f"  for (int i = 0; i < n; i += {dict(thread=1, warp=32, cta=1024)[d.issuer]}) dst[i] = src[i];",
        "}",
        f"__device__ void sync_{d.sync_scope}(int chunk) {{ /* {d.sync_scope} completion for chunk */ }}",
        f"__global__ void step_{d.placement}(char* dst, const char* src, int n) {{",
        f"  issue_{d.backend}_{d.issuer}(dst, src, n);",
        f"  sync_{d.sync_scope}(blockIdx.x % kChunksPerRank);",
        "}",
    ]
    return (
        "#include <cuco/abi.h>\n"
        f"// toy AllGather+GEMM candidate: {d.label()}\n"
        "// EVOLVE-BLOCK-START\n" + "\n".join(lines) + "\n// EVOLVE-BLOCK-END\n"
        'extern "C" int cuco_candidate_requirements(const cuco_ctx* ctx, cuco_requirements* req) {\n'
        "  req->lsa_barrier_count = 8;\n  return 0;\n}\n"
        'extern "C" int cuco_candidate_launch(cuco_ctx* ctx) {\n  return 0;\n}\n'
    )


def _check_shape(shape: Shape, world: int) -> None:
    if len(shape.dims) != 3 or shape.dims[0] % world:
        raise ShapeError(f"M={shape.dims[0]} must divide by world={world}")


def make_workload(name: str = "toy_gemm_allgather") -> Workload:
    """AllGather of A (M x K, bf16, sharded on M) then a GEMM with local B (K x N): flops and bytes per rank."""
    return Workload(
        name=name, description="AllGather A (M x K bf16, rows sharded across ranks), then C = A x B on every rank.",
        dim_names=("M", "K", "N"), verify_shapes=(Shape((256, 256, 256)),), bench_shapes=(SHAPE,),
        folder=Path(__file__).parent, plugin_source="none.cu", seed_source="none.cu", space=_space, render=render,
        check_shape=_check_shape, flops=lambda s, w: 2.0 * s.dims[0] * s.dims[1] * s.dims[2],
        comm_bytes=lambda s, w: (w - 1) / w * s.dims[0] * s.dims[1] * 2.0, libraries=(),
    )


def test_render_distinguishes_points_and_keeps_markers():
    space = _space(TOPOLOGY)
    a, b = list(space.points())[:2]
    ca, cb = render(a), render(b)
    assert ca != cb
    assert ca.count("EVOLVE-BLOCK-START") == 1 and ca.count("EVOLVE-BLOCK-END") == 1


def test_render_passes_the_real_static_check():
    from cuco.evaluate.static import check_static

    for p in list(_space(TOPOLOGY).points())[:20]:
        r = check_static(render(p))
        assert r.passed, r.reason


def test_model_quantities_match_the_anchor_shape():
    w = make_workload()
    assert w.comm_bytes(SHAPE, 2) == 64 * 1024 * 1024  # 64 MiB received per rank, as in the torch anchor
    assert abs(w.flops(SHAPE, 2) - 1.0995e12) / 1.0995e12 < 1e-3
