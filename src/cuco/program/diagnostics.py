"""Compiler errors in the user's terms: nvcc's messages about a generated file (the observed program, a rewrite)
are moved onto the user's file and line wherever the generated line is one of the user's lines, and shown whole.

cuco never compiles the user's file in place: it compiles texts it wrote (program.cu in a work folder), whose
lines are the user's lines with others inserted (observe.h's include, region markers, the fast path's runtime, the
rewritten calls). The map from a generated line to the user's is the alignment of the two texts (difflib): a line
that is equal in both, inside an aligned run, is the user's line, and so is a line edited in place.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Mapping

#: nvcc front end `file(line): ...` and host compiler `file:line:col: ...` positions.
_NVCC_AT = r"(?P<file>[^\s():\"]*{name})\((?P<line>\d+)\)"
_GCC_AT = r"(?P<file>[^\s():\"]*{name}):(?P<line>\d+)(?=:)"
#: A line that opens a diagnostic (nvcc: 'error:'/'catastrophic error:', g++: 'error:'), or says how many.
_ERROR_LINE = re.compile(r"(?:\berror\b[^:\n]*:|errors? detected in the compilation|\bundefined reference\b)")
#: At most this many diagnostics are shown (each whole); the rest are counted.
MAX_DIAGNOSTICS = 20


def line_map(generated: str, original: str) -> dict[int, int]:
    """{line in `generated`: line in `original`} (1-based) for every line the two texts share in aligned runs,
    and for lines edited in place (a run of changed lines as long as the user's run it replaces: a rewritten call,
    an edited statement)."""
    a, b = generated.splitlines(), original.splitlines()
    out: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out.update((i1 + k + 1, j1 + k + 1) for k in range(i2 - i1))
    return out


def in_user_terms(log: str, generated_name: str, lines: Mapping[int, int], user_path: Path | str) -> str:
    """`log` with every position in the generated file `generated_name` moved to `user_path`'s line; a position
    with no user line is kept and marked as code cuco generated."""
    name = re.escape(generated_name)
    user = str(user_path)

    def move(m: re.Match[str], gcc: bool) -> str:
        at = int(m.group("line"))
        if at in lines:
            return f"{user}:{lines[at]}" if gcc else f"{user}({lines[at]})"
        where = f"{m.group('file')}:{at}" if gcc else f"{m.group('file')}({at})"
        return f"{where} [code cuco generated around your program, not a line of {Path(user).name}]"

    log = re.sub(_NVCC_AT.format(name=name), lambda m: move(m, False), log)
    log = re.sub(rf'"[^"\s]*{name}"', lambda _m: f'"{user}"', log)   # "N errors detected in the compilation of"
    return re.sub(_GCC_AT.format(name=name), lambda m: move(m, True), log)


def errors(log: str) -> str:
    """The errors of a compiler log, each whole (its line and the source excerpt nvcc prints under it, up to the
    next blank line), at most MAX_DIAGNOSTICS of them; the log's last lines when none is recognised."""
    blocks: list[str] = []
    current: list[str] | None = None
    for line in log.splitlines():
        if _ERROR_LINE.search(line):
            if current:
                blocks.append("\n".join(current))
            current = [line]
        elif current is not None:
            if line.strip():
                current.append(line)
            else:
                blocks.append("\n".join(current))
                current = None
    if current:
        blocks.append("\n".join(current))
    if not blocks:
        return "\n".join(log.strip().splitlines()[-20:]) or "the compiler failed without a message"
    shown = blocks[:MAX_DIAGNOSTICS]
    more = len(blocks) - len(shown)
    return "\n".join(shown) + (f"\n(and {more} more)" if more > 0 else "")
