"""Problem sizes: a workload's Shape, and the error for a size it cannot run."""

from __future__ import annotations

from typing import Mapping, Sequence

import attrs

from cuco.errors import CucoError


class ShapeError(CucoError, ValueError):
    """A problem size that the workload cannot run (e.g. M not divisible by the world size)."""


@attrs.frozen
class Shape:
    """Problem sizes, named by the workload's dim_names (e.g. M, K, N)."""

    dims: tuple[int, ...] = attrs.field(converter=tuple)

    def __str__(self) -> str:
        return "x".join(map(str, self.dims))


def dims_in(text: str) -> tuple[int, ...]:
    """The integers of a shape written 'a,b,c' or 'axbxc' (blank parts skipped); ValueError where one is not."""
    return tuple(int(p) for p in text.replace("x", ",").split(",") if p.strip())


def parse_named(text: str | Sequence[int], named: Mapping[str, Shape], workload: str, dim_names: Sequence[str],
                meaning: str) -> Shape:
    """A shape of `named` by name, or len(dim_names) integers ('a,b,c', 'axbxc' or a sequence); ShapeError naming
    the known names and what the integers mean (`meaning`) where it is neither."""
    n, names = len(dim_names), ",".join(dim_names)
    if isinstance(text, str):
        key = text.strip()
        if key in named:
            return named[key]
        try:
            dims = dims_in(key)
        except ValueError:
            raise ShapeError(f"unknown {workload} shape {text!r}; known: {', '.join(named)} (or {n} integers "
                             f"{names}: {meaning})") from None
    else:
        dims = tuple(int(d) for d in text)
    if len(dims) != n:
        raise ShapeError(f"{workload} takes {n} sizes {names} ({meaning}); got {text!r}")
    return Shape(dims)
