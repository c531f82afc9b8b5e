"""The outcome of a run (RunSummary): what `cuco run` prints and writes as summary.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from cuco.candidate import Candidate

@attrs.frozen
class RunSummary:
    """The outcome of a run: enough to print, to store as JSON, and to find the run again."""

    workload: str
    run_dir: Path
    evaluation: str             # "measured" (verified and timed here) or "unmeasured" (checked and compiled only)
    evaluated: int
    counts: dict[str, int]
    best: Candidate | None
    fastpath: Candidate | None
    environment: dict[str, Any]
    exhausted: bool = False     # the search stopped short of the evaluations asked: every legal point was evaluated
    notes: tuple[str, ...] = ()  # plain sentences about how the run went

    @property
    def measured(self) -> bool:
        """True when the run measured its candidates on GPUs (evaluation 'measured')."""
        return self.evaluation == "measured"

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict; candidates as id, point, status, fitness, metrics and feedback."""
        def cand(c: Candidate | None) -> dict[str, Any] | None:
            if c is None:
                return None
            return {"id": c.id, "point": point_of(c), "mutation": c.mutation,
                    "status": c.status, "fitness": c.fitness, "metrics": dict(c.metrics), "feedback": c.feedback}

        return {"workload": self.workload, "run_dir": str(self.run_dir), "evaluation": self.evaluation,
                "evaluated": self.evaluated, "counts": self.counts, "best": cand(self.best),
                "fastpath": cand(self.fastpath), "environment": self.environment, "exhausted": self.exhausted,
                "notes": list(self.notes)}

    def text(self) -> str:
        """The summary as `cuco run` prints it: counts, fast path, best point and its times, run directory."""
        from cuco.evaluate.levels import feedback_headline

        lines = [f"cuco run {self.workload}: {self.evaluated} candidates evaluated "
                 f"({', '.join(f'{k} {v}' for k, v in sorted(self.counts.items()))})"]
        lines += list(self.notes)
        if self.fastpath is not None:
            lines.append(f"fast path: {self.fastpath.status}; {feedback_headline(self.fastpath.feedback)}")
        if not self.measured:
            compiled = self.counts.get("unmeasured", 0)   # only a candidate that compiled reaches 'unmeasured'
            lines.append(f"No GPU here: {compiled} of {self.evaluated} candidates passed the static check and "
                         "compiled, none was verified or timed (status 'unmeasured'); run on a host with GPUs to "
                         "measure.")
        elif self.best is None:
            lines.append("No candidate passed verification and timing; see the run database for the reasons.")
        else:
            m = self.best.metrics
            point = point_of(self.best) or f"({self.best.mutation})"
            lines.append(f"best point   {point}")
            if self.best.mutation == "original":
                lines.append(f"             no verified rewrite was faster than the original program (the fastest: "
                             f"{m.get('fastest_rewrite_ms', float('nan')):.3f} ms); best/ holds it unchanged")
            lines.append(f"time         {m.get('time_ms', float('nan')):.3f} ms   "
                         f"(host {m.get('host_ms', float('nan')):.3f} ms, speedup {m.get('speedup', float('nan')):.3f}x)")
            if "bound_ms" in m:
                lines.append(f"bound        {m['bound_ms']:.3f} ms   (compute {m.get('compute_ms', float('nan')):.3f}, "
                             f"comm {m.get('comm_ms', float('nan')):.3f})")
            if "overlap_efficiency" in m:
                lines.append(f"overlap eff  {m['overlap_efficiency']:.3f}   (T_host - T) / (T_host - T_bound)")
            env = self.environment
            lines.append(f"measured on  {env.get('device', '?')}, NCCL {env.get('nccl_version', '?')}, {env.get('date', '')}")
        lines.append(f"run dir      {self.run_dir}")
        return "\n".join(lines)


def point_of(c: Candidate) -> str | None:
    """A candidate's design point label; 'original' for the reference itself (a user's program, a workload's host
    seed); None for a point-less edit."""
    if c.mutation == "original":
        return "original"
    return c.directives.label() if c.directives else None
