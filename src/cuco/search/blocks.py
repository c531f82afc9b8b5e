"""EVOLVE-BLOCKs: the mutable regions of a candidate. Code outside them is frozen and always comes from the parent."""

from __future__ import annotations

import attrs

from cuco.errors import CucoError

START = "EVOLVE-BLOCK-START"
END = "EVOLVE-BLOCK-END"


class BlockError(CucoError, ValueError):
    """EVOLVE-BLOCK markers are missing, unbalanced or nested, or an edit reaches outside them."""


@attrs.frozen
class Skeleton:
    """A program cut at its markers: frozen[0] block[0] frozen[1] ... block[n-1] frozen[n].

    Marker lines belong to the frozen parts, so joining never loses or moves a marker.
    """

    frozen: tuple[str, ...] = attrs.field(converter=tuple)
    blocks: tuple[str, ...] = attrs.field(converter=tuple)

    def __attrs_post_init__(self) -> None:
        if len(self.frozen) != len(self.blocks) + 1:
            raise BlockError(f"a skeleton with {len(self.blocks)} blocks needs {len(self.blocks) + 1} frozen parts")

    def join(self) -> str:
        """The whole program: the frozen parts and blocks in order."""
        out = [self.frozen[0]]
        for block, frozen in zip(self.blocks, self.frozen[1:]):
            out.append(block)
            out.append(frozen)
        return "".join(out)

    def with_blocks(self, blocks: tuple[str, ...] | list[str]) -> "Skeleton":
        """The same frozen code around new block bodies (the count must match)."""
        blocks = tuple(blocks)
        if len(blocks) != len(self.blocks):
            raise BlockError(f"expected {len(self.blocks)} EVOLVE-BLOCK(s), got {len(blocks)}; rewrite every "
                             "block, in order, each between its EVOLVE-BLOCK-START and EVOLVE-BLOCK-END lines")
        return Skeleton(self.frozen, tuple(_ends_with_newline(b) for b in blocks))

    def block_spans(self) -> list[tuple[int, int]]:
        """[start, end) character offsets of each block body in join()."""
        spans, pos = [], len(self.frozen[0])
        for block, frozen in zip(self.blocks, self.frozen[1:]):
            spans.append((pos, pos + len(block)))
            pos += len(block) + len(frozen)
        return spans


def _ends_with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def split(code: str, require: bool = True) -> Skeleton:
    """Cut `code` at its marker lines. With require=False, code without markers is one frozen part."""
    frozen: list[str] = []
    blocks: list[str] = []
    current: list[str] = []
    inside = False
    for lineno, line in enumerate(code.splitlines(keepends=True), 1):
        if START in line:
            if inside:
                raise BlockError(f"line {lineno}: EVOLVE-BLOCK-START inside another block; blocks do not nest")
            current.append(line)
            frozen.append("".join(current))
            current, inside = [], True
        elif END in line:
            if not inside:
                raise BlockError(f"line {lineno}: EVOLVE-BLOCK-END without a matching EVOLVE-BLOCK-START")
            blocks.append("".join(current))
            current, inside = [line], False
        else:
            current.append(line)
    if inside:
        raise BlockError("an EVOLVE-BLOCK-START has no EVOLVE-BLOCK-END; close every block")
    frozen.append("".join(current))
    if require and not blocks:
        raise BlockError("the program has no EVOLVE-BLOCK; mark mutable code with EVOLVE-BLOCK-START/END lines")
    return Skeleton(tuple(frozen), tuple(blocks))


def extract_blocks(text: str) -> list[str]:
    """The block bodies in free text (an LLM reply): everything between each START and END marker line."""
    return list(split(text, require=False).blocks)


def evolve_text(code: str) -> str:
    """The mutable part of a program (all block bodies), or the whole program if it has no markers."""
    try:
        sk = split(code, require=False)
    except BlockError:
        return code
    return "".join(sk.blocks) if sk.blocks else code
