"""A user's program as the search sees a workload: a name, a description for prompts, a design space, a
render function and the host code the candidates are measured against."""

from __future__ import annotations

from pathlib import Path

import attrs

from cuco.candidate import Candidate
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

    def fast_path(self, topology: Topology) -> Candidate:
        """The fast path's candidate: the rewrite at the space's conservative point."""
        point = self.space(topology).conservative()
        return Candidate(code=self.render(point), workload=self.name, directives=point, mutation="fastpath")
