"""EVOLVE-block layout of a rendered candidate: frozen head, one mutable block, frozen tail."""

from __future__ import annotations

from cuco.kit.template import TemplateError

EVOLVE_START = "// EVOLVE-BLOCK-START"
EVOLVE_END = "// EVOLVE-BLOCK-END"


def assemble(head: str, block: str, tail: str) -> str:
    """One candidate source: `head`, the block between EVOLVE markers, `tail`.

    The head and tail must be the same for every design point of a workload (the static check compares them
    byte for byte with the parent's), so anything that names the point belongs in `block`.
    """
    for name, part in (("head", head), ("block", block), ("tail", tail)):
        if EVOLVE_START in part or EVOLVE_END in part:
            raise TemplateError(f"the {name} of a candidate holds an EVOLVE marker; only assemble() writes them")
    return (head.rstrip("\n") + "\n" + EVOLVE_START + "\n" + block.strip("\n") + "\n" + EVOLVE_END + "\n"
            + tail.lstrip("\n"))


def split(code: str) -> tuple[str, str, str]:
    """(head, block, tail) of a candidate with exactly one EVOLVE block; the markers belong to neither."""
    if code.count(EVOLVE_START) != 1 or code.count(EVOLVE_END) != 1:
        raise TemplateError("a rendered candidate has exactly one EVOLVE-BLOCK-START and one EVOLVE-BLOCK-END")
    if code.index(EVOLVE_END) < code.index(EVOLVE_START):
        raise TemplateError("EVOLVE-BLOCK-END comes before EVOLVE-BLOCK-START")
    head, rest = code.split(EVOLVE_START, 1)
    block, tail = rest.split(EVOLVE_END, 1)
    return head, block, tail


def frozen_text(code: str) -> str:
    """Everything outside the EVOLVE block (what must be identical across design points)."""
    head, _block, tail = split(code)
    return head + EVOLVE_START + EVOLVE_END + tail
