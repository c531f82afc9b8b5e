"""The one EVOLVE-block grammar: split/join round-trips, and every reader of markers (search, level 0, fast path,
kit) agrees on the same malformed inputs."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco import evolve_blocks as eb
from cuco.errors import CucoError
from cuco.evaluate.static import check_static
from cuco.fastpath import annotate
from cuco.kit import evolve
from cuco.search import blocks as blk

S, E = eb.START_LINE, eb.END_LINE

# Free text lines that hold no marker comment: code, comments and strings that only mention the marker words.
_plain_line = st.one_of(
    st.text(alphabet=st.characters(blacklist_characters="\n/\"'\\?", blacklist_categories=("Cs",)), max_size=20),
    st.sampled_from(["int x = 1;", "/* EVOLVE-BLOCK-END */", 'const char* s = "// EVOLVE-BLOCK-START";',
                     "// a comment", "", "\t", "\r"]),
)
_chunk = st.lists(_plain_line, max_size=4).map(lambda lines: "".join(line + "\n" for line in lines))


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(_chunk, min_size=1, max_size=9), label=st.sampled_from(["", " a", " lsa-kernels"]),
       tail=st.sampled_from(["", "no newline at the end"]))
def test_split_and_join_round_trip_any_well_formed_text(parts, label, tail):
    between, bodies = parts[0::2], parts[1::2]
    code = between[0]
    for i, body in enumerate(bodies):
        code += f"{S}{label}\n{body}{E}{label}\n" + (between[i + 1] if i + 1 < len(between) else "")
    code += tail
    sk = eb.split(code, require=False)
    assert sk.join() == code
    assert sk.blocks == tuple(bodies)
    assert [code[a:b] for a, b in sk.block_spans()] == list(sk.blocks)
    lines = code.split("\n")
    for start, end in sk.block_lines():
        assert lines[start - 1].startswith(S) and lines[end - 1].startswith(E)
    assert sk.with_blocks(list(sk.blocks)).join() == code


def _outcome(read, code: str) -> tuple[str, object]:
    """('line', n) when `read` rejects `code` at line n, else ('bodies', the block bodies it found)."""
    try:
        return "bodies", read(code)
    except CucoError as exc:
        m = re.search(r"line (\d+)", str(exc))
        return "line", int(m.group(1)) if m else 0


def _static(code: str):
    result = check_static(code)
    markers = [v for v in result.data["violations"] if v["rule"] == "markers"]
    if markers:
        return "line", markers[0]["line"]
    return "blocks", result.data["blocks"]


READERS = {
    "search": lambda code: _outcome(lambda c: list(blk.split(c).blocks), code),
    "fast path": lambda code: _outcome(annotate.check_markers, code),
    "kit": lambda code: _outcome(lambda c: [evolve.split(c)[1].split("\n", 1)[1]], code),
    "level 0": _static,
}

MALFORMED = {
    "a stray END": (f"a\n{S}\nb\n{E}\nc\n{E}\n", 6),
    "an unclosed START": (f"a\n{S}\nb\n", 2),
    "a nested START": (f"{S}\n{S}\nb\n{E}\n", 2),
    "a marker after code": (f"int x; {S}\nb\n{E}\n", 1),
    "a spliced marker": (f"{S}\nint b; \\\n{E}\n", 2),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_every_reader_rejects_malformed_markers_at_the_same_line(name):
    code, line = MALFORMED[name]
    assert {reader: read(code) for reader, read in READERS.items()} == {r: ("line", line) for r in READERS}


def test_a_marker_word_in_a_block_comment_or_string_is_text_to_every_reader():
    body = '/* EVOLVE-BLOCK-END */\nconst char* s = "// EVOLVE-BLOCK-START";\n'
    code = f"int a;\n{S}\n{body}{E}\nint c;\n"
    outcomes = {reader: read(code) for reader, read in READERS.items()}
    assert outcomes == {"search": ("bodies", [body]), "fast path": ("bodies", 1), "kit": ("bodies", [body]),
                        "level 0": ("blocks", 1)}


def test_errors_name_the_line_and_the_reason():
    with pytest.raises(eb.BlockError) as info:
        eb.split(f"x\n{E}\n")
    assert info.value.line == 2 and str(info.value) == f"line 2: {eb.END} without a matching {eb.START}"
    with pytest.raises(eb.BlockError, match="no EVOLVE block"):
        eb.split("int main() {}\n")
    assert eb.split("int main() {}\n", require=False).blocks == ()
