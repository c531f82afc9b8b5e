"""The default validity rules, each on a point it refuses, with the rule's name in the reason."""

from __future__ import annotations

from cuco.design_space import DesignSpace, Directives, Topology
from cuco.directives import WHOLE, MiB
from cuco.space_rules import DEFAULT_RULES

FULL = DesignSpace()
MULTI = DesignSpace(topology=Topology(world=16, nodes=2))
#: (space, a point it refuses, the rule that refuses it): one or more per default rule
CASES = [
    (FULL, Directives("lsa", "deferred", "world", "cta", 4 * MiB), "deferred-whole-buffer"),
    (FULL, Directives("lsa", "fused", "signal", "thread", 4 * MiB), "fused-no-thread-issuer"),
    (FULL, Directives("lsa", "stream_overlap", "signal", "warp", WHOLE), "signal-needs-chunks"),
    (MULTI, Directives("lsa", "deferred", "world", "cta", WHOLE), "lsa-single-node"),
    (DesignSpace(topology=Topology(gin_available=False)), Directives("gin", "deferred", "world", "cta", WHOLE),
     "gin-needs-nic"),
    (DesignSpace(topology=Topology(nvshmem_available=False)),
     Directives("nvshmem", "deferred", "world", "cta", WHOLE), "nvshmem-present"),
    (DesignSpace(fused_grid_ctas=264, max_coresident_ctas=132),
     Directives("lsa", "fused", "signal", "warp", 4 * MiB), "fused-co-resident"),
    (FULL, Directives("gin", "stream_overlap", "world", "copy_engine", WHOLE), "copy-engine-transport"),
    (FULL, Directives("lsa", "fused", "world", "copy_engine", 4 * MiB), "copy-engine-transport"),
]


def test_every_default_rule_refuses_its_points_by_name() -> None:
    assert {rule for _, _, rule in CASES} == {r.name for r in DEFAULT_RULES}
    for space, point, rule in CASES:
        assert (space.check(point) or "").startswith(f"[{rule}]"), (point, space.check(point))


def test_neighbours_of_refused_points_are_legal() -> None:
    assert FULL.is_legal(Directives("lsa", "fused", "signal", "warp", WHOLE))  # fused signals per tile
    assert FULL.is_legal(Directives("lsa", "stream_overlap", "signal", "warp", 4 * MiB))
    assert FULL.is_legal(Directives("lsa", "stream_overlap", "world", "copy_engine", WHOLE))
    assert MULTI.is_legal(Directives("lsa", "deferred", "team", "cta", WHOLE))
    outside = FULL.restrict(backends=("gin",)).check(Directives("lsa", "deferred", "world", "cta", WHOLE))
    assert outside and "backend=lsa is outside" in outside and "gin" in outside
