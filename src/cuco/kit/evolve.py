"""EVOLVE-block layout of a rendered candidate: frozen head, one mutable block, frozen tail (the grammar is
cuco.evolve_blocks)."""

from __future__ import annotations

from cuco import evolve_blocks
from cuco.kit.template import TemplateError

EVOLVE_START = evolve_blocks.START_LINE
EVOLVE_END = evolve_blocks.END_LINE


def assemble(head: str, block: str, tail: str) -> str:
    """One candidate source: `head`, the block between EVOLVE markers, `tail`.

    The head and tail must be the same for every design point of a workload (the static check compares them
    byte for byte with the parent's), so anything that names the point belongs in `block`.
    """
    for name, part in (("head", head), ("block", block), ("tail", tail)):
        # Any mention, even one the grammar reads as text, would make the layout ambiguous to a reader.
        if evolve_blocks.START in part or evolve_blocks.END in part:
            raise TemplateError(f"the {name} of a candidate holds an EVOLVE marker; only assemble() writes them")
    return (head.rstrip("\n") + "\n" + EVOLVE_START + "\n" + block.strip("\n") + "\n" + EVOLVE_END + "\n"
            + tail.lstrip("\n"))


def split(code: str) -> tuple[str, str, str]:
    """(head, block, tail) of a candidate with exactly one EVOLVE block; the marker comments belong to neither
    (what follows a marker on its line, its label and newline, stays with the block or the tail)."""
    try:
        found = evolve_blocks.markers(code)
        n = len(evolve_blocks.split(code).blocks)
    except evolve_blocks.BlockError as exc:
        raise TemplateError(f"a rendered candidate has exactly one EVOLVE block: {exc}") from None
    if n != 1:
        raise TemplateError(f"a rendered candidate has exactly one EVOLVE block, not {n}")
    start, end = found
    head_end = start.offset
    block_start = code.index(evolve_blocks.START, start.offset) + len(evolve_blocks.START)
    tail_start = code.index(evolve_blocks.END, end.offset) + len(evolve_blocks.END)
    return code[:head_end], code[block_start:end.offset], code[tail_start:]


def frozen_text(code: str) -> str:
    """Everything outside the EVOLVE block (what must be identical across design points)."""
    head, _block, tail = split(code)
    return head + EVOLVE_START + EVOLVE_END + tail
