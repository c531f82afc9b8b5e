"""How level 0 reads a candidate: as the preprocessor's first phases do (digraphs, trigraphs and line splices
resolved, line numbers kept), with comments and literal contents told apart from code."""

from __future__ import annotations

import bisect
import re

import attrs

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
#: Digraphs and trigraphs spell `#`, braces and brackets without those characters (`%:include`).

_ALTERNATE_TOKENS = (("%:%:", "##"), ("%:", "#"), ("<%", "{"), ("%>", "}"), ("<:", "["), (":>", "]"),
                     ("??=", "#"), ("??/", "\\"), ("??(", "["), ("??)", "]"), ("??<", "{"), ("??>", "}"))

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
class Lexed:
    """The source with comments blanked, and with comments and literal contents blanked."""

    no_comments: str
    code_only: str
    literals: tuple[str, ...]
    line_comments: tuple[int, ...]   # offsets of the `//` comments (where EVOLVE markers may stand)


def _blank(text: str) -> str:
    if "\n" not in text:
        return " " * len(text)
    return "\n".join(" " * len(part) for part in text.split("\n"))


def lex(code: str) -> Lexed:
    """The text split into code, comments and literals (see Lexed)."""
    no_comments: list[str] = []
    code_only: list[str] = []
    literals: list[str] = []
    line_comments: list[int] = []
    pos = 0
    for m in _LEXEME.finditer(code):
        gap = code[pos:m.start()]
        no_comments.append(gap)
        code_only.append(gap)
        text = m.group(0)
        if m.lastgroup in ("line", "block"):
            if m.lastgroup == "line":
                line_comments.append(m.start())
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
    return Lexed("".join(no_comments), "".join(code_only), tuple(literals), tuple(line_comments))


class Lines:
    """Offset -> 1-based line number."""

    def __init__(self, text: str):
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def __call__(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)




_CONDITIONAL = re.compile(r"^[ \t]*#[ \t]*(if|ifdef|ifndef|endif)\b", re.MULTILINE)


def left_open(code: str) -> str:
    """What `code` leaves open at its end for the text after it: '' when nothing, else 'a comment', 'a string
    literal' or 'an #if'. A piece that leaves one open would change how the text after it is read."""
    for m in _LEXEME.finditer(code):
        text = m.group(0)
        if m.lastgroup == "block" and (len(text) < 4 or not text.endswith("*/")):
            return "a comment"
        if m.lastgroup in ("str", "chr"):
            quote = "'" if m.lastgroup == "chr" else '"'
            if len(text) - text.index(quote) < 2 or not text.endswith(quote):
                return "a string literal"
    depth = 0
    for m in _CONDITIONAL.finditer(lex(code).no_comments):
        depth += -1 if m.group(1) == "endif" else 1
        if depth < 0:
            return "an #endif without its #if"
    return "an #if" if depth else ""
