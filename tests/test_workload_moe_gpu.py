"""GPU tests of the MoE workload through the cuco harness on min(2, GPUs) ranks: the host seed, its fast-path
transform and every LSA point verify at the verify shapes on two seeds under delayed arrival (the cascade's L2
mode); the fixtures (moe/fixtures.py: a dropped token, a dropped slot output, a wrong gate, an FFN that never
waits for arriving rows, LSA and NVSHMEM, and at W >= 2 outputs copied back before their owners computed them)
must fail. Run with `pytest -m gpu` on a GPU machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import workload_gpu

from cuco import workloads
from cuco.design_space import Topology
from cuco.workloads.moe import fixtures

WL = workloads.get("moe")
VERIFY = ["verify-top2", "verify-top1"]


@pytest.fixture(scope="module")
def plugin() -> Path:
    return workload_gpu.build_plugin(WL)


def _compile(codes: list[str]) -> list[Path]:
    return workload_gpu.compile_codes(WL, codes)


def _verify(plugin: Path, sos: list[Path], shape: str, world: int, seeds=(1, 2), mode="thread"):
    return workload_gpu.verify(plugin, sos, WL.parse_shape(shape).dims, world, seeds, mode, timeout_s=120)


@pytest.mark.gpu
def test_seed_and_fast_path_verify(plugin, world):
    from cuco.fastpath.agent import FastPathAgent

    fast = FastPathAgent(llm=None, check_input=False, run_on_gpu=False).run(WL.seed_code()).code
    seed_so, fast_so = _compile([WL.seed_code(), fast])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, [seed_so, fast_so], shape, world)
        assert runs[seed_so].status == "ok", runs[seed_so]
        assert runs[fast_so].status == "ok", runs[fast_so]


@pytest.mark.gpu
def test_every_lsa_point_verifies(plugin, world):
    points = list(WL.space(Topology(world=world, nodes=1, gin_available=False, nvshmem_available=False)).points())
    sos = _compile([WL.render(p) for p in points])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} of {len(points)} points failed at {shape}: {failed[:5]}"


@pytest.mark.gpu
def test_broken_candidates_fail_verification(plugin, world):
    sos = _compile([make() for make in fixtures.FIXTURES.values()])
    runs = _verify(plugin, sos, "verify-top2", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(fixtures.FIXTURES, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong


@pytest.mark.gpu
def test_outputs_that_never_wait_fail_verification(plugin, world):
    """stream_overlap: the owners store this rank's slots' outputs into its back rows after their (delayed)
    dispatch; a combine that does not wait for the owners' signals reads poison (rank 0's owner starts D / 2 later:
    the delay is staggered by rank). W >= 2 only: at W = 1 no output comes from another rank."""
    if world < 2:
        pytest.skip("no output comes from another rank at W = 1")
    sos = _compile([make() for make in fixtures.MULTI_GPU_FIXTURES.values()])
    runs = _verify(plugin, sos, "verify-top2", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(fixtures.MULTI_GPU_FIXTURES, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong


@pytest.mark.gpu
def test_nvshmem_points_verify_and_one_that_never_waits_fails(plugin, world):
    """backend=nvshmem (process mode at W >= 2: one PE per process): every point verifies under delayed arrival;
    without its own-rows wait the FFN reads rows before their put lands and fails, at any W."""
    mode = "process" if world > 1 else "thread"
    points = [p for p in WL.space(Topology(world=world, nodes=1, gin_available=False)).points()
              if p.backend == "nvshmem"]
    assert len(points) == 3 and fixtures.NVSHMEM_BASE in {p.label() for p in points}
    sos = _compile([WL.render(p) for p in points] + [fixtures.nvshmem_never_waits()])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world, mode=mode)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} NVSHMEM points failed at {shape}: {failed}"
        assert runs[sos[-1]].status == "verify_failed", (shape, runs[sos[-1]])
