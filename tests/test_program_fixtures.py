"""The program's never-waits fixture: it changes the EVOLVE blocks only, so the static level lets it through and
only verification under delayed arrival (tests/test_program_gpu.py) can reject it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuco.design_space import Directives, Topology
from cuco.evaluate.static import check_program
from cuco.program.fixtures import never_waits
from cuco.program.workload import ProgramWorkload

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
OVERLAP = Directives.from_label("lsa/stream_overlap/world/cta/whole/comm_ctas=16/reducescatter=barrier")


@pytest.fixture(scope="module")
def mlp() -> ProgramWorkload:
    return ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")


def test_never_waits_passes_the_static_check_and_drops_the_join_before_the_consumer(mlp):
    good = mlp.render(OVERLAP, Topology(world=1))
    bad = never_waits(mlp, OVERLAP)
    assert bad.code != good and bad.directives == OVERLAP
    assert bad.code.count("cucoJoin();") < good.count("cucoJoin();")
    result = check_program(bad.code, good)
    assert result.passed, result.reason


def test_dropping_every_join_in_the_program_is_refused_by_the_static_check(mlp):
    # the frozen join after the pipeline block belongs to the program, not to the candidate
    good = mlp.render(OVERLAP, Topology(world=1))
    result = check_program(good.replace("cucoJoin();", "/* no wait */"), good)
    assert not result.passed and "outside the EVOLVE blocks" in result.reason



def test_skips_entry_wait_removes_the_runtime_entry_wait_and_is_judged_by_verification_alone(mlp):
    from cuco.program.fixtures import skips_entry_wait

    point = Directives.from_label("lsa/deferred/world/copy_engine/1MiB/comm_ctas=32/reducescatter=barrier")
    good = mlp.render(point, Topology(world=1))
    bad = skips_entry_wait(mlp, point)
    assert "/* no entry wait */" in bad.code and bad.code != good
    assert not check_program(bad.code, good).passed      # as a candidate, the static check refuses it
    assert check_program(bad.code, bad.code).passed       # as its own frozen text, only verification judges it
