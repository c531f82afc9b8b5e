"""The harness's JSON result as typed, validated value objects (schema 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import attrs

from cuco.errors import CucoError

SCHEMA = 1

#: Per-candidate statuses. `ok` is the only one that means verified (and benchmarked when asked).
CANDIDATE_STATUSES = ("ok", "verify_failed", "hang", "crash", "error", "unsupported", "not_run")
#: Statuses of a candidate's CUDA-graph replay (--graph-replays). `passed`: every replay checked; `failed`: a replay's
#: check failed (`failed_replay`); `not_capturable`: the launch could not be captured or instantiated; `error`: a
#: replay's fill, launch or sync failed; `hang` / `crash`: the process ended in the graph phase; `not_run`: the phase
#: was not reached (the candidate failed before it, or the process ended first).
GRAPH_STATUSES = ("passed", "failed", "not_capturable", "error", "hang", "crash", "not_run")
#: Top-level statuses: why the process ended ("running": it died before writing its final result).
RUN_STATUSES = ("ok", "hang", "crash", "error", "aborted", "running")


class HarnessResultError(CucoError):
    """The result JSON is missing a field or has a wrong value (the harness and cuco.harness disagree)."""


def _get(d: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(d, Mapping):
        raise HarnessResultError(f"harness result: {where} should be an object, got {type(d).__name__}")
    if key not in d:
        raise HarnessResultError(
            f"harness result: missing field '{where}.{key}'; the harness binary and cuco.harness are out of "
            "sync (clear the cache directory, CUCO_CACHE_DIR or ~/.cache/cuco, to rebuild it)")
    return d[key]


def _num(x: Any) -> float:
    """JSON null stands for a non-finite number (the harness writes NaN/Inf as null)."""
    return math.nan if x is None else float(x)


def _in(values: tuple[str, ...]):
    def check(_inst: Any, attr: attrs.Attribute, value: str) -> None:
        if value not in values:
            raise HarnessResultError(f"harness result: {attr.name} {value!r} is not one of {', '.join(values)}")
    return check


def _floats(xs: Any) -> tuple[float, ...]:
    return tuple(_num(x) for x in xs)


@attrs.frozen
class Timing:
    """Per-rank iteration times (ms) and their summary; `max_median_ms` is the operation's time."""

    per_rank_ms: tuple[tuple[float, ...], ...]
    per_rank_median_ms: tuple[float, ...]
    max_median_ms: float
    min_ms: float
    spread: float
    per_rank_min_ms: tuple[float, ...] = ()
    per_rank_p10_ms: tuple[float, ...] = ()
    per_rank_p90_ms: tuple[float, ...] = ()
    max_rank: int = 0
    iters: int = 0
    warmup: int = 0
    launches_per_iteration: int = 1  # each iteration's time is its launches' total over this count

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "timing") -> "Timing":
        """The timing in a harness result dict; raises HarnessResultError naming `where` when a field is missing."""
        return cls(
            per_rank_ms=tuple(_floats(r) for r in _get(d, "per_rank_ms", where)),
            per_rank_median_ms=_floats(_get(d, "per_rank_median_ms", where)),
            max_median_ms=_num(_get(d, "max_median_ms", where)),
            min_ms=_num(_get(d, "min_ms", where)),
            spread=_num(_get(d, "spread", where)),
            per_rank_min_ms=_floats(d.get("per_rank_min_ms", ())),
            per_rank_p10_ms=_floats(d.get("per_rank_p10_ms", ())),
            per_rank_p90_ms=_floats(d.get("per_rank_p90_ms", ())),
            max_rank=int(d.get("max_rank", 0)),
            iters=int(d.get("iters", 0)),
            warmup=int(d.get("warmup", 0)),
            launches_per_iteration=int(d.get("launches_per_iteration", 1)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The timing as a JSON-ready dict."""
        d = attrs.asdict(self)
        d["per_rank_ms"] = [list(r) for r in self.per_rank_ms]
        for k in ("per_rank_median_ms", "per_rank_min_ms", "per_rank_p10_ms", "per_rank_p90_ms"):
            d[k] = list(d[k])
        return d


@attrs.frozen
class Check:
    """One rank's verification against the workload's reference for one seed."""

    seed: int
    rank: int
    passed: bool
    max_abs_err: float
    rel_l2_err: float
    n_checked: int
    n_bad: int
    n_nan: int
    message: str = ""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "check") -> "Check":
        """The check in a harness result dict; raises HarnessResultError naming `where` when a field is missing."""
        return cls(
            seed=int(_get(d, "seed", where)), rank=int(_get(d, "rank", where)), passed=bool(_get(d, "passed", where)),
            max_abs_err=_num(_get(d, "max_abs_err", where)), rel_l2_err=_num(_get(d, "rel_l2_err", where)),
            n_checked=int(_get(d, "n_checked", where)), n_bad=int(_get(d, "n_bad", where)),
            n_nan=int(_get(d, "n_nan", where)), message=str(d.get("message", "")))

    def to_dict(self) -> dict[str, Any]:
        """The check as a JSON-ready dict."""
        return attrs.asdict(self)


def _opt_int(x: Any) -> int | None:
    return None if x is None else int(x)


@attrs.frozen
class GraphRun:
    """A candidate's CUDA-graph capture and replay: one delayed launch captured, replayed `replays` times with fresh
    inputs and checked each time. A candidate whose flags take their epoch from the host's iteration counter (frozen
    in the graph) fails here from its second replay on."""

    replays: int
    status: str = attrs.field(validator=_in(GRAPH_STATUSES))
    failed_replay: int | None = None
    failed_seed: int | None = None
    reason: str = ""

    @property
    def passed(self) -> bool:
        """True when every replay's check passed."""
        return self.status == "passed"

    def summary(self) -> str:
        """E.g. 'graph passed (20 replays)' or 'graph failed at replay 1 of 20 (seed 2000008): ...'."""
        if self.status == "passed":
            return f"graph passed ({self.replays} replays)"
        at = (f" at replay {self.failed_replay} of {self.replays} (seed {self.failed_seed})"
              if self.failed_replay is not None else "")
        return f"graph {self.status}{at}" + (f": {self.reason}" if self.reason else "")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "graph") -> "GraphRun":
        """The graph record in a harness result dict; raises HarnessResultError naming `where` for a missing field."""
        return cls(replays=int(_get(d, "replays", where)), status=str(_get(d, "status", where)),
                   failed_replay=_opt_int(d.get("failed_replay")), failed_seed=_opt_int(d.get("failed_seed")),
                   reason=str(d.get("reason", "")))

    def to_dict(self) -> dict[str, Any]:
        """The graph record as a JSON-ready dict."""
        return attrs.asdict(self)


@attrs.frozen
class CandidateRun:
    """What the harness found for one candidate."""

    path: str
    status: str = attrs.field(validator=_in(CANDIDATE_STATUSES))
    message: str = ""
    phase: str = ""
    checks: tuple[Check, ...] = ()
    timing: Timing | None = None
    requirements: Mapping[str, int] = attrs.field(factory=dict)
    # The CUDA-graph replay check (HarnessRequest.graph_replays); None when not asked for. Apart from `status`:
    # a candidate can be "ok" and still fail under graph replay.
    graph: GraphRun | None = None

    @property
    def ok(self) -> bool:
        """True when the harness reports status 'ok' for the candidate (the graph replay is apart: see `graph`)."""
        return self.status == "ok"

    def summary(self) -> str:
        """One line: status, time and, when it ran, the graph replay's outcome."""
        head = self.status + (f" {self.time_ms:.4f} ms" if self.time_ms is not None else "")
        if self.status != "ok" and self.message:
            head += f": {self.message}"
        return head + (f"; {self.graph.summary()}" if self.graph is not None else "")

    @property
    def time_ms(self) -> float | None:
        """The candidate's time (max over ranks of the per-rank medians), if it was benchmarked."""
        return self.timing.max_median_ms if self.timing else None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "candidate") -> "CandidateRun":
        """The run in a harness result dict; raises HarnessResultError naming `where` for a missing field."""
        timing = _get(d, "timing", where)
        graph = d.get("graph")
        return cls(
            path=str(_get(d, "path", where)), status=str(_get(d, "status", where)),
            message=str(d.get("message", "")), phase=str(d.get("phase", "")),
            checks=tuple(Check.from_dict(c, f"{where}.checks[{i}]") for i, c in enumerate(_get(d, "checks", where))),
            timing=Timing.from_dict(timing, f"{where}.timing") if timing is not None else None,
            requirements={str(k): int(v) for k, v in d.get("requirements", {}).items()},
            graph=GraphRun.from_dict(graph, f"{where}.graph") if graph is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """The candidate's run as a JSON-ready dict."""
        return {"path": self.path, "status": self.status, "message": self.message, "phase": self.phase,
                "checks": [c.to_dict() for c in self.checks],
                "timing": self.timing.to_dict() if self.timing else None, "requirements": dict(self.requirements),
                "graph": self.graph.to_dict() if self.graph else None}


@attrs.frozen
class PartRun:
    """A workload part timed alone ("compute" or "comm"): together they give the bound."""

    name: str
    is_comm: bool
    status: str = attrs.field(validator=_in(CANDIDATE_STATUSES))
    message: str = ""
    timing: Timing | None = None

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any], where: str = "part") -> "PartRun":
        """Part `name` in a harness result dict; raises HarnessResultError naming `where` when a field is missing."""
        timing = _get(d, "timing", where)
        return cls(name=name, is_comm=bool(_get(d, "is_comm", where)), status=str(_get(d, "status", where)),
                   message=str(d.get("message", "")),
                   timing=Timing.from_dict(timing, f"{where}.timing") if timing is not None else None)

    def to_dict(self) -> dict[str, Any]:
        """The part as a JSON-ready dict (its name is the key it is stored under)."""
        return {"is_comm": self.is_comm, "status": self.status, "message": self.message,
                "timing": self.timing.to_dict() if self.timing else None}


@attrs.frozen
class HarnessResult:
    """One harness run (possibly several processes, see `processes`): environment, parts and candidates."""

    status: str = attrs.field(validator=_in(RUN_STATUSES))
    message: str
    device: str
    sm_count: int
    driver_version: str
    cuda_runtime_version: str
    nccl_version: str
    world: int
    dims: tuple[int, ...]
    date: str
    hostname: str
    parts: Mapping[str, PartRun]
    candidates: tuple[CandidateRun, ...]
    driver_release: str = ""
    nccl_header_version: str = ""
    devices: tuple[int, ...] = ()
    seeds: tuple[int, ...] = ()
    elapsed_s: float = 0.0
    current: Mapping[str, Any] = attrs.field(factory=dict)  # where the process was when it wrote this
    processes: int = 1
    schema: int = SCHEMA

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HarnessResult":
        """The result the harness wrote; raises HarnessResultError for another schema or a missing field."""
        schema = int(_get(d, "schema", "result"))
        if schema != SCHEMA:
            raise HarnessResultError(f"harness result has schema {schema}, this cuco reads schema {SCHEMA}; "
                                     "rebuild the harness (clear the cuco cache directory)")
        parts = _get(d, "parts", "result")
        cands = _get(d, "candidates", "result")
        return cls(
            status=str(_get(d, "status", "result")), message=str(_get(d, "message", "result")),
            device=str(_get(d, "device", "result")), sm_count=int(_get(d, "sm_count", "result")),
            driver_version=str(_get(d, "driver_version", "result")),
            cuda_runtime_version=str(_get(d, "cuda_runtime_version", "result")),
            nccl_version=str(_get(d, "nccl_version", "result")), world=int(_get(d, "world", "result")),
            dims=tuple(int(x) for x in _get(d, "dims", "result")), date=str(_get(d, "date", "result")),
            hostname=str(_get(d, "hostname", "result")),
            parts={str(k): PartRun.from_dict(str(k), v, f"parts.{k}") for k, v in parts.items()},
            candidates=tuple(CandidateRun.from_dict(c, f"candidates[{i}]") for i, c in enumerate(cands)),
            driver_release=str(d.get("driver_release", "")), nccl_header_version=str(d.get("nccl_header_version", "")),
            devices=tuple(int(x) for x in d.get("devices", ())), seeds=tuple(int(x) for x in d.get("seeds", ())),
            elapsed_s=float(d.get("elapsed_s", 0.0)), current=dict(d.get("current", {})),
            processes=int(d.get("processes", 1)), schema=schema)

    @classmethod
    def from_json(cls, text: str) -> "HarnessResult":
        """The result in JSON text; raises HarnessResultError when the text is not JSON."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise HarnessResultError(f"harness result is not valid JSON ({exc}); the file is damaged") from None
        return cls.from_dict(data)

    @classmethod
    def from_file(cls, path: Path) -> "HarnessResult":
        """The result in the JSON file at `path`."""
        return cls.from_json(Path(path).read_text())

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict, in the harness's schema."""
        return {
            "schema": self.schema, "status": self.status, "message": self.message, "device": self.device,
            "sm_count": self.sm_count, "driver_version": self.driver_version, "driver_release": self.driver_release,
            "cuda_runtime_version": self.cuda_runtime_version, "nccl_version": self.nccl_version,
            "nccl_header_version": self.nccl_header_version, "world": self.world, "devices": list(self.devices),
            "dims": list(self.dims), "seeds": list(self.seeds), "date": self.date, "hostname": self.hostname,
            "elapsed_s": self.elapsed_s, "current": dict(self.current), "processes": self.processes,
            "parts": {k: p.to_dict() for k, p in self.parts.items()},
            "candidates": [c.to_dict() for c in self.candidates],
        }

    def to_json(self) -> str:
        """The result as indented JSON."""
        return json.dumps(self.to_dict(), indent=1)

    def candidate(self, index: int) -> CandidateRun:
        """The run of candidate `index`, in the order the candidates were given to the harness."""
        return self.candidates[index]

    def part_ms(self, name: str) -> float | None:
        """The median time of a part (e.g. 'compute', 'comm'), or None if it was not timed."""
        p = self.parts.get(name)
        return p.timing.max_median_ms if p and p.timing else None

    def environment(self) -> str:
        """One line naming device, versions, world and date: every reported figure carries it."""
        return (f"{self.device} x{self.world}, driver {self.driver_release or self.driver_version}, "
                f"CUDA {self.cuda_runtime_version}, NCCL {self.nccl_version}, {self.date}")
