"""A user's program as the search sees a workload: a name, a description for prompts, a design space, a
render function and the host code the candidates are measured against."""

from __future__ import annotations

from pathlib import Path

import attrs

from cuco.candidate import Candidate, LevelResult
from cuco.design_space import DesignSpace, Directives, Topology
from cuco.fastpath.model import Analysis
from cuco.fastpath.render import prompt_text
from cuco.program import space as program_space
from cuco.fastpath.verify import BuildOptions
from cuco.program.source import HostProgram


@attrs.frozen
class ProgramWorkload:
    """`cuco run prog.cu`'s problem: the program's rewrite at each design point."""

    program: HostProgram
    observed_analysis: Analysis = attrs.field(eq=False, repr=False)
    default_world: int = 1

    @classmethod
    def load(cls, path: str | Path, build: BuildOptions = BuildOptions()) -> "ProgramWorkload":
        """The workload of the host program at `path` (built with `build`); raises ProgramError for a program cuco
        cannot run."""
        program = HostProgram.load(path, build)
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

    def render(self, point: Directives) -> str:
        """The program rewritten onto the GPU at `point`."""
        return program_space.render(self.program.observed, self.observed_analysis, point)

    def original(self, fastest: Candidate) -> Candidate:
        """The user's program as the run's best when no rewrite beat it: its time is the host time measured in
        the same timed rounds as `fastest` (the fastest verified rewrite), so its speedup is exactly 1.0."""
        bench = fastest.results["bench"]
        host_ms = fastest.metrics["host_ms"]
        metrics = {"time_ms": host_ms, "host_ms": host_ms, "speedup": 1.0,
                   "fastest_rewrite_ms": fastest.metrics["time_ms"],
                   "fastest_rewrite_speedup": fastest.metrics["speedup"]}
        if "cold_ms" in fastest.metrics:   # the original's own first region, from the same rounds
            metrics["cold_ms"] = metrics["cold_time_ms"] = fastest.metrics["cold_ms"]
        data = {**bench.data, "runs_ms": bench.data.get("host_runs_ms", []), "fastest_rewrite": fastest.id,
                "fastest_rewrite_point": fastest.directives.label() if fastest.directives else fastest.mutation}
        itself = {"how": "the reference itself (the rounds time it beside every rewrite)"}
        results = {level: LevelResult(level, True, "", 0.0, itself) for level in ("static", "compile", "verify")}
        results["bench"] = attrs.evolve(bench, data=data)
        return Candidate(code=self.program.text, workload=self.name, mutation="original", metrics=metrics,
                         fitness=1.0, results=results,
                         feedback=(f"Your program as it is: no verified rewrite was faster (the fastest, "
                                   f"{data['fastest_rewrite_point']}, took {fastest.metrics['time_ms']:.3f} ms "
                                   f"against {host_ms:.3f} ms in the same rounds)."))

    def fast_path(self, topology: Topology) -> Candidate:
        """The fast path's candidate: the rewrite at the space's conservative point."""
        point = self.space(topology).conservative()
        return Candidate(code=self.render(point), workload=self.name, directives=point, mutation="fastpath")
