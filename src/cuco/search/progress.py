"""Progress reporting, per candidate: the stage each candidate of the batch in flight is in (compile, verify,
bench), how many are evaluated, the time left and the best so far.

Reporters: a tqdm bar on a terminal or in a notebook; plain lines (one per finished candidate, one per
generation) when the output is redirected, so a log holds no bar redraws; or any callable taking a Progress.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Callable, Iterator, Sequence, TextIO

import attrs

from cuco.candidate import Candidate
from cuco.evaluate.base import CandidateEvaluator


@attrs.frozen
class Progress:
    """Where the search stands, as a progress callback receives it after each event."""

    evaluated: int
    total: int
    generation: int
    phase: str
    best_fitness: float | None
    best_label: str
    #: "stage": a candidate entered a stage; "done": a candidate's result is final; "generation": a batch is;
    #: "exhausted": the run stopped short, every legal point evaluated (`total` is then the count reached)
    event: str = "generation"
    candidate: str = ""  # the id of the candidate a "stage" or "done" event is about
    #: candidates of the batch in flight per stage, e.g. (("compile", 3), ("verify", 1))
    stages: tuple[tuple[str, int], ...] = ()
    eta_s: float | None = None  # seconds left at this process's rate so far; None before a candidate finished
    note: str = ""  # with "exhausted": the sentence that says so


ProgressFn = Callable[[Progress], None]


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    minutes, secs = divmod(int(round(seconds)), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{secs:02d}s"


def _best(p: Progress) -> str:
    return f"{p.best_fitness:.4g} ({p.best_label})" if p.best_fitness is not None else "none yet"


def _stages(p: Progress) -> str:
    return ", ".join(f"{stage} {n}" for stage, n in p.stages if n)


def _text(p: Progress) -> str:
    return (f"gen {p.generation} [{p.phase}] {p.evaluated}/{p.total} evaluated, best {_best(p)}, "
            f"about {_duration(p.eta_s)} left")


class Tracker:
    """Follows the candidates of the batch in flight and reports every change to `report` (thread-safe)."""

    def __init__(self, report: ProgressFn, total: int, evaluated: int,
                 clock: Callable[[], float] = time.monotonic):
        self.report, self.total, self._clock = report, total, clock
        self._t0, self._first, self._evaluated = clock(), evaluated, evaluated
        self._stage: dict[str, str] = {}
        self._lock = threading.Lock()
        self._generation, self._phase = 0, ""
        self._best: tuple[float | None, str] = (None, "-")

    def begin(self, batch: Sequence[Candidate], generation: int, phase: str, best: Candidate | None) -> None:
        """A batch is about to be evaluated (its candidates are queued)."""
        with self._lock:
            self._stage = {c.id: "queued" for c in batch}
            self._generation, self._phase = generation, phase
            self._set_best(best)

    def stage(self, candidate_id: str, stage: str) -> None:
        """An evaluator's on_stage hook: `candidate_id` entered `stage` ("done": its result is final)."""
        with self._lock:
            if self._stage.get(candidate_id, "done") == "done":
                return  # not of this batch, or already final
            self._stage[candidate_id] = stage
            if stage == "done":
                self._evaluated += 1
            p = self._progress("done" if stage == "done" else "stage", candidate_id)
        self.report(p)

    def finish(self, batch: Sequence[Candidate], best: Candidate | None) -> None:
        """The batch's results are in: the best so far is updated, then every candidate not yet final is."""
        with self._lock:
            self._set_best(best)
        for c in batch:
            self.stage(c.id, "done")

    def generation(self, evaluated: int, generation: int, phase: str, best: Candidate | None) -> None:
        """A generation ended with `evaluated` candidates evaluated in all."""
        with self._lock:
            self._evaluated, self._generation, self._phase = evaluated, generation, phase
            self._set_best(best)
            p = self._progress("generation", "")
        self.report(p)

    def end(self, evaluated: int, note: str) -> None:
        """The run stops short at `evaluated`, which becomes the total, so that a bar ends full."""
        with self._lock:
            self.total = self._evaluated = evaluated
            p = attrs.evolve(self._progress("exhausted", ""), note=note)
        self.report(p)

    def _set_best(self, best: Candidate | None) -> None:
        if best is not None and best.fitness is not None:
            self._best = (best.fitness, best.directives.label() if best.directives else best.mutation)

    def _progress(self, event: str, candidate: str) -> Progress:
        counts: dict[str, int] = {}
        for s in self._stage.values():
            if s != "done":
                counts[s] = counts.get(s, 0) + 1
        done_here = self._evaluated - self._first
        eta = (self._clock() - self._t0) / done_here * max(self.total - self._evaluated, 0) if done_here else None
        return Progress(self._evaluated, self.total, self._generation, self._phase, self._best[0], self._best[1],
                        event, candidate, tuple(counts.items()), eta)


@contextlib.contextmanager
def following(evaluator: CandidateEvaluator, tracker: Tracker | None) -> Iterator[None]:
    """Point the evaluator's on_stage hook at `tracker` too (after a hook already set, e.g. the run's event log)
    for the duration, then restore it."""
    if tracker is None:
        yield
        return
    from cuco.events_log import chain

    before = evaluator.on_stage
    evaluator.on_stage = chain(before, tracker.stage)
    try:
        yield
    finally:
        evaluator.on_stage = before


class PlainProgress:
    """Plain lines, for logs: one per finished candidate and one per generation; stage moves print nothing."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __call__(self, p: Progress) -> None:
        if p.event == "done":
            line = (f"cuco search {p.evaluated}/{p.total}: candidate {p.candidate[:8]} evaluated; best {_best(p)}; "
                    f"about {_duration(p.eta_s)} left")
        elif p.event == "generation":
            line = _text(p)
        elif p.event == "exhausted":
            line = f"cuco search: {p.note}"
        else:
            return
        print(line, file=self.stream, flush=True)

    def close(self) -> None:
        """Nothing to release; every progress reporter can be closed."""


class TqdmProgress:
    """A tqdm bar over evaluations, moved per candidate, with the stages in flight and the best so far."""

    def __init__(self, tqdm_cls: Any, **bar_kwargs: Any):
        self._tqdm_cls, self._bar_kwargs = tqdm_cls, bar_kwargs
        self._bar: Any = None

    def __call__(self, p: Progress) -> None:
        if self._bar is None:  # started at the first event, at the run's count: a resumed run's rate stays true
            self._bar = self._tqdm_cls(total=p.total, initial=p.evaluated, unit="cand", desc="cuco search",
                                       **self._bar_kwargs)
        best = f"{p.best_fitness:.4g} {p.best_label}" if p.best_fitness is not None else "-"
        stages = _stages(p)
        self._bar.set_postfix_str(f"{stages + ' | ' if stages else ''}best {best} | gen {p.generation} {p.phase}",
                                  refresh=False)
        if p.total != self._bar.total:  # a run that stopped short ends its bar full
            self._bar.total = p.total
        self._bar.update(p.evaluated - self._bar.n)  # refreshes, at most every tqdm mininterval
        if p.event in ("generation", "exhausted"):
            self._bar.refresh()

    def close(self) -> None:
        """Close the bar, if one was started."""
        if self._bar is not None:
            self._bar.close()


def _interactive() -> bool:
    """A terminal or a notebook kernel: where a redrawn bar reads well (a redirected log does not)."""
    return _in_notebook_kernel() or bool(getattr(sys.stderr, "isatty", lambda: False)())


def _in_notebook_kernel() -> bool:
    """True inside a Jupyter kernel's shell; a process that merely imported ipykernel (a test runner that ran a
    notebook, a library) is not one."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        shell = get() if get is not None else None
    except Exception:  # an IPython that cannot answer: not a kernel this code can draw in
        return False
    return type(shell).__name__ == "ZMQInteractiveShell"


def make_progress(spec: str | ProgressFn | None) -> ProgressFn | None:
    """None: silent; 'plain'; 'tqdm'; 'auto': tqdm on a terminal or in a notebook, plain lines otherwise;
    or any callable taking a Progress."""
    if spec is None or callable(spec):
        return spec
    if spec == "plain" or (spec == "auto" and not _interactive()):
        return PlainProgress()
    if spec in ("tqdm", "auto"):
        from tqdm.auto import tqdm  # noqa: PLC0415 (a dependency, loaded only when a bar is wanted)

        return TqdmProgress(tqdm)
    raise ValueError(f"unknown progress {spec!r}; use None, 'plain', 'tqdm', 'auto' or a callable")
