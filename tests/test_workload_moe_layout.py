"""MoE receive-layout arithmetic of moe_dev.cuh (__host__ __device__), compiled for the CPU with nvcc and checked
against the routing for W = 1, 2, 4, 8: segments tile each rank's rows, sources' combine bases match the owners'
segments, rows_bound() holds every rank's rows, and each expert's run in a rank's order list (where owners store
that rank's outputs) starts after the slots of the experts before it."""

import subprocess
from pathlib import Path

import pytest

from cuco.workloads.moe import routing

HERE = Path(routing.__file__).resolve().parent

_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "moe_dev.cuh"
// argv: T E K R W, then W*E counts (cnt_all[p*E + g]). Prints per rank q: rows_bound, then seg_off[(e,p)] for all
// e, p, then for every source p and expert g the combine base segment_offset(owner(g), g % El, p).
// Then for every source p and expert g the start of g's run in p's order list, order_start(p, g).
int main(int argc, char** argv) {
  long T = atol(argv[1]), E = atol(argv[2]), K = atol(argv[3]), R = atol(argv[4]);
  int W = atoi(argv[5]);
  std::vector<int32_t> cnt(W * E);
  for (long i = 0; i < W * E; ++i) cnt[i] = atoi(argv[6 + i]);
  const long El = E / W;
  for (int q = 0; q < W; ++q) {
    printf("bound %d %lld\n", q, (long long)cuco_moe::rows_bound(T, E, K, R, W, q));
    for (long e = 0; e < El; ++e)
      for (int p = 0; p < W; ++p)
        printf("seg %d %ld %d %lld\n", q, e, p, (long long)cuco_moe::segment_offset(cnt.data(), E, W, q, e, p));
  }
  for (int p = 0; p < W; ++p)
    for (long g = 0; g < E; ++g)
      printf("cbase %d %ld %lld\n", p, g, (long long)cuco_moe::segment_offset(cnt.data(), E, W, (int)(g / El), g % El, p));
  for (int p = 0; p < W; ++p)
    for (long g = 0; g < E; ++g)
      printf("ostart %d %ld %lld\n", p, g, (long long)cuco_moe::order_start(cnt.data(), E, p, g));
  return 0;
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    from cuco.toolchain import ToolchainError, default_toolchain

    try:
        tc = default_toolchain()
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    d = tmp_path_factory.mktemp("moe_layout")
    src = d / "drv.cu"
    src.write_text(_DRIVER)
    from cuco.toolchain import csrc_dir

    cmd = [str(tc.nvcc), "-std=c++17", "-O1", f"-I{HERE}", f"-I{csrc_dir() / 'include'}", f"-I{tc.nccl.include}",
           str(src), "-o", str(d / "drv")]
    subprocess.run(cmd, check=True, capture_output=True)
    return d / "drv"


@pytest.mark.parametrize("world", [1, 2, 4, 8])
@pytest.mark.parametrize("tokens,experts,topk,skew", [(64, 8, 2, 3), (48, 16, 4, 1), (40, 8, 1, 5)])
def test_layout_tiles_rows_and_matches_combine(driver, world, tokens, experts, topk, skew):
    spec = routing.RoutingSpec(tokens, experts, topk, skew)
    cnt = routing.received_counts(spec, 11, world)  # [W, E]
    out = subprocess.run([str(driver), *map(str, (tokens, experts, topk, skew, world)), *map(str, cnt.ravel())],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    el = experts // world
    seg, cbase, bound, ostart = {}, {}, {}, {}
    for line in filter(None, out):
        kind, *v = line.split()
        v = list(map(int, v))
        if kind == "bound":
            bound[v[0]] = v[1]
        elif kind == "seg":
            seg[tuple(v[:3])] = v[3]
        elif kind == "ostart":
            ostart[(v[0], v[1])] = v[2]
        else:
            cbase[(v[0], v[1])] = v[2]
    for q in range(world):
        # rows of rank q: expert-major, own tokens first, then q+1, ..., q-1; contiguous and gap-free
        expected, pos = {}, 0
        for e in range(el):
            for i in range(world):
                p = (q + i) % world
                expected[(q, e, p)] = pos
                pos += int(cnt[p, q * el + e])
        assert {k: v for k, v in seg.items() if k[0] == q} == expected
        assert pos <= bound[q], "rows_bound() must hold every row rank q receives"
    for p in range(world):
        for g in range(experts):
            assert cbase[(p, g)] == seg[(g // el, g % el, p)]
            # owner g // el stores segment (g % el, p) as cnt[p, g] rows from here in p's back; runs tile the slots
            assert ostart[(p, g)] == int(cnt[p, :g].sum())
        assert ostart[(p, experts - 1)] + int(cnt[p, experts - 1]) == int(cnt[p].sum())
