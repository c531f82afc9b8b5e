"""The fast path on the example host programs (tests/fixtures/host_programs): every program is analysed as
its manifest says, transformed by the rules alone, keeps its launch model, and its transform compiles."""

import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuco.fastpath import verify
from cuco.fastpath.analyze import analyze
from cuco.fastpath.transform import PRELUDE_END, plan, transform

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
sys.path.insert(0, str(CORPUS))
from corpus import MANIFEST, PROGRAMS, gap, params  # noqa: E402
_SETUP = ("ncclCommInitAll", "ncclCommInitRank", "ncclGetUniqueId", "launch_ranks", "std::thread", "fork")


def _transformed(name: str):
    text = (CORPUS / f"{name}.cu").read_text()
    a = analyze(text, f"{name}.cu")
    return text, a, transform(a, text)


@pytest.mark.parametrize("name", params("analysis"))
def test_analysis_matches_the_manifest(name):
    a = analyze((CORPUS / f"{name}.cu").read_text(), f"{name}.cu")
    assert sorted({c.name for c in a.collectives}) == sorted(MANIFEST[name]["collectives"])
    assert a.launch_model == MANIFEST[name]["launch_model"]
    assert plan(a).problems == ()


@pytest.mark.parametrize("name", params("analysis"))
def test_transform_keeps_the_launch_model_and_replaces_every_host_collective(name):
    text, a, t = _transformed(name)
    body = t.code.split(PRELUDE_END, 1)[1]
    text = text.encode()[a.include_end:].decode()
    after = analyze(t.code, "transformed")
    assert after.collectives == () and after.launch_model == a.launch_model
    for call in _SETUP:  # communicator setup and the process/thread structure are untouched (creation is recorded
        # through cucoCommInit*, which calls NCCL's with the same arguments)
        recorded = rf"\b(?:{re.escape(call)}|{re.escape(call.replace('nccl', 'cuco', 1))})\b"
        assert len(re.findall(recorded, body)) == len(re.findall(rf"\b{re.escape(call)}\b", text))
    assert len(t.rules_applied) == len(a.collectives)
    comm = {c.send_storage for c in a.collectives} | {c.recv_storage for c in a.collectives}
    converted = [x for x in a.allocations if x.storage in comm]
    assert converted and len(re.findall(r"\bcucoSymAlloc(Async)?\(", body)) == len(converted)


def test_every_transform_compiles():
    """All transforms the rules make, compiled in parallel (cached by content under cuco's cache directory); the
    ones that fail are exactly the manifest's build gaps."""
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cuco-fastpath-corpus"

    def build(name):
        return name, verify.build(_transformed(name)[2].code, workdir=work / name, include_dirs=[CORPUS], name=name)

    names = [n for n in PROGRAMS if not gap(n, "analysis")]
    with ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as pool:
        failed = {n: b.summary() for n, b in pool.map(build, names) if not b.ok}
    assert sorted(failed) == sorted(n for n in names if gap(n, "build")), failed
