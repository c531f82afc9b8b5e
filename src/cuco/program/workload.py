"""A user's program as a run's Problem (cuco.problem): a name, a description for prompts, a design space, a
render function, the fast path's rewrite as its seed, and the program runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import attrs

from cuco.candidate import Candidate
from cuco.design_space import DesignSpace, Directives, Topology
from cuco.errors import CucoError
from cuco.fastpath.model import Analysis
from cuco.fastpath.render import prompt_text
from cuco import reference_best
from cuco.program import space as program_space
from cuco.fastpath.verify import BuildOptions
from cuco.problem import Runner, Say
from cuco.program.source import HostProgram, ProgramError

#: How best/kernel.cu builds (best.json's "build").
BEST_BUILD = ("nvcc -std=c++17 -arch=sm_90 -I<cuco>/csrc/include -I<program dir> kernel.cu -lnccl "
              "(the observation header is inert unless CUCO_OBSERVE_DIR is set)")


@attrs.frozen
class ProgramWorkload:
    """`cuco run prog.cu`'s problem: the program's rewrite at each design point."""

    program: HostProgram
    observed_analysis: Analysis = attrs.field(eq=False, repr=False)
    default_world: int = 1
    kind: ClassVar[str] = "program"

    @classmethod
    def load(cls, path: str | Path, build: BuildOptions = BuildOptions(), launcher: str = "auto") -> "ProgramWorkload":
        """The workload of the host program at `path` (built with `build`, its ranks started as `launcher` says:
        source.LAUNCHERS); raises ProgramError for a program cuco cannot run."""
        program = HostProgram.load(path, build, launcher)
        return cls(program, program.observed_analysis())

    @property
    def name(self) -> str:
        """The program's name, made from its file name."""
        return self.program.name

    @property
    def description(self) -> str:
        """The problem as the LLM prompts describe it: the program, what to keep, and its analysis."""
        return (f"The user's host program {self.program.path.name} ({self.program.analysis.launch_model}), rewritten "
                "so that its collectives run as device-initiated LSA kernels. Keep its results identical; the "
                "timed region is between cuco_region_begin and cuco_region_end. " + program_space.MEANINGS + "\n"
                + prompt_text(self.program.analysis))

    def seed_code(self) -> str:
        """The reference: the original program, observed."""
        return self.program.observed

    def space(self, topology: Topology) -> DesignSpace:
        """The design space of a program on `topology`."""
        return program_space.program_space(topology, self.program.analysis.kinds())

    def render(self, point: Directives, topology: Topology | None = None) -> str:
        """The program rewritten onto the GPU at `point`; IllegalPointError when the point breaks a rule of the
        space on `topology` (the run's; None: Topology())."""
        self.space(topology if topology is not None else Topology()).validate(point)
        return program_space.render(self.program.observed, self.observed_analysis, point)

    def seed(self, topology: Topology, work_dir: Path, say: Say) -> Candidate:
        """The fast path's rewrite at the space's conservative point (nothing is built: `work_dir` is unused)."""
        say("cuco: fast path (rule-based, no LLM) on the program ...")
        return self.fast_path(topology)

    def runner(self, world: int, shape: str | None = None, executor: Any = None) -> Runner:
        """The program runner at `world` on `executor`'s GPUs; the sizes are the program's own, so `shape` is
        None or what a run recorded for it ('program')."""
        from cuco.program.evaluator import ProgramEvaluator

        if shape not in (None, ProgramEvaluator.bench_shape):
            raise CucoError("a program's sizes are its own; drop --shape")
        return ProgramEvaluator(self.program, world=world, executor=executor)

    def remote_runner(self, world: int, shape: str | None, address: str | None) -> Runner:
        """None: a program runs on this host only."""
        raise CucoError("--executor ray runs workloads; run a program with the local executor")

    def best_of(self, fastest: Candidate) -> Candidate:
        """Never slower than the program: the fastest verified rewrite where it beat the program, else the
        program itself (cuco.reference_best)."""
        return reference_best.best_of(fastest, self.program.text, self.name, "Your program")

    def confirm(self, fastest: Candidate, runner: Runner) -> Candidate:
        """A rewrite that beat the program in the search's rounds, re-timed against it in fresh interleaved rounds
        (ProgramEvaluator.retime: every rewrite run's read-backs checked) before it is offered: a win within the noise
        between processes does not make the rewrite the best. The verdict goes into its metrics (`record_*`);
        a rewrite that fails or reads back other bytes there gets `record_faster` 0 and says why."""
        m = fastest.metrics
        if fastest.mutation == "original" or "record_faster" in m or not m.get("speedup", 0.0) > 1.0:
            return fastest
        try:
            got = runner.retime(fastest.code)
        except ProgramError as exc:
            said = " ".join(str(exc).split())[:600]   # one line: the best's feedback quotes it
            return attrs.evolve(fastest, metrics={**m, "record_faster": 0.0},
                                feedback=f"{fastest.feedback}\n{reference_best.NOT_OFFERED}{said}")
        record = {k: float(v) for k, v in got.to_dict().items() if isinstance(v, (int, float))}
        if not got.faster:
            return attrs.evolve(fastest, metrics={**m, **record})
        # offered: its figures are the fresh rounds' (the search's stay as search_*), fitness (its rank) unchanged
        searched = {f"search_{k}": m[k] for k in ("time_ms", "host_ms", "speedup") if k in m}
        return attrs.evolve(fastest, metrics={**m, **record, **searched, "time_ms": got.best_ms,
                                              "host_ms": got.host_ms, "speedup": got.speedup})

    def provenance(self, best: Candidate) -> dict[str, Any]:
        """The original's path, whether kernel.cu is the program unchanged, and how it builds."""
        return {"original": str(self.program.path.resolve()), "is_original": best.mutation == "original",
                "build": BEST_BUILD}

    def fast_path(self, topology: Topology) -> Candidate:
        """The fast path's candidate: the rewrite at the space's conservative point."""
        point = self.space(topology).conservative()
        return Candidate(code=self.render(point), workload=self.name, directives=point, mutation="fastpath")
