"""The fast path's result for a workload, cached by content so that a start killed during (or after) the
fast path does not pay for it again: the key covers the host seed, the cuco version and the fast path's own
source (its rules), so a change to any of them makes a new entry rather than reusing a stale one."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from cuco import atomic
from cuco.candidate import Candidate
from cuco.toolchain import cache_dir


def key(seed_code: str) -> str:
    """sha256 over the seed, the cuco version and every source file of cuco.fastpath."""
    from cuco import __version__, fastpath

    h = hashlib.sha256()
    h.update(seed_code.encode())
    h.update(__version__.encode())
    for path in sorted(Path(fastpath.__file__).parent.rglob("*")):
        if path.is_file() and path.suffix in (".py", ".cuh", ".cu"):
            h.update(path.name.encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _entry(k: str) -> Path:
    return cache_dir() / "fastpath" / f"{k}.json"


def lookup(seed_code: str) -> dict[str, Any] | None:
    """The cached {"code", "rules"} of this seed, or None."""
    try:
        data = json.loads(_entry(key(seed_code)).read_text())
        return {"code": str(data["code"]), "rules": [str(r) for r in data["rules"]]}
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or damaged: compute again


def store(seed_code: str, code: str, rules: list[str]) -> None:
    """Cache the fast path's `code` and `rules` for this seed (written atomically)."""
    path = _entry(key(seed_code))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps({"code": code, "rules": rules}))


def compute_includes(workload: Any) -> tuple[Path, ...]:
    """Where the workload's compute header (cuco/compute/<name>.h) is published, for the fast path's compile check
    of a seed that calls the compute library; nothing for a workload without one."""
    if getattr(workload, "compute", None) is None:
        return ()
    from cuco.kit.compute import publish_header
    from cuco.toolchain import default_toolchain

    return (publish_header(workload, default_toolchain()),)


def candidate(workload: Any, workdir: Path) -> Candidate:
    """The host seed through the rule-based fast path (or its cached result), as a candidate with no point.

    Build files go to `workdir` (inside the run directory, so that a kill leaves nothing in the system's
    temp dir); it is removed afterwards and cleared before use."""
    from cuco.fastpath.agent import FastPathAgent

    seed = workload.seed_code()
    hit = lookup(seed)
    if hit is None:
        shutil.rmtree(workdir, ignore_errors=True)  # what a killed start left behind
        try:
            result = FastPathAgent(llm=None, check_input=False, run_on_gpu=False, workdir=workdir,
                                   include_dirs=compute_includes(workload)).run(seed)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        hit = {"code": result.code, "rules": list(result.rules_applied)}
        store(seed, hit["code"], hit["rules"])
    # no directive label: the template's conservative point is evaluated by the search as its own candidate
    return Candidate(code=hit["code"], workload=workload.name, directives=None, mutation="fastpath",
                     feedback="; ".join(hit["rules"]))
