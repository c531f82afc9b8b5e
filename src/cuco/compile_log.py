"""The compiler-log filter: what of an nvcc log may be stored, shown or sent to an LLM — the first errors, each at
its line of the candidate; another file's text never (an assembler's `.include` or a header would echo it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The file name a candidate is compiled under (cuco.evaluate.compile), which the filter quotes by default.
SOURCE_NAME = "candidate.cu"
MAX_ERRORS = 5
MAX_EXCERPT_CHARS = 3000

_HEADER = re.compile(r"^(?P<file>[^\s(:][^(:\n]*?)(?:\((?P<line>\d+)\)|:(?P<gline>\d+)(?::\d+)?):\s*"
                     r"(?P<kind>(?:catastrophic |fatal )?error|warning|remark|note)\b", re.IGNORECASE)
_OTHER_ERROR = re.compile(r"^(ptxas|nvlink|nvcc|/usr/bin/ld|ld|collect2)\b.*\b(error|fatal)\b"
                          r"|undefined reference to|^ptxas fatal", re.IGNORECASE)
_NOISE = re.compile(r"detected during|instantiation of|^\s*Remark: The warnings can be suppressed|"
                    r"^\s*In file included from|^\s*from\s|Compilation terminated|^\d+ errors? detected",
                    re.IGNORECASE)
_ABS_PATH = re.compile(r"(?:/[\w.+\-]+)+/([\w.+\-]+)")
_QUOTED = re.compile(r"`[^'\n]*'|\"[^\"\n]*\"|'[^'\n]*'|\u2018[^\u2019\n]*\u2019")


def elide_quotes(text: str) -> str:
    """`text` with every quoted fragment replaced: messages about another file quote that file's tokens."""
    return _QUOTED.sub('"…"', text)


def _is_candidate(path: str, source_path: Path | None, source_name: str) -> bool:
    if source_path is not None:
        return os.path.normpath(path.strip()) == os.path.normpath(str(source_path))
    return Path(path.strip()).name == source_name


def shorten_paths(line: str) -> str:
    """`line` with every absolute path cut to its file name."""
    return _ABS_PATH.sub(lambda m: m.group(1), line)


def trim_log(log: str, source: str, max_errors: int = MAX_ERRORS, max_chars: int = MAX_EXCERPT_CHARS,
             source_path: Path | None = None) -> str:
    """The first `max_errors` errors of an nvcc log, each with its source line; warnings and template
    instantiation notes dropped; absolute paths shortened to the file name.

    The log is stored and sent to an LLM, and the compiler echoes lines of whatever file it read (a header, or
    a file reached by an assembler's `.include`). So only the candidate's own lines are quoted: an error in
    another file keeps its name, line and message with every quoted fragment elided, and never that file's
    text. The candidate is the file at `source_path` (by default any file named like it)."""
    source_name = source_path.name if source_path is not None else SOURCE_NAME
    src_lines = source.splitlines()
    lines = log.splitlines()
    errors: list[list[str]] = []
    total = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _HEADER.match(line.strip())
        if header:
            # nvcc prints the offending source line and a caret under a header: take them with it.
            context = []
            j = i + 1
            while j < len(lines) and lines[j].startswith((" ", "\t")) and not _HEADER.match(lines[j].strip()):
                if lines[j].strip() and not _NOISE.search(lines[j]):
                    context.append(lines[j].rstrip())
                j += 1
            i = j
            if "error" not in header.group("kind").lower():
                continue
            total += 1
            if len(errors) >= max_errors:
                continue
            shown: list[str] = []
            if len(context) >= 2 and context[-1].strip() == "^":
                shown = context[-2:]       # nvcc's copy of the source line and the caret under it
                context = context[:-2]
            lineno = int(header.group("line") or header.group("gline"))
            if not _is_candidate(header.group("file"), source_path, source_name):
                errors.append([elide_quotes(shorten_paths(line.strip())) + "  (in a file that is not the candidate; "
                               "its text is not shown)"])
                continue
            if 1 <= lineno <= len(src_lines):
                # The candidate's own line, as written (nvcc shows it after macro rewriting).
                shown = ["    " + src_lines[lineno - 1].strip()]
            errors.append([shorten_paths(line.strip()), *(shorten_paths(c) for c in context[:3]), *shown])
            continue
        if _OTHER_ERROR.search(line) and not _NOISE.search(line):
            total += 1
            if len(errors) < max_errors:
                errors.append([shorten_paths(line.strip())])  # the linker and ptxas name symbols, never file text
        i += 1
    if not errors:
        # Not a format we know: keep the tail, which is where compilers put the verdict; it may quote any file.
        kept = [elide_quotes(shorten_paths(l)) for l in lines if l.strip() and not _NOISE.search(l)
                and not l.startswith((" ", "\t"))]
        text = "\n".join(kept[-12:]) or "nvcc failed without output"
        return text[-max_chars:]
    text = "\n".join("\n".join(e) for e in errors)
    if total > len(errors):
        text += f"\n... and {total - len(errors)} more errors"
    if len(text) > max_chars:
        text = text[:max_chars - 20] + "\n... (truncated)"
    return text
