"""Level 0: static checks of a candidate's source, before anything is compiled or run.

A candidate is untrusted code that the harness loads into its own process. This level rejects, with the
line number and the reason, what must never reach the compiler: broken EVOLVE-BLOCK structure, edits to
frozen regions, process/file/network access, clock reads that could fake or game timing, tampering with
harness state or cuco ABI symbols, headers outside an allow-list, and calls that tear down the device or
the process. Comments and the contents of string literals are blanked before identifiers are scanned.
The check is a filter, not a sandbox: the harness's own timing and verification are what count.
"""

from __future__ import annotations

import functools
import re
import time
import attrs

from cuco.candidate import LevelResult
from cuco.evaluate.l0_rules import ALLOWED_INCLUDE_PREFIXES, ALLOWED_INCLUDES, FORBIDDEN_NAMES, shared_violations
from cuco.evaluate.l0_text import Lexed, Lines, Violation, left_open, lex, normalise
from cuco.evolve_blocks import BlockError, split

__all__ = ["ALLOWED_INCLUDES", "ALLOWED_INCLUDE_PREFIXES", "ENTRY_POINTS", "FORBIDDEN_NAMES", "HOST_COLLECTIVES",
           "Violation", "check_program", "check_static", "normalise", "violations"]

#: The candidate entry points of csrc/include/cuco/abi.h; the first two are required.
REQUIRED_ENTRY_POINTS = ("cuco_candidate_requirements", "cuco_candidate_launch")
ENTRY_POINTS = REQUIRED_ENTRY_POINTS + ("cuco_candidate_setup", "cuco_candidate_teardown")
#: Types of the ABI a candidate may name although their prefix is reserved.
ABI_TYPES = ("cuco_workload_desc", "cuco_candidate_requirements_fn", "cuco_candidate_setup_fn",
             "cuco_candidate_launch_fn", "cuco_candidate_teardown_fn")
#: Prefixes of symbols that belong to the harness and the workload plugin: a candidate that defines one with
#: C linkage would interpose on them when loaded. Other cuco_ names (types, namespaces) are fine.
RESERVED_PREFIXES = ("cuco_workload_", "cuco_harness_", "cuco_plugin_", "cuco_candidate_")
#: cuco_ctx fields a candidate may write (everything else is owned by the harness).
WRITABLE_CTX_FIELDS = ("candidate_state",)

# Patterns start with a literal and check the word boundary behind it: Python's re then skips ahead fast.
_EXTERN = re.compile(r"extern\b(?<!\wextern)(?!\s*(\"|__shared__\b|template\b))")
_BRACE = re.compile(r"[{}]")
_EXTERN_C_BLOCK = re.compile(r"extern(?<!\wextern)\s*\"[^\"\n]*\"\s*\{")
_CTX_NAME = re.compile(r"cuco_ctx(?<!\wcuco_ctx)\s*(?:const\s*)?[*&]\s*(?:const\s+)?(?:__restrict__\s+)?([A-Za-z_]\w*)")
_ASSIGN_AFTER = re.compile(r"\s*(?:\[[^\]\n]*\]\s*)*(?:\.\s*\w+\s*(?:\[[^\]\n]*\]\s*)*)*(?:[-+*/%&|^]|<<|>>)?=(?!=)"
                           r"|\s*(?:\+\+|--)")
_WORD = re.compile(r"[A-Za-z_]\w*")


def _blocks(code: str, require: bool = True) -> tuple[list[tuple[int, int]], list[Violation]]:
    """(START line, END line) of each EVOLVE block, or the structure violation."""
    try:
        return split(code, require).block_lines(), []
    except BlockError as exc:
        return [], [Violation(exc.line, "markers", exc.reason)]


def _frozen_segments(code: str, blocks: list[tuple[int, int]]) -> list[tuple[int, list[str]]]:
    """The regions outside EVOLVE blocks (marker lines included): (first line, lines) per region."""
    lines = code.replace("\r\n", "\n").split("\n")
    segments: list[tuple[int, list[str]]] = []
    start = 1
    for b_start, b_end in blocks:
        segments.append((start, lines[start - 1:b_start]))
        start = b_end
    segments.append((start, lines[start - 1:]))
    # A trailing newline more or less at the end of the file is not an edit.
    while len(segments[-1][1]) > 1 and segments[-1][1][-1].strip() == "":
        segments[-1][1].pop()
    return segments


@functools.lru_cache(maxsize=64)
def _parent_blocks(parent_code: str) -> tuple[list[tuple[int, int]], list[Violation]]:
    # Many children share a parent in a search; its analysis is cached.
    return _blocks(parent_code)


def _check_frozen(code: str, blocks: list[tuple[int, int]], parent_code: str) -> list[Violation]:
    parent_blocks, parent_problems = _parent_blocks(parent_code)
    if parent_problems:
        return [Violation(0, "frozen-region", "the parent's EVOLVE-BLOCK structure is broken, so frozen regions "
                          f"cannot be compared ({parent_problems[0]})")]
    mine, theirs = _frozen_segments(code, blocks), _frozen_segments(parent_code, parent_blocks)
    if len(mine) != len(theirs):
        return [Violation(0, "frozen-region", f"the candidate has {len(blocks)} EVOLVE blocks but its parent has "
                          f"{len(parent_blocks)}: add or remove code only inside the existing blocks")]
    for (first, ours), (_, parent) in zip(mine, theirs):
        if ours == parent:
            continue
        for i in range(max(len(ours), len(parent))):
            a = ours[i] if i < len(ours) else "<missing>"
            b = parent[i] if i < len(parent) else "<missing>"
            if a != b:
                return [Violation(first + i, "frozen-region", "code outside the EVOLVE blocks was changed: "
                                  f"{a.strip()[:80]!r} (parent has {b.strip()[:80]!r}); edit only inside the blocks")]
    return []


def _check_abi_symbols(lexed: Lexed, line_of: Lines) -> list[Violation]:
    out: list[Violation] = []
    text = lexed.code_only
    suspects = {w for w in set(_WORD.findall(text)) if w.startswith(RESERVED_PREFIXES)} - set(ENTRY_POINTS) \
        - set(ABI_TYPES)
    if not suspects:
        return out
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(suspects))) + r")(?!\w)")
    for m in pattern.finditer(text):
        name = m.group(0)
        out.append(Violation(line_of(m.start()), "abi-symbol", f"{name}: a candidate may define only the entry "
                             f"points {', '.join(ENTRY_POINTS)}; {'_'.join(name.split('_')[:2])}_* symbols belong "
                             "to the harness and the workload plugin"))
    return out


def _check_structure(lexed: Lexed, line_of: Lines) -> list[Violation]:
    out: list[Violation] = []
    text = lexed.code_only
    for m in _EXTERN.finditer(text):
        out.append(Violation(line_of(m.start()), "extern", "extern declarations are not allowed (they could bind "
                             "to harness symbols); use extern \"C\" only for the candidate entry points"))
    for ctx in sorted(set(_CTX_NAME.findall(text))):
        for m in re.finditer(rf"{re.escape(ctx)}(?<!\w{re.escape(ctx)})\s*->\s*([A-Za-z_]\w*)", text):
            field = m.group(1)
            if field in WRITABLE_CTX_FIELDS or not _ASSIGN_AFTER.match(text, m.end()):
                continue
            out.append(Violation(line_of(m.start()), "harness-state", f"write to {ctx}->{field}: the context "
                                 "belongs to the harness; a candidate may set only candidate_state"))
        for m in re.finditer(rf"[mM]em(?:set|cpy)\w*\s*\(\s*&?\s*{re.escape(ctx)}\s*[,)]", text):
            out.append(Violation(line_of(m.start()), "harness-state", f"memset/memcpy over {ctx}: the context "
                                 "belongs to the harness"))
    return out


def _extern_c_ranges(text: str) -> list[tuple[int, int]]:
    ranges = []
    for m in _EXTERN_C_BLOCK.finditer(text):
        depth, end = 0, len(text)
        for brace in _BRACE.finditer(text, m.end() - 1):
            depth += 1 if brace.group(0) == "{" else -1
            if depth == 0:
                end = brace.start()
                break
        ranges.append((m.end(), end))
    return ranges


def _check_entry_points(lexed: Lexed, line_of: Lines) -> list[Violation]:
    text = lexed.code_only
    blocks = _extern_c_ranges(text)
    out = []
    for name in REQUIRED_ENTRY_POINTS:
        definition = re.search(rf"{name}(?<!\w{name})\s*\([^;{{}}]*\)\s*\{{", text)
        if definition is None:
            out.append(Violation(0, "entry-point", f'{name} is not defined: define extern "C" int {name}(...) '
                                 "as declared in cuco/abi.h"))
            continue
        head_start = max(text.rfind(";", 0, definition.start()), text.rfind("}", 0, definition.start()),
                         text.rfind("{", 0, definition.start()), text.rfind("#", 0, definition.start()))
        declared_c = re.search(r"\bextern\s*\"[^\"\n]*\"", text[head_start + 1:definition.start()]) is not None
        if not declared_c and not any(a <= definition.start() < b for a, b in blocks):
            out.append(Violation(line_of(definition.start()), "entry-point", f'{name} must have C linkage: '
                                 f'write extern "C" int {name}(...)'))
    return out


#: Host-side NCCL communication: legal in a workload's host seed, never in a device-initiated candidate.
HOST_COLLECTIVES = frozenset((
    "ncclAllGather", "ncclAllReduce", "ncclReduceScatter", "ncclBroadcast", "ncclBcast", "ncclReduce",
    "ncclAlltoAll", "ncclAlltoAllv", "ncclSend", "ncclRecv", "ncclGather", "ncclScatter"))
# Named at all, not only called: `&ncclAllGather` or a function pointer would call it just the same.
_HOST_COLLECTIVE = re.compile(r"(?<![\w.>])(" + "|".join(sorted(HOST_COLLECTIVES)) + r")(?!\w)")


def _check_host_collectives(lexed: Lexed, line_of: Lines) -> list[Violation]:
    return [Violation(line_of(m.start()), "host-collective",
                      f"{m.group(1)}: a device-initiated candidate communicates from the GPU (LSA, GIN or "
                      "NVSHMEM); host NCCL calls belong only in the workload's host seed")
            for m in _HOST_COLLECTIVE.finditer(lexed.code_only)]


def _analyse(code: str, parent_code: str | None, require_blocks: bool = True) -> tuple[list[Violation], int]:
    seen = normalise(code)
    lexed = lex(seen)
    line_of = Lines(seen)
    blocks, found = _blocks(code, require_blocks)
    if parent_code is not None and not found:
        found += _check_frozen(code, blocks, parent_code)
    found += shared_violations(seen, lexed, line_of)
    found += _check_abi_symbols(lexed, line_of)
    found += _check_structure(lexed, line_of)
    found += _check_entry_points(lexed, line_of)
    if require_blocks:  # an evolvable candidate, not a host seed
        found += _check_host_collectives(lexed, line_of)
    return sorted(found, key=lambda v: v.line), len(blocks)


def violations(code: str, parent_code: str | None = None, require_blocks: bool = True) -> list[Violation]:
    """Every static violation in `code`, in line order (the frozen-region check needs `parent_code`)."""
    return _analyse(code, parent_code, require_blocks)[0]


def check_static(code: str, parent_code: str | None = None, max_reported: int = 8,
                 require_blocks: bool = True) -> LevelResult:
    """Level 0: the candidate passes when it has no violation. The reason lists the first `max_reported`.

    `require_blocks=False` accepts a program without EVOLVE blocks (a workload's host seed, which is
    measured but never mutated); every other rule still applies.
    """
    start = time.perf_counter()
    found, nblocks = _analyse(code, parent_code, require_blocks)
    seconds = time.perf_counter() - start
    data = {"violations": [attrs.asdict(v) for v in found], "blocks": nblocks}
    if not found:
        return LevelResult("static", True, "", seconds, data)
    lines = [str(v) for v in found[:max_reported]]
    if len(found) > max_reported:
        lines.append(f"... and {len(found) - max_reported} more")
    return LevelResult("static", False, "\n".join(lines), seconds, data)


_MACRO = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
# Names the frozen text leaves open to a definition: it tests them (`#ifndef N`, `defined(N)`) to take a default.
_TESTED = re.compile(r"^[ \t]*#[ \t]*(?:ifndef|ifdef)[ \t]+([A-Za-z_]\w*)|\bdefined[ \t]*\(?[ \t]*([A-Za-z_]\w*)",
                     re.MULTILINE)


def _frozen_names(lines: list[str], blocks: list[tuple[int, int]]) -> tuple[set[str], set[str]]:
    """The words of the frozen text's code, and the names it leaves open to a definition."""
    inside = {i for first, last in blocks for i in range(first - 1, last)}
    frozen = lex("\n".join("" if i in inside else line for i, line in enumerate(lines)))
    tested = {a or b for a, b in _TESTED.findall(frozen.no_comments)}
    return set(_WORD.findall(frozen.code_only)), tested


def _check_program_block(body: str, first_line: int, frozen_words: set[str], tested: set[str]) -> list[Violation]:
    # A block is read on its own: one that leaves a comment, literal or #if open would change how the frozen
    # text after it reads, so the text checked here would not be the text compiled.
    opened = left_open(body)
    if opened:
        return [Violation(first_line, "block-open", f"the EVOLVE block starting here leaves {opened} open at its "
                          "end; each block must be complete on its own")]
    lexed, line_of = lex(body), Lines(body)
    found = shared_violations(body, lexed, line_of, first_line)
    # The frozen text is the user's own program, which may write files: a block's macro named like one of its
    # words would change what that code does (which path it opens), so only names it leaves open may be defined.
    for m in _MACRO.finditer(lexed.no_comments):
        if m.group(2) in frozen_words and m.group(2) not in tested:
            found.append(Violation(first_line - 1 + line_of(m.start()), "frozen-macro", f"#{m.group(1)} "
                                   f"{m.group(2)}: the frozen code uses {m.group(2)}; a block may not change what "
                                   "the program's own code means, so give the macro a name of its own"))
    return found


def check_program(code: str, parent_code: str | None = None) -> LevelResult:
    """Level 0 for a rewritten user program (cuco.program): balanced EVOLVE blocks, frozen text equal to the
    parent's, no host collective left, and the rules of every candidate (includes, forbidden names, asm, token
    pasting) in each EVOLVE block, whose macros may not take a name the frozen code uses (unless it leaves the
    name open with #ifndef). The frozen text is the user's own program, which may read its environment and write
    files; the candidate-ABI rules do not apply: it is a whole program."""
    start = time.perf_counter()
    seen = normalise(code)
    lexed = lex(seen)
    blocks, found = _blocks(code, True)
    if parent_code is not None and not found:
        found += _check_frozen(code, blocks, parent_code)
    found += _check_host_collectives(lexed, Lines(seen))
    lines = seen.split("\n")
    frozen_words, tested = _frozen_names(lines, blocks)
    for first, last in blocks:
        found += _check_program_block("\n".join(lines[first:last - 1]), first + 1, frozen_words, tested)
    found = sorted(found, key=lambda v: v.line)
    data = {"violations": [attrs.asdict(v) for v in found], "blocks": len(blocks)}
    reason = "\n".join(str(v) for v in found[:8])
    return LevelResult("static", not found, reason, time.perf_counter() - start, data)
