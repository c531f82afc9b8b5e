"""Problem sizes: a workload's Shape, and the error for a size it cannot run."""

from __future__ import annotations

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
