"""Every text cuco renders stays byte-identical unless a change means it to: the SHA-256 of every rendered point of
every built-in workload's space and of every corpus program's space at W = 1, 2 and 4, and of the fast path's
rule-based transform of every corpus program and workload seed (tests/golden/rendered_hashes.json). A refactor keeps
them all; a change that alters a rendering on purpose rewrites the file:

    python tests/test_rendered_hashes.py --write
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).parent / "golden" / "rendered_hashes.json"
CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
WORLDS = (1, 2, 4)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _space_hashes(space_of, render) -> dict[str, str]:
    from cuco.design_space import Topology

    labels = {}
    for w in WORLDS:
        for p in space_of(Topology(world=w, nodes=1, gin_available=True, nvshmem_available=True)).points():
            labels.setdefault(p.label(), p)
    return {label: _sha(render(p)) for label, p in sorted(labels.items())}


def compute() -> dict[str, dict[str, str]]:
    """{kind/name: {point or 'transform': hash}} for the workloads, their seeds and the corpus programs."""
    from cuco import workloads
    from cuco.errors import CucoError
    from cuco.fastpath.analyze import analyze
    from cuco.fastpath.transform import transform
    from cuco.program.workload import ProgramWorkload

    out: dict[str, dict[str, str]] = {}
    for name in workloads.available():
        wl = workloads.get(name)
        out[f"workload/{name}"] = _space_hashes(wl.space, wl.render)
        seed = wl.seed_code()
        out[f"workload/{name}"]["fastpath-transform"] = _sha(transform(analyze(seed, "seed.cu"), seed).code)
    for path in sorted(CORPUS.glob("*.cu")):
        key = f"program/{path.stem}"
        text = path.read_text()
        try:
            out[key] = {"fastpath-transform": _sha(transform(analyze(text, path.name), text).code)}
        except CucoError as exc:
            out[key] = {"fastpath-refused": _sha(str(exc))}
            continue
        try:
            pw = ProgramWorkload.load(path)
        except CucoError as exc:
            out[key]["program-refused"] = _sha(str(exc))
            continue
        out[key].update(_space_hashes(pw.space, pw.render))
    return out


def test_every_rendering_is_byte_identical_to_the_recorded_one():
    want = json.loads(GOLDEN.read_text())
    got = compute()
    changed = sorted(f"{k}:{p}" for k in want for p in want[k] if got.get(k, {}).get(p) != want[k][p])
    added = sorted(f"{k}:{p}" for k in got for p in got[k] if p not in want.get(k, {}))
    assert not changed and not added, (f"{len(changed)} renderings changed, {len(added)} new (first: "
                                       f"{(changed + added)[:5]}); if meant, run python {__file__} --write")
    assert sum(len(v) for v in want.values()) > 300


if __name__ == "__main__" and "--write" in sys.argv:
    GOLDEN.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
