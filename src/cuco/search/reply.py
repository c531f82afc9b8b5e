"""Reading an LLM reply: the stated `DIRECTIVES: {json}`, SEARCH/REPLACE edits, rewritten EVOLVE-BLOCKs."""

from __future__ import annotations

import json
import re

import attrs

from cuco.design_space import DesignSpace, Directives, DirectiveError
from cuco.errors import CucoError
from cuco.search import blocks as blk


class ReplyError(CucoError, ValueError):
    """An LLM reply cannot be used; the message is shown to the model on retry, so it says what to fix."""


@attrs.frozen
class Edit:
    """One SEARCH/REPLACE block."""

    search: str
    replace: str


_EDIT = re.compile(r"<{5,}\s*SEARCH[^\n]*\n(.*?)\n?={5,}[^\n]*\n(.*?)\n?>{5,}\s*REPLACE", re.DOTALL)


def parse_directives(text: str, space: DesignSpace) -> Directives:
    """The point named by `DIRECTIVES: {json}`; it must be legal in `space`."""
    if not text.strip():
        raise ReplyError("the reply is empty; answer with a `DIRECTIVES: {json}` line followed by the code")
    at = text.find("DIRECTIVES:")
    if at < 0:
        raise ReplyError("the reply does not state its point: begin with a line `DIRECTIVES: {json}` naming all five "
                         "directives (backend, placement, sync_scope, issuer, chunk_bytes)")
    brace = text.find("{", at)
    if brace < 0:
        raise ReplyError("`DIRECTIVES:` must be followed by a JSON object")
    try:
        data, _ = json.JSONDecoder().raw_decode(text[brace:])
    except json.JSONDecodeError as exc:
        raise ReplyError(f"the DIRECTIVES JSON does not parse ({exc.msg} at column {exc.colno}); write plain JSON") from None
    if not isinstance(data, dict):
        raise ReplyError("DIRECTIVES must be a JSON object")
    try:
        point = Directives.from_dict(data)
    except DirectiveError as exc:
        raise ReplyError(f"DIRECTIVES: {exc}") from None
    reason = space.check(point)
    if reason:
        raise ReplyError(f"DIRECTIVES name an illegal point: {reason}")
    return point


def parse_edits(text: str) -> list[Edit]:
    """Every SEARCH/REPLACE block of the reply, in order."""
    edits = [Edit(m.group(1), m.group(2)) for m in _EDIT.finditer(text)]
    if not edits:
        raise ReplyError("no SEARCH/REPLACE block found; write each edit as\n<<<<<<< SEARCH\n(exact lines of the "
                         "current program)\n=======\n(new lines)\n>>>>>>> REPLACE")
    return edits


def apply_edits(code: str, edits: list[Edit]) -> str:
    """Apply the edits in order; each SEARCH must match exactly once and lie wholly inside one EVOLVE-BLOCK."""
    for i, edit in enumerate(edits, 1):
        if not edit.search.strip():
            raise ReplyError(f"edit {i}: the SEARCH part is empty; copy the exact lines to change")
        for marker in (blk.START, blk.END):
            if marker in edit.search or marker in edit.replace:
                raise ReplyError(f"edit {i} touches an {marker} line; edit only the code between the markers")
        count = code.count(edit.search)
        if count == 0:
            raise ReplyError(f"edit {i}: the SEARCH text is not in the program; copy it exactly, whitespace "
                             f"included:\n{_clip(edit.search)}")
        if count > 1:
            raise ReplyError(f"edit {i}: the SEARCH text occurs {count} times; include more lines so that it is unique")
        start = code.index(edit.search)
        end = start + len(edit.search)
        spans = blk.split(code).block_spans()
        if not any(s <= start and end <= e for s, e in spans):
            raise ReplyError(f"edit {i} changes frozen code outside the EVOLVE-BLOCKs; only code between "
                             f"EVOLVE-BLOCK-START and EVOLVE-BLOCK-END may change:\n{_clip(edit.search)}")
        code = code[:start] + edit.replace + code[end:]
    return code


def parse_blocks(text: str, expected: int) -> list[str]:
    """The rewritten block bodies of a `full` reply; their count must match the parent's."""
    try:
        bodies = blk.extract_blocks(text)
    except blk.BlockError as exc:
        raise ReplyError(f"the rewritten program's markers are broken: {exc}") from None
    if len(bodies) != expected:
        raise ReplyError(f"expected {expected} EVOLVE-BLOCK(s) in the reply, found {len(bodies)}; rewrite every block, "
                         "in order, each between its own EVOLVE-BLOCK-START and EVOLVE-BLOCK-END lines")
    return bodies


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "\n..."
