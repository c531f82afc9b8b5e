"""The problem a run solves and the runner that evaluates its candidates: the two interfaces a run talks to.

A built-in or folder workload (cuco.workload.Workload) and a user's host program (cuco.program.workload.
ProgramWorkload) both implement Problem; a run never asks which of the two it holds. Every difference between
them (how the seed is made, what is checked before anything is written, what the run's best is, what best.json
says) is a method here.

    Problem --space(topology)--> DesignSpace --points--> render(point, topology) --> candidate source
            --seed(...)--> the fast path's candidate
            --runner(world, shape)--> Runner: the cascade of levels (static, compile, verify, bench) over the
                                      machinery that runs them (cuco.evaluate.levels)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Protocol

from cuco.candidate import Candidate
from cuco.design_space import DesignSpace, Directives, Topology
from cuco.evaluate.base import StageFn
from cuco.toolchain import Toolchain

#: Where a problem's messages go (the run's on_event).
Say = Callable[[str], None]


class Runner(Protocol):
    """Evaluates candidates of one problem at one world size (a CandidateEvaluator that a run can also check,
    describe and close)."""

    kind: str
    world: int
    on_stage: StageFn | None
    parent_code: Callable[[Candidate], str | None] | None

    @property
    def has_gpu(self) -> bool:
        """True when verification and timing run on this machine."""

    @property
    def toolchain(self) -> Toolchain:
        """The toolchain candidates are compiled with."""

    @property
    def scale(self) -> str:
        """The size the candidates run at, as the run's first line names it ('' when the problem has its own)."""

    def evaluate(self, candidates: list[Candidate]) -> list[Candidate]:
        """The candidates with their level results, metrics and fitness, in the order given."""

    def check_original(self, measured: bool) -> None:
        """Check what the candidates are measured against before anything is written (raises CucoError)."""

    def close(self) -> None:
        """Remove what the runner made for itself (work folders); cached builds stay."""


class Problem(Protocol):
    """What one run optimises: a design space, a rendering of each point, a seed and a runner."""

    name: str
    description: str
    default_world: int
    #: What best.json names the problem's kind ('workload' or 'program').
    kind: str

    def space(self, topology: Topology) -> DesignSpace:
        """The legal design points on `topology`."""

    def render(self, point: Directives, topology: Topology | None = None) -> str:
        """The candidate's source at `point`, checked against the space on `topology` (None: Topology())."""

    def seed_code(self) -> str:
        """The host code the candidates are measured against."""

    def seed(self, topology: Topology, work_dir: Path, say: Say) -> Candidate:
        """The fast path's candidate (with its point where it is a rendering of one), made in `work_dir`."""

    def runner(self, world: int, shape: str | None = None, executor: Any = None) -> Runner:
        """The local runner at `world` on `executor`'s GPUs; `shape` as given or recorded (None: the default)."""

    def remote_runner(self, world: int, shape: str | None, address: str | None) -> Runner:
        """The runner on a Ray cluster at `address` (CucoError where the problem cannot run there)."""

    def best_of(self, fastest: Candidate) -> Candidate:
        """The run's best, given the fastest verified candidate."""

    def confirm(self, fastest: Candidate, runner: Runner) -> Candidate:
        """`fastest` with the verdict of fresh rounds against the reference in its metrics (`record_*`, which
        best_of reads), where the problem re-times a search's winner before offering it; else `fastest` itself."""

    def provenance(self, best: Candidate) -> dict[str, Any]:
        """What best.json says of where `best` comes from, beyond its point, time and verification."""
