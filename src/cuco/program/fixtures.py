"""Wrong rewrites of a user's program that verification must reject (the GPU tests run them under delayed arrival).

- never_waits: a rewrite at an overlapping point whose EVOLVE blocks drop every `cucoJoin()`, so a kernel reads the
  collective's output before its transfer lands. It changes the blocks only, so it passes the static check against
  the point it came from and only verification under delayed arrival can catch it. The join after the last block is
  frozen text and stays: it comes after the consumers, too late to save them.
- skips_entry_wait: a copy-engine point whose copies do not wait for the entry kernel (the runtime's entry wait
  removed). It edits the frozen runtime, so the static check refuses it as a candidate; a test judges it by
  verification alone (ProgramEvaluator(..., parent_code=lambda c: c.code): the candidate is its own frozen text).
"""

from __future__ import annotations

from cuco.candidate import Candidate
from cuco.design_space import Directives, Topology
from cuco.evolve_blocks import split
from cuco.program.workload import ProgramWorkload

_JOIN = "cucoJoin();"
_ENTRY_WAIT = "CUCOFP_CUDA(cudaStreamWaitEvent(s->copy[i], s->entered, 0));   // the entry wait"


def never_waits(workload: ProgramWorkload, point: Directives, topology: Topology | None = None) -> Candidate:
    """`point`'s rewrite with the joins inside its EVOLVE blocks removed; ValueError when the blocks hold none
    (a deferred point, or a program whose consumers sit outside the blocks)."""
    topology = topology if topology is not None else Topology(world=1)
    code = workload.render(point, topology)
    skeleton = split(code)
    if not any(_JOIN in b for b in skeleton.blocks):
        raise ValueError(f"{workload.name} at {point.label()}: no {_JOIN} inside its EVOLVE blocks to drop; pick a "
                         "stream_overlap point of a program whose consumer follows its collective in one block")
    bad = skeleton.with_blocks([b.replace(_JOIN, "/* no wait */") for b in skeleton.blocks]).join()
    return workload.fast_path(topology).evolve(code=bad, directives=point, mutation="manual")


def skips_entry_wait(workload: ProgramWorkload, point: Directives, topology: Topology | None = None) -> Candidate:
    """`point`'s rewrite (a copy_engine point) with the copies' entry wait removed from the runtime."""
    topology = topology if topology is not None else Topology(world=1)
    code = workload.render(point, topology)
    if code.count(_ENTRY_WAIT) != 1:
        raise ValueError(f"{workload.name} at {point.label()}: the runtime's entry wait is not there once; pick a "
                         "copy_engine point (or update this fixture to the runtime)")
    return workload.fast_path(topology).evolve(code=code.replace(_ENTRY_WAIT, "/* no entry wait */"),
                                               directives=point, mutation="manual")
