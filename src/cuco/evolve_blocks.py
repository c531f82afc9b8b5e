"""The EVOLVE-block grammar: the mutable regions of a program, and the frozen text around them.

A marker is a `//` line comment that stands alone on its line and reads `// EVOLVE-BLOCK-START` or
`// EVOLVE-BLOCK-END`, optionally followed by a label. Markers are read as the compiler reads the text
(digraphs, trigraphs and line splices resolved; comments and literals told apart), so a marker word inside a
`/* */` comment or a string literal is ordinary text: the compiler never sees a marker there either.

Every other form is an error that names its line (BlockError):
- a marker comment after code on the same line;
- an EVOLVE-BLOCK-END without an open block (a stray END);
- an EVOLVE-BLOCK-START inside an open block (blocks do not nest);
- an EVOLVE-BLOCK-START never closed;
- no block at all, where one is required.

The program splits into frozen[0] block[0] frozen[1] ... block[n-1] frozen[n]; marker lines belong to the frozen
parts, so joining never loses or moves a marker. Lines end at '\\n' only, as for the compiler.
"""

from __future__ import annotations

import re

import attrs

from cuco.errors import CucoError
from cuco.evaluate.l0_text import lex, normalise

START = "EVOLVE-BLOCK-START"
END = "EVOLVE-BLOCK-END"
#: The marker lines as written by every renderer.
START_LINE = "// " + START
END_LINE = "// " + END

_MARKER = re.compile(r"//[ \t]*EVOLVE-BLOCK-(START|END)\b")
_LINE = re.compile(r"[^\n]*\n|[^\n]+")


class BlockError(CucoError, ValueError):
    """EVOLVE-BLOCK markers are missing, unbalanced, nested or not on a line of their own."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line
        self.reason = message


@attrs.frozen
class Marker:
    """One marker: its 1-based line, 'START' or 'END', and the offset of its `//` in the program."""

    line: int
    kind: str
    offset: int


@attrs.frozen
class Skeleton:
    """A program cut at its markers: frozen[0] block[0] frozen[1] ... block[n-1] frozen[n]."""

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
                             f"block, in order, each between its {START} and {END} lines")
        return Skeleton(self.frozen, tuple(_ends_with_newline(b) for b in blocks))

    def block_spans(self) -> list[tuple[int, int]]:
        """[start, end) character offsets of each block body in join()."""
        spans, pos = [], len(self.frozen[0])
        for block, frozen in zip(self.blocks, self.frozen[1:]):
            spans.append((pos, pos + len(block)))
            pos += len(block) + len(frozen)
        return spans

    def block_lines(self) -> list[tuple[int, int]]:
        """(START line, END line), 1-based, of each block in join()."""
        out, newlines = [], 0
        for block, frozen in zip(self.blocks, self.frozen):
            newlines += frozen.count("\n")  # a frozen part before a block ends with its START line
            start = newlines
            newlines += block.count("\n")
            out.append((start, newlines + 1))
        return out


def _ends_with_newline(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


def markers(code: str) -> list[Marker]:
    """Every marker of `code`, in order; raises BlockError for a marker comment that does not stand alone."""
    if START not in code and END not in code:
        return []
    # Normalising keeps line numbers, and offsets up to the first change; markers are found in the text the
    # compiler reads, and their offsets are taken again from the program's own lines.
    seen = normalise(code)
    starts = [0] + [m.end() for m in re.finditer("\n", code)]
    seen_starts = [0] + [m.end() for m in re.finditer("\n", seen)]
    out: list[Marker] = []
    for offset in lex(seen).line_comments:
        m = _MARKER.match(seen, offset)
        if not m:
            continue
        line = seen.count("\n", 0, offset) + 1
        if seen[seen_starts[line - 1]:offset].strip():
            raise BlockError(f"the {m.group(0)[2:].strip()} comment follows code; a marker stands alone on its "
                             "line", line)
        own = code[starts[line - 1]:starts[line] if line < len(starts) else len(code)]
        out.append(Marker(line, m.group(1), starts[line - 1] + max(own.find("//"), 0)))
    return out


def split(code: str, require: bool = True) -> Skeleton:
    """Cut `code` at its markers (see the module's rules). With require=False, code without markers is one
    frozen part."""
    found = markers(code)
    frozen: list[str] = []
    blocks: list[str] = []
    current: list[str] = []
    open_line = 0
    pending = iter(found)
    nxt = next(pending, None)
    for lineno, m in enumerate(_LINE.finditer(code), 1):
        line = m.group(0)
        if nxt is None or nxt.line != lineno:
            current.append(line)
            continue
        kind, nxt = nxt.kind, next(pending, None)
        if kind == "START":
            if open_line:
                raise BlockError(f"{START} inside the block opened at line {open_line}; blocks do not nest: "
                                 f"close it with {END} first", lineno)
            current.append(line)
            frozen.append("".join(current))
            current, open_line = [], lineno
        else:
            if not open_line:
                raise BlockError(f"{END} without a matching {START}", lineno)
            blocks.append("".join(current))
            current, open_line = [line], 0
    if open_line:
        raise BlockError(f"{START} is never closed by {END}", open_line)
    frozen.append("".join(current))
    if require and not blocks:
        raise BlockError(f"no EVOLVE block: mark the mutable code with {START_LINE} and {END_LINE} lines")
    return Skeleton(tuple(frozen), tuple(blocks))


def bodies(text: str) -> list[str]:
    """The block bodies of `text` (an LLM reply, say); text without markers has none."""
    return list(split(text, require=False).blocks)


def evolve_text(code: str) -> str:
    """The mutable part of a program (all block bodies), or the whole program if it has no (well-formed) blocks."""
    try:
        sk = split(code, require=False)
    except BlockError:
        return code
    return "".join(sk.blocks) if sk.blocks else code


def wrap(text: str, label: str = "") -> str:
    """`text` (whole lines) inside one block, with `label` after each marker."""
    tag = f" {label}" if label else ""
    body = text if text.endswith("\n") else text + "\n"
    return f"{START_LINE}{tag}\n{body}{END_LINE}{tag}\n"
