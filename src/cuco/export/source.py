"""Which candidate to export, and its builds: a run's best/ (written by `cuco run`) or any candidate id of a run,
compiled with the same toolchain, libraries and workload plugin the harness measured it with."""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from cuco.errors import CucoError
from cuco.workload import Shape, Workload


class ExportError(CucoError):
    """A candidate that cannot become an op here; the message names the fix."""


def _check_version(run: Path) -> None:
    """ExportError unless `run` (if it has a manifest) was made by this cuco: its candidates were compiled and
    verified against this version's harness ABI and kit headers, and another version's may not build or behave."""
    from cuco import __version__
    from cuco.manifest import RunManifest

    try:
        manifest = RunManifest.read(run)
    except CucoError as exc:
        raise ExportError(str(exc)) from None
    if manifest is not None and manifest.cuco_version != __version__:
        raise ExportError(f"{run} was made by cuco {manifest.cuco_version}, this is cuco {__version__}: run "
                          f"`cuco run` again with this version, or export it with cuco {manifest.cuco_version}")


@attrs.frozen
class ExportSource:
    """A verified candidate of a workload, at the shape and world it was measured at."""

    workload: Workload = attrs.field(repr=False)
    code: str = attrs.field(repr=False)
    shape: Shape
    world: int
    candidate_id: str
    point: str | None
    harness_ms: float | None      # the harness's time for it (RUN_DIR's bench), to compare an op's time with

    @classmethod
    def from_run(cls, run_dir: str | Path, candidate_id: str | None = None) -> "ExportSource":
        """`run_dir`'s best/ (default), or the candidate `candidate_id` of its database."""
        from cuco import workloads
        from cuco.db import CandidateDB

        run = Path(run_dir)
        if run.name == "best" and (run / "best.json").is_file():
            run = run.parent
        if candidate_id is None:
            best = run / "best" / "best.json"
            if not best.is_file():
                raise ExportError(f"{run} has no best/ (no candidate was verified and timed there); run `cuco run` "
                                  "on a GPU machine first, or pass candidate_id=")
            info = json.loads(best.read_text())
            if info.get("kind") == "program":
                raise ExportError(f"{run} is a run of a program; its best/kernel.cu is a whole program to build and "
                                  "run, not an op")
            candidate_id = info["candidate_id"]
            if info.get("mutation") == "original":   # nothing beat the host seed: best/ holds it (not in the db)
                _check_version(run)
                return cls._original(run, info)
        _check_version(run)
        db_file = run / "candidates.db"
        if not db_file.is_file():
            raise ExportError(f"{run} holds no candidates.db; pass a run directory of `cuco run`")
        with CandidateDB(db_file, readonly=True) as db:
            try:
                c = db.get(candidate_id)
            except Exception:
                raise ExportError(f"{run} has no candidate {candidate_id!r}") from None
        if c.status != "passed":
            raise ExportError(f"candidate {candidate_id} is {c.status!r}; only a verified and timed candidate is "
                              "exported")
        if c.workload not in workloads.available():
            raise ExportError(f"candidate {candidate_id} is of {c.workload!r}, not a built-in workload")
        workload = workloads.get(c.workload)
        bench = c.results["bench"].data
        return cls(workload, c.code, workload.parse_shape(str(bench["shape"])), int(bench["world"]), c.id,
                   c.directives.label() if c.directives else None, c.metrics.get("time_ms"))

    @classmethod
    def _original(cls, run: Path, info: dict) -> "ExportSource":
        """The host seed that a run's best/ holds when no candidate beat it (cuco.reference_best)."""
        from cuco import workloads

        if info.get("workload") not in workloads.available():
            raise ExportError(f"{run}'s best is of {info.get('workload')!r}, not a built-in workload")
        workload = workloads.get(info["workload"])
        bench = info.get("bench") or {}
        if "shape" not in bench or "world" not in bench:
            raise ExportError(f"{run}/best/best.json names no bench shape and world; run `cuco run` again")
        return cls(workload, (run / "best" / "kernel.cu").read_text(), workload.parse_shape(str(bench["shape"])),
                   int(bench["world"]), info["candidate_id"], "original", info.get("metrics", {}).get("time_ms"))

    def build(self) -> tuple[Path, Path, Path]:
        """(export library, workload plugin, candidate) shared objects, built or taken from the cache."""
        from cuco.evaluate.cascade import Evaluator
        from cuco.harness.build import build_shared
        from cuco.toolchain import csrc_dir

        if self.workload.tensors is None:
            raise ExportError(f"workload {self.workload.name} does not describe its tensors (Workload.tensors), so "
                              "it cannot be exported")
        ev = Evaluator(self.workload, world=self.world, bench_shape=self.shape)
        plugin = ev.plugin()
        link = ev.link()
        res = ev.compiler.compile(self.code, link.libraries, link.include_dirs, link.extra)
        if not res.ok:
            raise ExportError(f"candidate {self.candidate_id} does not compile here:\n{res.log_excerpt}")
        lib = build_shared(csrc_dir() / "export" / "exported_op.cpp", name="cuco_export")
        return lib, plugin, Path(res.so_path)
