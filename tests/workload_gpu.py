"""Helpers of the workloads' GPU tests: a workload's link options, its plugin, compiled candidates, and a
verification run through the harness in the cascade's L2 mode (two seeds, delayed arrival)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def link(wl: Any):
    """How plugin, seed and candidates of `wl` compile and link (its compute library built once, cached)."""
    from cuco.kit.compute import link_options
    from cuco.toolchain import default_toolchain

    return link_options(wl, default_toolchain())


def build_plugin(wl: Any) -> Path:
    from cuco.harness.build import build_shared

    lk = link(wl)
    return build_shared(wl.plugin_path(), lk.libraries, include_dirs=lk.include_dirs, extra=lk.extra)


def compile_codes(wl: Any, codes: list[str]) -> list[Path]:
    """Shared objects of `codes` (candidates of `wl`); fails the test with the first compile errors."""
    from cuco.evaluate.compile import Compiler

    lk = link(wl)
    outcomes = Compiler().compile_many(codes, lk.libraries, lk.include_dirs, lk.extra)
    bad = [o.log_excerpt for o in outcomes if not o.ok]
    assert not bad, bad[:2]
    return [o.so_path for o in outcomes]


def verify(plugin: Path, sos: list[Path], dims: tuple[int, ...], world: int, seeds=(1, 2), mode: str = "thread",
           timeout_s: float = 60) -> dict[Path, Any]:
    """Each candidate's verification result at `dims`, under delayed arrival, by shared-object path."""
    from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US
    from cuco.harness.runner import HarnessRequest, run_harness

    res = run_harness(HarnessRequest(plugin, sos, dims, world=world, seeds=seeds, verify=True, bench=False,
                                     timeout_s=timeout_s, delay_comm_us=DEFAULT_VERIFY_DELAY_US, mode=mode))
    return {Path(r.path): r for r in res.candidates}


def verify_names(wl: Any, names: list[str], world: int) -> list[str]:
    """The named verify shapes of `wl` that world size `world` can split (a test needs at least one)."""
    from cuco.workload import ShapeError

    ok = []
    for name in names:
        try:
            wl.check_shape(wl.parse_shape(name), world)
        except ShapeError:
            continue
        ok.append(name)
    assert ok, f"none of {names} runs at world {world}"
    return ok
