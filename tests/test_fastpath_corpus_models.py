"""The example host programs' expected checksums: the manifest's lines (printed by the programs on one GPU)
agree with the numpy models computed from the programs' deterministic inputs."""

import json
import re
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
sys.path.insert(0, str(CORPUS))
import expected  # noqa: E402

MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
_LINE = re.compile(r"^checksum (?P<label>.+): (?P<value>-?\d+\.(?P<frac>\d+))$")


def test_manifest_lists_every_program_and_the_corpus_covers_the_issue():
    files = {p.stem for p in CORPUS.glob("*.cu")}
    assert files == set(MANIFEST["programs"]) and len(files) >= 15
    colls = {c for p in MANIFEST["programs"].values() for c in p["collectives"]}
    assert {"ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclBroadcast", "ncclReduce", "ncclAlltoAll",
            "ncclSend", "ncclRecv"} <= colls
    models = {p["launch_model"] for p in MANIFEST["programs"].values()}
    assert {"single-process", "thread-per-gpu", "process-per-gpu"} <= models


@pytest.mark.parametrize("program", sorted(MANIFEST["programs"]))
def test_manifest_checksums_match_the_numpy_model(program):
    lines = MANIFEST["programs"][program]["checksums_w1"]
    model = expected.expected_lines(program, 1)
    assert len(lines) == len(model)
    for line, (label, value) in zip(lines, model):
        m = _LINE.match(line)
        assert m, line
        assert m["label"] == label
        tol = 0.5 * 10 ** -len(m["frac"]) + 1e-6 * abs(value)
        assert abs(float(m["value"]) - value) <= tol, (line, value)
