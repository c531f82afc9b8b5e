"""Progress reporting: a callback per generation; a tqdm bar when tqdm is installed, else plain lines."""

from __future__ import annotations

import sys
from typing import Any, Callable, TextIO

import attrs


@attrs.frozen
class Progress:
    """Where the search stands after a generation, as a progress callback receives it."""

    evaluated: int
    total: int
    generation: int
    phase: str
    best_fitness: float | None
    best_label: str


ProgressFn = Callable[[Progress], None]


def _text(p: Progress) -> str:
    best = f"{p.best_fitness:.4g} ({p.best_label})" if p.best_fitness is not None else "none yet"
    return f"gen {p.generation} [{p.phase}] {p.evaluated}/{p.total} evaluated, best {best}"


class PlainProgress:
    """One line per generation."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __call__(self, p: Progress) -> None:
        print(_text(p), file=self.stream, flush=True)

    def close(self) -> None:
        """Nothing to release; every progress reporter can be closed."""
        pass


class TqdmProgress:
    """A tqdm bar over evaluations with the best-so-far as its postfix."""

    def __init__(self, tqdm_cls: Any):
        self._tqdm_cls = tqdm_cls
        self._bar: Any = None

    def __call__(self, p: Progress) -> None:
        if self._bar is None:
            self._bar = self._tqdm_cls(total=p.total, initial=0, unit="cand", desc="cuco search")
        self._bar.n = p.evaluated
        best = f"{p.best_fitness:.4g}" if p.best_fitness is not None else "-"
        self._bar.set_postfix_str(f"gen {p.generation} {p.phase} best {best} {p.best_label}")
        self._bar.refresh()

    def close(self) -> None:
        """Close the bar, if one was started."""
        if self._bar is not None:
            self._bar.close()


def make_progress(spec: str | ProgressFn | None) -> ProgressFn | None:
    """None: silent; 'plain'; 'tqdm' (plain if tqdm is missing); 'auto' = 'tqdm'; or any callable."""
    if spec is None or callable(spec):
        return spec
    if spec == "plain":
        return PlainProgress()
    if spec in ("tqdm", "auto"):
        try:
            from tqdm.auto import tqdm  # noqa: PLC0415 (optional)
        except ImportError:
            return PlainProgress()
        return TqdmProgress(tqdm)
    raise ValueError(f"unknown progress {spec!r}; use None, 'plain', 'tqdm', 'auto' or a callable")
