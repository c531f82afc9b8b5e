"""GEMM+AllGather on the kit renders the same kernels, launch code and design constants as before it (golden
hashes taken from the pre-kit renderer; see the golden file's "source")."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from cuco.design_space import Topology
from cuco.kit.evolve import split
from cuco.workloads.gemm_allgather import WORKLOAD
from cuco.workloads.gemm_allgather.render import placement_body

GOLDEN = json.loads((Path(__file__).parent / "golden" / "gemm_allgather_blocks.json").read_text())
POINTS = list(WORKLOAD.space(Topology(world=2)).points())


def normalise(code: str) -> str:
    """Comments removed, whitespace collapsed: what the compiler sees, as text."""
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return " ".join(code.split())


def test_same_points_as_before():
    assert sorted(p.label() for p in POINTS) == sorted(GOLDEN["sha256"])


def test_every_point_renders_the_pre_kit_kernels_and_launch_code():
    changed = [p.label() for p in POINTS
               if hashlib.sha256(normalise(placement_body(p)).encode()).hexdigest() != GOLDEN["sha256"][p.label()]]
    assert not changed, f"{len(changed)} points render different kernels than before the kit: {changed[:5]}"


def test_every_point_keeps_its_design_constants_in_the_block():
    for p in POINTS:
        block = split(WORKLOAD.render(p))[1]
        assert normalise(placement_body(p)) in normalise(block), p.label()
        missing = [c for c in GOLDEN["constants"][p.label()] if c not in block]
        assert not missing, (p.label(), missing)
