"""GEMM+AllGather on the kit renders the same kernels and launch code as before it (golden hashes)."""

from __future__ import annotations

import hashlib
import importlib
import json
import re
from pathlib import Path

from cuco.design_space import Topology
from cuco.workloads.gemm_allgather import WORKLOAD

GOLDEN = Path(__file__).parent / "golden" / "gemm_allgather_blocks.json"
render_module = importlib.import_module("cuco.workloads.gemm_allgather.render")


def normalise(code: str) -> str:
    """Comments removed, whitespace collapsed: what the compiler sees, as text."""
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return " ".join(code.split())


def test_every_point_renders_the_pre_kit_kernels_and_launch_code():
    golden = json.loads(GOLDEN.read_text())["sha256"]
    points = list(WORKLOAD.space(Topology(world=2)).points())
    assert sorted(p.label() for p in points) == sorted(golden)
    changed = [p.label() for p in points
               if hashlib.sha256(normalise(render_module._block(p)).encode()).hexdigest() != golden[p.label()]]
    assert not changed, f"{len(changed)} points render different code than before the kit: {changed[:5]}"


def test_block_holds_the_rendered_kernels():
    p = next(iter(WORKLOAD.space(Topology(world=2)).points()))
    assert normalise(render_module._block(p)) in normalise(WORKLOAD.render(p))
