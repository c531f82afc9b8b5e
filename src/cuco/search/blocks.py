"""EVOLVE-BLOCKs for the search: the mutable regions of a candidate (the grammar is cuco.evolve_blocks). Code
outside them is frozen and always comes from the parent."""

from __future__ import annotations

from cuco.evolve_blocks import END, START, BlockError, Skeleton, bodies, evolve_text, split

__all__ = ["END", "START", "BlockError", "Skeleton", "evolve_text", "extract_blocks", "split"]


def extract_blocks(text: str) -> list[str]:
    """The block bodies in free text (an LLM reply): everything between each START and END marker line."""
    return bodies(text)
