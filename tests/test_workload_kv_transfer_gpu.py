"""GPU tests of the KV-transfer workload through the cuco harness at every world size the machine has GPUs for
(`--world` picks; W = 1 keeps both roles on one GPU): the host seed and its fast-path transform verify at the
verify shapes on two seeds under delayed arrival (the cascade's L2 mode), so do the LSA points of the covering
sample (each check also runs the decode step's attention over the received cache through the decode block table),
and the fixtures (a skipped block, a block in the wrong page, a decode side that never waits) fail. Run with
`pytest -m gpu` on a GPU machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import workload_gpu

from cuco import workloads
from cuco.design_space import Topology
from cuco.kit.sample import covering_points
from cuco.workloads.kv_transfer import fixtures

WL = workloads.get("kv_transfer")
VERIFY = ["verify-kv512", "verify-kv768"]


@pytest.fixture(scope="module")
def cascade():
    """The cascade's own build path: the workload's libraries, compute library and plugin, built once."""
    from cuco.evaluate.cascade import Evaluator

    return Evaluator(WL, world=1)


@pytest.fixture(scope="module")
def plugin(cascade) -> Path:
    return cascade.plugin()


def _compile(cascade, codes: list[str]) -> list[Path]:
    link = cascade.link()
    outcomes = cascade.compiler.compile_many(codes, link.libraries, link.include_dirs, link.extra)
    bad = [o.log_excerpt for o in outcomes if not o.ok]
    assert not bad, bad[:2]
    return [o.so_path for o in outcomes]


def _verify(plugin: Path, sos: list[Path], shape: str, world: int, seeds=(1, 2)):
    from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US
    from cuco.harness.runner import HarnessRequest, run_harness

    res = run_harness(HarnessRequest(plugin, sos, WL.parse_shape(shape).dims, world=world, seeds=seeds, verify=True,
                                     bench=False, timeout_s=180, delay_comm_us=DEFAULT_VERIFY_DELAY_US))
    return {Path(r.path): r for r in res.candidates}


@pytest.mark.gpu
def test_seed_and_fast_path_verify(cascade, plugin, world):
    from cuco.fastpath.agent import FastPathAgent
    agent = FastPathAgent(llm=None, check_input=False, run_on_gpu=False, include_dirs=cascade.link().include_dirs)
    fast = agent.run(WL.seed_code()).code
    seed_so, fast_so = _compile(cascade, [WL.seed_code(), fast])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, [seed_so, fast_so], shape, world)
        assert runs[seed_so].status == "ok", (shape, runs[seed_so])
        assert runs[fast_so].status == "ok", (shape, runs[fast_so])


@pytest.mark.gpu
def test_searched_points_verify(cascade, plugin, world):
    """The LSA points of the covering sample: every placement, issuer, scope and chunk size at least once."""
    points = [p for p in covering_points(WL.space(Topology(world=world, gin_available=False))) if p.backend == "lsa"]
    sos = _compile(cascade, [WL.render(p) for p in points])
    for shape in workload_gpu.verify_names(WL, VERIFY, world):
        runs = _verify(plugin, sos, shape, world)
        failed = [(p.label(), runs[so].status, runs[so].message) for p, so in zip(points, sos)
                  if runs[so].status != "ok"]
        assert not failed, f"{len(failed)} of {len(points)} points failed at {shape}: {failed}"


@pytest.mark.gpu
def test_broken_candidates_fail_verification(cascade, plugin, world):
    sos = _compile(cascade, [make() for make in fixtures.FIXTURES.values()])
    runs = _verify(plugin, sos, "verify-kv512", world)
    wrong = [(name, runs[so].status, runs[so].message) for name, so in zip(fixtures.FIXTURES, sos)
             if runs[so].status != "verify_failed"]
    assert not wrong, wrong
    # the decode step's attention over the received cache fails too where a page is missing or misplaced: it reads
    # the poison the plugin wrote where the page belonged
    for name in ("skipped block", "wrong page"):
        msg = runs[sos[list(fixtures.FIXTURES).index(name)]].message
        got = re.search(r"decode attention over them rel_l2=(\S+)", msg)
        assert got and float(got.group(1)) > 0.04, (name, msg)
