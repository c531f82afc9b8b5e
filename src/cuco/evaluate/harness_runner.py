"""The seam between the harness cascade and what it runs: what the cascade needs of a workload, and the runner
of one harness process (this machine's, or a test's fake)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, Sequence

from cuco.kit.compute import CompiledWorkload
from cuco.shape import Shape
from cuco.toolchain import Toolchain


class HarnessWorkload(CompiledWorkload, Protocol):
    """What the harness cascade needs of a workload (cuco.workload.Workload has it all)."""

    default_world: int

    def seed_code(self) -> str:
        """The host-driven seed, timed beside every L3 batch."""

    def plugin_path(self) -> Path:
        """The harness plugin's source file."""

    def resolve_shape(self, given: Shape | str | Sequence[int] | None, world: int, which: str = "bench") -> Shape:
        """`given` checked for `world`, or the first shape of `which` that `world` can run."""


class HarnessRunner(Protocol):
    """Runs one harness process for a request (a cuco.harness.runner.HarnessRequest) and returns its
    HarnessResult; tests give the cascade a fake one."""

    def run(self, request: Any, toolchain: Toolchain) -> Any:
        """The harness's result for `request` (raises CucoError when the process itself fails)."""


class LocalHarness:
    """The harness runner of this machine: cuco.harness.runner.run_harness."""

    def run(self, request: Any, toolchain: Toolchain) -> Any:
        """One harness process on this machine."""
        from cuco.harness.runner import run_harness

        return run_harness(request, toolchain=toolchain)
