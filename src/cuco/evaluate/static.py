"""Level 0: static checks of a candidate's source, before anything is compiled or run.

A candidate is untrusted code that the harness loads into its own process. This level rejects, with the
line number and the reason, what must never reach the compiler: broken EVOLVE-BLOCK structure, edits to
frozen regions, process/file/network access, clock reads that could fake or game timing, tampering with
harness state or cuco ABI symbols, headers outside an allow-list, and calls that tear down the device or
the process. Comments and the contents of string literals are blanked before identifiers are scanned.
The check is a filter, not a sandbox: the harness's own timing and verification are what count.
"""

from __future__ import annotations

import bisect
import functools
import re
import time
from typing import Iterable

import attrs

from cuco.candidate import LevelResult

START_MARKER = "EVOLVE-BLOCK-START"
END_MARKER = "EVOLVE-BLOCK-END"

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

_WHY_PROCESS = "process, file, network and environment access is not allowed in a candidate (the harness owns I/O)"
_WHY_CLOCK = "reading clocks in a candidate is not allowed (timing is measured by the harness only)"
_WHY_EXIT = "a candidate must not end the process; return a non-zero error code from the entry point instead"
_WHY_DEVICE = "a candidate must not reset the device or destroy the harness's communicator"
_WHY_STREAM = "candidates use the harness's streams (ctx->stream, ctx->side_stream); do not create streams"
_WHY_LOAD = "loading code at run time is not allowed; everything a candidate runs must be in its source"

#: Identifier -> why it is forbidden anywhere (as a whole identifier that is not a member access).
FORBIDDEN_IDENTIFIERS: dict[str, str] = {
    **{name: _WHY_PROCESS for name in (
        "system", "popen", "pclose", "fork", "vfork", "execl", "execlp", "execle", "execv", "execvp", "execvpe",
        "execve", "fexecve", "posix_spawn", "posix_spawnp", "fopen", "freopen", "fdopen", "socket", "getaddrinfo",
        "gethostbyname", "getenv", "secure_getenv", "setenv", "putenv", "unsetenv", "clearenv", "environ",
        "syscall", "ptrace", "sigaction", "atexit", "at_quick_exit", "mmap", "shm_open", "ifstream", "ofstream",
        "fstream", "__environ", "_environ", "prctl", "dlvsym")},
    **{name: _WHY_CLOCK for name in (
        "clock64", "globaltimer", "__globaltimer", "__clock64", "clock_gettime", "gettimeofday", "timespec_get",
        "rdtsc", "__rdtsc", "chrono")},
    **{name: _WHY_EXIT for name in ("_exit", "_Exit", "quick_exit")},
    **{name: _WHY_DEVICE for name in ("cudaDeviceReset", "cudaThreadExit", "ncclCommDestroy", "ncclCommAbort",
                                      "ncclCommFinalize")},
    **{name: _WHY_STREAM for name in ("cudaStreamCreate", "cudaStreamCreateWithFlags",
                                      "cudaStreamCreateWithPriority", "cuStreamCreate")},
    **{name: _WHY_LOAD for name in ("dlopen", "dlsym", "dlmopen", "cuModuleLoad", "cuModuleLoadData",
                                    "cuModuleLoadDataEx", "cuModuleLoadFatBinary", "cuLibraryLoadData",
                                    "cuLinkCreate", "cudaLibraryLoadData", "nvrtcCreateProgram",
                                    # entry points of the driver hand out any function, forbidden ones included
                                    "cudaGetDriverEntryPoint", "cudaGetDriverEntryPointByVersion",
                                    "cuGetProcAddress", "cuGetProcAddress_v2")},
}
#: Common words that are forbidden only when called as free functions (`gin.signal(...)` stays legal).
FORBIDDEN_CALLS: dict[str, str] = {
    **{name: _WHY_PROCESS for name in ("open", "openat", "creat", "remove", "unlink", "rename", "mkfifo",
                                       "connect", "bind", "listen", "accept", "sendto", "recvfrom", "kill",
                                       "signal", "clone", "raise", "tgkill", "tkill")},
    "clock": _WHY_CLOCK,
    **{name: _WHY_EXIT for name in ("exit", "abort", "terminate")},
}

#: Headers a candidate may include: exact names, or prefixes ending in '/'.
ALLOWED_INCLUDES = frozenset("""
    cuda.h cuda_runtime.h cuda_runtime_api.h cuda_bf16.h cuda_fp16.h cuda_fp8.h cuda_bf16.hpp cuda_fp16.hpp
    cuda_pipeline.h cuda_awbarrier.h cuda_awbarrier_primitives.h cuda_pipeline_primitives.h cuda_device_runtime_api.h
    device_launch_parameters.h vector_types.h vector_functions.h driver_types.h library_types.h mma.h
    cooperative_groups.h sm_90_rt.h crt/host_defines.h
    nccl.h nccl_device.h cublasLt.h cublas_api.h nvshmem.h nvshmemx.h
    stdint.h stddef.h stdio.h stdlib.h string.h math.h float.h limits.h assert.h stdbool.h inttypes.h
    cstdint cstddef cstdio cstdlib cstring cmath cfloat climits cassert cinttypes
    algorithm array atomic bit cstdarg functional initializer_list iostream limits memory mutex new numeric
    optional random tuple type_traits utility vector
""".split())
ALLOWED_INCLUDE_PREFIXES = ("cuco/", "cuda/", "cooperative_groups/", "nccl_device/", "cub/")

# One pass over the source finds comments, string and character literals (raw strings first).
_LEXEME = re.compile(
    r"""(?=[/"'uULR])"""  # fail fast where no comment or literal can start (10x faster)
    r"""(?:(?P<line>//[^\n]*)"""
    r"""|(?P<block>/\*.*?(?:\*/|\Z))"""
    r"""|(?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s"]{0,16})\(.*?\)(?P=delim)")"""
    r"""|(?P<str>(?:u8|[uUL])?"(?:\\.|[^"\\\n])*"?)"""
    r"""|(?P<chr>(?<![\w.])(?:u8|[uUL])?'(?:\\.|[^'\\\n])*'?))""",
    re.DOTALL,
)
_MARKER = re.compile(r"//\s*EVOLVE-BLOCK-(START|END)\b")
_INCLUDE = re.compile(r"#[ \t]*include[ \t]*([<\"])([^>\"\n]*)[>\"]")
_CLOCK_ASM = re.compile(r"%%?(clock|globaltimer)", re.IGNORECASE)
# Patterns start with a literal and check the word boundary behind it: Python's re then skips ahead fast.
_EXTERN = re.compile(r"extern\b(?<!\wextern)(?!\s*(\"|__shared__\b|template\b))")
_BRACE = re.compile(r"[{}]")
_EXTERN_C_BLOCK = re.compile(r"extern(?<!\wextern)\s*\"[^\"\n]*\"\s*\{")
_CTX_NAME = re.compile(r"cuco_ctx(?<!\wcuco_ctx)\s*(?:const\s*)?[*&]\s*(?:const\s+)?(?:__restrict__\s+)?([A-Za-z_]\w*)")
_ASSIGN_AFTER = re.compile(r"\s*(?:\[[^\]\n]*\]\s*)*(?:\.\s*\w+\s*(?:\[[^\]\n]*\]\s*)*)*(?:[-+*/%&|^]|<<|>>)?=(?!=)"
                           r"|\s*(?:\+\+|--)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_ASM = frozenset(("asm", "__asm__", "__asm"))
_RULED = frozenset(FORBIDDEN_IDENTIFIERS) | frozenset(FORBIDDEN_CALLS) | _ASM


#: Digraphs and trigraphs spell `#`, braces and brackets without those characters (`%:include`).
_ALTERNATE_TOKENS = (("%:%:", "##"), ("%:", "#"), ("<%", "{"), ("%>", "}"), ("<:", "["), (":>", "]"),
                     ("??=", "#"), ("??/", "\\"), ("??(", "["), ("??)", "]"), ("??<", "{"), ("??>", "}"))
# Substrings, not words: adjacent literals concatenate ("sys" "call") and run into their neighbours.
_SYSCALL_ASM = re.compile(r"syscall|sysenter|\bint\s*\$?0x80\b", re.IGNORECASE)


def normalise(code: str) -> str:
    """The candidate's text as the preprocessor's first phases see it: digraphs and trigraphs replaced, and
    backslash-newline splices joined, so `%:include`, `#incl\\<newline>ude` and `sys\\<newline>call` are seen
    for what they are. Each joined line is followed by as many empty lines as it absorbed, so line numbers
    of everything after it are unchanged. Only the candidate's own text is treated: headers are not scanned."""
    for alt, plain in _ALTERNATE_TOKENS:
        if alt in code:
            code = code.replace(alt, plain)
    if "\\\n" not in code and "\\\r\n" not in code:
        return code
    out: list[str] = []
    pending: list[str] = []
    for line in code.replace("\r\n", "\n").split("\n"):
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        out.append("".join(pending) + line)
        out.extend([""] * len(pending))
        pending = []
    if pending:
        out.append("".join(pending))
        out.extend([""] * (len(pending) - 1))
    return "\n".join(out)


@attrs.frozen
class Violation:
    """One reason a candidate's source is rejected."""

    line: int          # 1-based; 0 when the problem is not tied to a line
    rule: str          # short rule id: markers, frozen-region, include, forbidden, abi-symbol, clock-asm, ...
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}" if self.line else self.message


@attrs.frozen
class _Lexed:
    """The source with comments blanked, and with comments and literal contents blanked."""

    no_comments: str
    code_only: str
    literals: tuple[str, ...]
    markers: tuple[tuple[int, str], ...]   # (line, 'START' | 'END') of marker line comments


def _blank(text: str) -> str:
    if "\n" not in text:
        return " " * len(text)
    return "\n".join(" " * len(part) for part in text.split("\n"))


def _lex(code: str) -> _Lexed:
    no_comments: list[str] = []
    code_only: list[str] = []
    literals: list[str] = []
    markers: list[tuple[int, str]] = []
    pos = 0
    for m in _LEXEME.finditer(code):
        gap = code[pos:m.start()]
        no_comments.append(gap)
        code_only.append(gap)
        text = m.group(0)
        if m.lastgroup in ("line", "block"):
            marker = _MARKER.match(text) if m.lastgroup == "line" else None
            if marker:
                markers.append((code.count("\n", 0, m.start()) + 1, marker.group(1)))
            no_comments.append(_blank(text))
            code_only.append(_blank(text))
        else:
            quote = "'" if m.lastgroup == "chr" else '"'
            first, last = text.index(quote), len(text) - 1
            literals.append(text[first + 1:last] if text.endswith(quote) and last > first else text[first + 1:])
            no_comments.append(text)
            # Keep the quotes so `extern "C"` stays recognisable; blank only what is between them.
            code_only.append(text[:first + 1] + _blank(text[first + 1:last]) + text[last:])
        pos = m.end()
    no_comments.append(code[pos:])
    code_only.append(code[pos:])
    return _Lexed("".join(no_comments), "".join(code_only), tuple(literals), tuple(markers))


class _Lines:
    """Offset -> 1-based line number."""

    def __init__(self, text: str):
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)


def _blocks(markers: Iterable[tuple[int, str]], require: bool = True) -> tuple[list[tuple[int, int]], list[Violation]]:
    """(start_line, end_line) of each EVOLVE block, and structure violations."""
    blocks: list[tuple[int, int]] = []
    problems: list[Violation] = []
    open_line: int | None = None
    for line, kind in markers:
        if kind == "START":
            if open_line is not None:
                problems.append(Violation(line, "markers", f"{START_MARKER} inside the block opened at line "
                                          f"{open_line}: blocks cannot nest; close it with {END_MARKER} first"))
            else:
                open_line = line
        elif open_line is None:
            problems.append(Violation(line, "markers", f"{END_MARKER} without a matching {START_MARKER}"))
        else:
            blocks.append((open_line, line))
            open_line = None
    if open_line is not None:
        problems.append(Violation(open_line, "markers", f"{START_MARKER} is never closed by {END_MARKER}"))
    if require and not blocks and not problems:
        problems.append(Violation(0, "markers", f"no EVOLVE block: mark the mutable code with // {START_MARKER} "
                                  f"and // {END_MARKER}"))
    return blocks, problems


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
    return _blocks(_lex(parent_code).markers)


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


_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(include_next|include|import|embed)\b[ \t]*(.*)$", re.MULTILINE)


def _check_includes(lexed: _Lexed, line_of: _Lines) -> list[Violation]:
    out = []
    text = lexed.no_comments
    for m in _DIRECTIVE.finditer(text):
        kind, rest = m.group(1), m.group(2).strip()
        line = line_of(m.start())
        if kind != "include":
            out.append(Violation(line, "include", f"#{kind} is not allowed in a candidate; use #include <...> "
                                 "of an allowed header"))
        elif rest[:1] not in ("<", '"'):
            out.append(Violation(line, "include", f"#include {rest[:40]}: computed includes (a macro as the "
                                 "header name) are not allowed; name the header as <...> or \"...\""))
        else:
            name = rest[1:].split(">" if rest[0] == "<" else '"')[0].strip()
            if ".." in name.replace("\\", "/").split("/") or name.startswith(("/", "\\")) or "\\" in name:
                out.append(Violation(line, "include", f"#include {rest[:60]}: header paths may not climb out of "
                                     "the include directories ('..', absolute paths or backslashes)"))
    for m in _INCLUDE.finditer(text):
        if text[text.rfind("\n", 0, m.start()) + 1:m.start()].strip():
            continue  # not a directive: '#' is not the first thing on its line
        name = m.group(2).strip()
        if name in ALLOWED_INCLUDES or name.startswith(ALLOWED_INCLUDE_PREFIXES):
            continue
        out.append(Violation(line_of(m.start()), "include", f"#include {m.group(1)}{name}"
                             f"{'>' if m.group(1) == '<' else chr(34)} is not allowed: a candidate is one file and "
                             "may include only CUDA, NCCL, cuBLASLt, cuco/ and standard headers"))
    return out


def _check_identifiers(lexed: _Lexed, line_of: _Lines) -> list[Violation]:
    out: list[Violation] = []
    text = lexed.code_only
    clock_asm = any(_CLOCK_ASM.search(s) for s in _joined(lexed.literals))
    # Collect the words first, then locate only those some rule is about (a few times faster than one big regex).
    words = set(_WORD.findall(text))
    suspects = (words & _RULED) | {w for w in words if w.startswith(RESERVED_PREFIXES)} - set(ENTRY_POINTS) \
        - set(ABI_TYPES)
    if not suspects:
        return out
    pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, sorted(suspects))) + r")(?!\w)")
    for m in pattern.finditer(text):
        name = m.group(0)
        before = text[max(0, m.start() - 2):m.start()].rstrip()
        if before.endswith(".") or before.endswith("->"):
            continue  # a member of some object, not the library function of that name
        line = line_of(m.start())
        if name in FORBIDDEN_IDENTIFIERS:
            out.append(Violation(line, "forbidden", f"{name}: {FORBIDDEN_IDENTIFIERS[name]}"))
        elif name in FORBIDDEN_CALLS and re.match(r"\s*\(", text[m.end():m.end() + 40]):
            out.append(Violation(line, "forbidden", f"{name}(): {FORBIDDEN_CALLS[name]}"))
        elif name.startswith(RESERVED_PREFIXES) and name not in ENTRY_POINTS and name not in ABI_TYPES:
            out.append(Violation(line, "abi-symbol", f"{name}: a candidate may define only the entry points "
                                 f"{', '.join(ENTRY_POINTS)}; {'_'.join(name.split('_')[:2])}_* symbols belong "
                                 "to the harness and the workload plugin"))
        elif name in _ASM and any(_SYSCALL_ASM.search(x) for x in _joined(lexed.literals)):
            out.append(Violation(line, "forbidden", f"inline asm issuing a system call: {_WHY_PROCESS}"))
        elif name in ("asm", "__asm__", "__asm") and clock_asm:
            out.append(Violation(line, "clock-asm", f"inline asm reading a %clock or %globaltimer register: "
                                 f"{_WHY_CLOCK}"))
    return out


def _joined(literals: tuple[str, ...]) -> tuple[str, ...]:
    # Adjacent literals concatenate ("%%global" "timer"), so look at the whole sequence too.
    return literals + ("".join(literals),)


def _check_structure(lexed: _Lexed, line_of: _Lines) -> list[Violation]:
    out: list[Violation] = []
    text = lexed.code_only
    if "##" in text:
        out.append(Violation(line_of(text.index("##")), "token-paste",
                             "token pasting (##) is not allowed: it can assemble forbidden identifiers"))
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


def _check_entry_points(lexed: _Lexed, line_of: _Lines) -> list[Violation]:
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


def _check_host_collectives(lexed: _Lexed, line_of: "_Lines") -> list[Violation]:
    return [Violation(line_of(m.start()), "host-collective",
                      f"{m.group(1)}: a device-initiated candidate communicates from the GPU (LSA, GIN or "
                      "NVSHMEM); host NCCL calls belong only in the workload's host seed")
            for m in _HOST_COLLECTIVE.finditer(lexed.code_only)]


def _analyse(code: str, parent_code: str | None, require_blocks: bool = True) -> tuple[list[Violation], int]:
    seen = normalise(code)
    lexed = _lex(seen)
    line_of = _Lines(seen)
    blocks, found = _blocks(lexed.markers, require_blocks)
    if parent_code is not None and not found:
        found += _check_frozen(code, blocks, parent_code)
    found += _check_includes(lexed, line_of)
    found += _check_identifiers(lexed, line_of)
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


def check_program(code: str, parent_code: str | None = None) -> LevelResult:
    """Level 0 for a rewritten user program (cuco.program): balanced EVOLVE blocks, frozen text equal to the
    parent's, and no host collective left. The candidate-ABI rules do not apply: it is a whole program."""
    start = time.perf_counter()
    seen = normalise(code)
    lexed = _lex(seen)
    blocks, found = _blocks(lexed.markers, True)
    if parent_code is not None and not found:
        found += _check_frozen(code, blocks, parent_code)
    found += _check_host_collectives(lexed, _Lines(seen))
    found = sorted(found, key=lambda v: v.line)
    data = {"violations": [attrs.asdict(v) for v in found], "blocks": len(blocks)}
    reason = "\n".join(str(v) for v in found[:8])
    return LevelResult("static", not found, reason, time.perf_counter() - start, data)
