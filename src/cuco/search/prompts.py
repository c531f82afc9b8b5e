"""Prompts for the LLM mutators. Directive-first: the model names its design point before writing code."""

from __future__ import annotations

from typing import Sequence

from cuco.candidate import LEVELS, NOT_RUN_HERE, Candidate
from cuco.design_space import DesignSpace
from cuco.search import blocks as blk
from cuco.problem import Problem

BACKEND_NOTES = """\
- LSA (NVLink load/store, one node): `ncclDevComm dc` from the harness context; peer memory through
  `ncclGetLsaPointer(window, offset, peer)` (plain loads/stores; 16-byte vector loads with several in flight
  per thread reach ~330 GB/s, and 8 CTAs x 1024 threads already reach ~317 GB/s, so communication needs few SMs).
  Synchronise with `ncclLsaBarrierSession<Coop> bar(coop, dc, ncclTeamLsa(dc), dc.lsaBarrier, index)` and
  `bar.sync(coop, cuda::memory_order_acq_rel)`; every CTA that opens a session needs its own index below
  `lsa_barrier_count` in the candidate's requirements, else the kernel deadlocks. Coop is ncclCoopThread,
  ncclCoopWarp or ncclCoopCta, matching the issuer directive.
- GIN (NIC RDMA, across nodes): one-sided puts with signals; `gin_signal_count` must cover every distinct signal
  id and `gin_required = 1`; the harness reports "unsupported" where no RDMA NIC exists. A flush must use the
  issuer's Coop.
- NVSHMEM: `nvshmem_putmem_signal_nbi` / `nvshmem_signal_wait_until`, device code built with -rdc; only where
  the library is present.
- Placement: fused kernels wait on peers inside the compute kernel, so their grid must be co-resident; per-chunk
  flags (sync_scope=signal) need an epoch that lives on the device (the kit's st->epoch_at, advanced once per
  launch; never ctx->iteration, which a CUDA graph freezes) so that a later launch never reads a stale flag.
- The harness owns main, buffers, timing and verification; the candidate fills the C ABI (requirements, setup,
  launch, teardown) and must be correct for every rank and every chunk size."""

SYSTEM = """\
You improve a multi-GPU CUDA kernel that overlaps computation with device-initiated communication (NCCL device
API). Rules:
1. Begin your reply with one line `DIRECTIVES: {json}` naming the design point your code implements: all five of
   backend, placement, sync_scope, issuer, chunk_bytes (bytes as an integer, 0 = whole buffer). It must be legal.
2. Only code between `EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END` lines may change; everything else is frozen and
   is taken from the current program whatever you write. Keep the marker lines.
3. The program is compiled, verified against an independent reference on several seeds, then timed on every
   rank; a wrong or hanging program scores nothing."""

DIFF_TASK = """\
Propose one focused improvement as SEARCH/REPLACE edits of the current program. Write each edit as
<<<<<<< SEARCH
(exact lines copied from inside an EVOLVE-BLOCK)
=======
(the new lines)
>>>>>>> REPLACE
Each SEARCH must match exactly once and lie wholly inside one EVOLVE-BLOCK."""

FULL_TASK = """\
Rewrite the EVOLVE-BLOCKs of the current program. Output every block, in order, each between its own
`// EVOLVE-BLOCK-START` and `// EVOLVE-BLOCK-END` lines, inside one ```cuda fenced block. Output nothing of the
frozen code."""

CROSS_TASK = """\
Combine the strongest ideas of the programs above into one program with the current program's frozen code.
Output every EVOLVE-BLOCK of the result, in order, each between its own `// EVOLVE-BLOCK-START` and
`// EVOLVE-BLOCK-END` lines, inside one ```cuda fenced block."""

TASKS = {"diff": DIFF_TASK, "full": FULL_TASK, "cross": CROSS_TASK}


def describe(c: Candidate) -> str:
    """Directives, status, fitness and metrics of a candidate in one short paragraph."""
    label = c.directives.label() if c.directives else "unknown point"
    fit = f"{c.fitness:.4g}" if c.fitness is not None else "none"
    metrics = ", ".join(f"{k}={v:.4g}" for k, v in sorted(c.metrics.items()))
    return f"point {label}; status {c.status}; fitness {fit} (higher is better)" + (f"; metrics: {metrics}" if metrics else "")


def feedback(c: Candidate) -> str:
    """What the cascade said about a candidate: each level's verdict and reason."""
    lines = []
    for level in LEVELS:
        r = c.results.get(level)
        if r is None:
            continue
        verdict = "not run here" if r.data.get(NOT_RUN_HERE) else "passed" if r.passed else "FAILED"
        lines.append(f"- {level}: {verdict}" + (f": {r.reason}" if r.reason else ""))
    if c.feedback:
        lines.append(c.feedback)
    return "\n".join(lines) or "(not evaluated yet)"


def _section(title: str, body: str) -> str:
    return f"## {title}\n{body.strip()}\n"


def user_prompt(task: str, workload: Problem, space: DesignSpace, parent: Candidate,
                inspirations: Sequence[Candidate] = (), recommendations: Sequence[str] = (),
                scratchpad: str = "", others: Sequence[Candidate] = (), island_note: str = "") -> str:
    """The user message for one mutation: workload, machine, API notes, lessons, parent, inspirations, task."""
    parts = [
        _section("Workload", workload.description),
        _section("Hardware and design space", space.prompt_text()),
        _section("Backend API notes", BACKEND_NOTES),
    ]
    if island_note:
        parts.append(_section("Focus of this island", island_note))
    if recommendations or scratchpad:
        rec = "\n".join(f"{i}. {r}" for i, r in enumerate(recommendations, 1))
        parts.append(_section("What earlier candidates taught", (scratchpad + "\n" + rec).strip()))
    parts.append(_section("Current program", f"{describe(parent)}\n```cuda\n{parent.code.rstrip()}\n```"))
    parts.append(_section("Cascade feedback on the current program", feedback(parent)))
    for i, other in enumerate(others, 1):
        body = blk.evolve_text(other.code).rstrip()
        parts.append(_section(f"Program {i + 1} to combine", f"{describe(other)}\n```cuda\n{body}\n```"))
    if inspirations:
        lines = []
        for c in inspirations:
            lines.append(f"- {describe(c)}\n```cuda\n{blk.evolve_text(c.code).rstrip()}\n```")
        parts.append(_section("Inspirations (evolve blocks of other evaluated programs)", "\n".join(lines)))
    parts.append(_section("Task", TASKS[task]))
    return "\n".join(parts)


def messages(task: str, workload: Problem, space: DesignSpace, parent: Candidate, **kw) -> list[dict[str, str]]:
    """The system and user messages asking the LLM for `task` on `parent`; raises ValueError for an unknown task."""
    if task not in TASKS:
        raise ValueError(f"unknown prompt task {task!r}; use one of {', '.join(TASKS)}")
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": user_prompt(task, workload, space, parent, **kw)}]


def retry_message(error: str) -> dict[str, str]:
    """Shown to the model after a reply that could not be applied."""
    return {"role": "user", "content": f"Your reply could not be used: {error}\nReply again in the required format, "
                                       "starting with the DIRECTIVES line."}


SUMMARY_SYSTEM = """\
You keep the lab notebook of a search over multi-GPU kernel designs. From the statistics and recent candidates,
write `SCRATCHPAD:` followed by a short paragraph of what is known, then `RECOMMENDATIONS:` followed by at most
five numbered, concrete recommendations (which directive values to try or avoid, and why)."""
