"""Running the harness binary: one request, one or more processes, one merged `HarnessResult`.

The harness process has its own watchdog; this side adds a hard outer timeout that kills the whole process
group, turns a process that died without a final result into "crash" (or "hang" when it had to be killed)
for the candidate it was running, and re-runs the candidates a hang or crash left unreached in a fresh
process, so one bad candidate never costs the others.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from cuco.errors import CucoError
from cuco.harness.build import harness_binary
from cuco.harness.result import CandidateRun, GraphRun, HarnessResult, HarnessResultError, PartRun
from cuco.process import ProcessOutcome, run_group, scrubbed_env
from cuco.toolchain import Toolchain

#: Seconds the outer timeout allows beyond the harness's own process deadline.
OUTER_MARGIN_S = 20.0
#: Top-level statuses after which unreached candidates are worth a fresh process.
RESTARTABLE = ("hang", "crash", "aborted")
_TAIL = 2000


class HarnessRequestError(CucoError, ValueError):
    """A harness request that cannot run (bad sizes, device list, counts)."""


def _paths(xs: Sequence[str | Path]) -> tuple[Path, ...]:
    if isinstance(xs, (str, Path)):
        raise HarnessRequestError("candidates must be a list of paths, not a single path")
    return tuple(Path(x) for x in xs)


#: Input distributions of the harness's fills: 256 levels (exact small products) or full-entropy bf16.
INPUTS = ("q256", "full")
#: The most graph replays one request may ask for (the harness's kMaxGraphReplays).
MAX_GRAPH_REPLAYS = 100_000
#: The most launches one timed iteration may hold (the harness's kMaxLaunchesPerIteration).
MAX_LAUNCHES_PER_ITERATION = 1000
#: The seed bit that selects full-entropy inputs in cuco/gen.cuh (kFullEntropySeed).
FULL_ENTROPY_SEED = 1 << 63


def seed_of(seed: int, inputs: str) -> int:
    """The seed the harness receives for `seed` under input distribution `inputs` ('q256' or 'full')."""
    if not 0 <= seed < FULL_ENTROPY_SEED:
        raise HarnessRequestError(f"seeds must be in [0, 2^63), got {seed}")
    return seed | FULL_ENTROPY_SEED if inputs == "full" else seed


def _ints(xs: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(x) for x in xs)


def _opt_ints(xs: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if xs is None else tuple(int(x) for x in xs)


@attrs.frozen
class HarnessRequest:
    """What to run: a workload plugin, candidates (shared objects, run in order), sizes and settings."""

    workload_plugin: Path = attrs.field(converter=Path)
    candidates: tuple[Path, ...] = attrs.field(converter=_paths)
    dims: tuple[int, ...] = attrs.field(converter=_ints)
    world: int = 2
    devices: tuple[int, ...] | None = attrs.field(default=None, converter=_opt_ints)
    seeds: tuple[int, ...] = attrs.field(default=(1, 2), converter=_ints)
    # The input distribution of every fill (cuco/gen.cuh): "q256", 256 levels in [-1, 1), or "full", full-entropy
    # bf16 of the same variance (what torch's randn-fed anchors see; the data moves a power-capped GPU's clock).
    inputs: str = attrs.field(default="q256", validator=attrs.validators.in_(INPUTS))
    verify: bool = True
    bench: bool = True
    warmup: int = 5
    iters: int = 30
    parts: bool = False
    timeout_s: float = 120.0
    # Verified launches start the side stream (the communication path) this many microseconds late, so a
    # candidate that does not wait for its data reads poison and fails (0: off).
    delay_comm_us: float = 0.0
    # "thread": every rank a thread of one harness process (the cascade's mode: one CUDA/NCCL start-up per
    # run instead of W, and the same timings). "process": one harness process per rank (cuco/harness/ranks.py),
    # as MPI/torchrun programs and NVSHMEM (one PE per process) need.
    mode: str = attrs.field(default="thread", validator=attrs.validators.in_(("thread", "process")))
    # After its timed runs, each candidate is launched a few more times under CUPTI and its kernels and copies
    # written to trace_dir/candidate<i>[.rank<r>].json (cuco.report.timeline reads them). None: no tracing.
    trace_dir: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    # libnvshmem_host.so.3 for candidates that declare uses_nvshmem; None: the toolchain's (run_harness finds it).
    nvshmem_lib: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    # After verification (and timing), each candidate's delayed launch is captured once in a CUDA graph and replayed
    # this many times, each replay with fresh inputs, poisoned outputs and a check on every rank; the outcome is the
    # candidate's `graph` (its status stays its verify/bench result). 0: off.
    graph_replays: int = 0
    # With parts: every rank runs the workload's compute part this many milliseconds before anything is timed, so
    # the first timed target (the parts) does not meet a GPU at idle clocks. 0: off.
    warm_ms: float = 0.0
    # Each timed iteration: this many launches back to back (no host barrier between them, one event pair), its time
    # the total over this count. 1: one launch per iteration after a host barrier, from an idle GPU (host enqueue
    # latency and the ranks' skew at the barrier inside every interval); more: the steady state of a training step,
    # where the GPU runs ahead of the host and the skew is paid once per iteration.
    launches_per_iteration: int = 1

    def __attrs_post_init__(self) -> None:
        # Non-negative: a dim may be a flag (attention_cp's CAUSAL is 0 or 1); each workload checks its own ranges.
        if not self.dims or len(self.dims) > 8 or any(d < 0 for d in self.dims):
            raise HarnessRequestError(f"dims must be 1 to 8 non-negative values (sizes or flags), got {self.dims}")
        if self.world < 1:
            raise HarnessRequestError(f"world must be >= 1, got {self.world}")
        if self.devices is not None and (len(self.devices) != self.world or min(self.devices) < 0):
            raise HarnessRequestError(f"devices {self.devices} must list {self.world} device ordinals, one per rank")
        if self.verify and (not self.seeds or min(self.seeds) < 0):
            raise HarnessRequestError(f"verification needs at least one non-negative seed, got {self.seeds}")
        if self.warmup < 0 or (self.bench and self.iters < 1):
            raise HarnessRequestError(f"warmup must be >= 0 and iters >= 1, got warmup={self.warmup} iters={self.iters}")
        if not 0 <= self.delay_comm_us <= 1e6:
            raise HarnessRequestError(f"delay_comm_us must be between 0 and 1e6 (one second), got {self.delay_comm_us}")
        if self.timeout_s <= 0:
            raise HarnessRequestError(f"timeout_s must be > 0, got {self.timeout_s}")
        if (isinstance(self.graph_replays, bool) or not isinstance(self.graph_replays, int)
                or not 0 <= self.graph_replays <= MAX_GRAPH_REPLAYS):
            raise HarnessRequestError(f"graph_replays must be an integer from 0 (off) to {MAX_GRAPH_REPLAYS}, "
                                      f"got {self.graph_replays!r}")
        if (isinstance(self.launches_per_iteration, bool) or not isinstance(self.launches_per_iteration, int)
                or not 1 <= self.launches_per_iteration <= MAX_LAUNCHES_PER_ITERATION):
            raise HarnessRequestError(f"launches_per_iteration must be an integer from 1 to "
                                      f"{MAX_LAUNCHES_PER_ITERATION}, got {self.launches_per_iteration!r}")
        if not 0 <= self.warm_ms <= 60000:
            raise HarnessRequestError(f"warm_ms must be between 0 and 60000 (a minute), got {self.warm_ms}")
        if not self.candidates and not self.parts:
            raise HarnessRequestError("nothing to run: give candidates or set parts=True")

    def total_timeout_s(self) -> float:
        """The harness's process deadline: every phase it may enter, each bounded by timeout_s."""
        phases = 2 + (2 if self.parts else 0) + (1 if self.warm_ms else 0) + len(self.candidates) * (
            4 + (len(self.seeds) if self.verify else 0) + (1 if self.trace_dir is not None else 0)
            + (1 if self.graph_replays else 0))
        return phases * self.timeout_s

    def argv(self, binary: Path, out: Path) -> list[str]:
        """The harness command line writing its result to `out`."""
        argv = [str(binary), "--workload", str(self.workload_plugin)]
        for c in self.candidates:
            argv += ["--candidate", str(c)]
        argv += ["--dims", ",".join(map(str, self.dims)), "--world", str(self.world)]
        if self.devices is not None:
            argv += ["--devices", ",".join(map(str, self.devices))]
        argv += ["--seeds", ",".join(str(seed_of(s, self.inputs)) for s in (self.seeds or (1,))),
                 "--verify", str(int(self.verify)),
                 "--bench", str(int(self.bench)), "--warmup", str(self.warmup), "--iters", str(self.iters),
                 "--parts", str(int(self.parts)), "--timeout-s", f"{self.timeout_s:g}",
                 "--total-timeout-s", f"{self.total_timeout_s():g}", "--out", str(out)]
        if self.delay_comm_us:
            argv += ["--delay-comm-us", f"{self.delay_comm_us:g}"]
        if self.trace_dir is not None:
            argv += ["--trace", str(self.trace_dir)]
        if self.graph_replays:
            argv += ["--graph-replays", str(self.graph_replays)]
        if self.warm_ms:
            argv += ["--warm-ms", f"{self.warm_ms:g}"]
        if self.launches_per_iteration != 1:
            argv += ["--launches-per-iteration", str(self.launches_per_iteration)]
        if self.nvshmem_lib is not None:
            argv += ["--nvshmem-lib", str(self.nvshmem_lib)]
        return argv


    def command(self, binary: Path, out: Path) -> list[str]:
        """What to run: the harness itself (thread mode) or the rank launcher around it (process mode)."""
        argv = self.argv(binary, out)
        if self.mode == "thread":
            return argv
        return [sys.executable, str(Path(__file__).with_name("ranks.py")), "--world", str(self.world), "--", *argv]


def _tail(outcome: ProcessOutcome) -> str:
    text = (outcome.stderr.strip() or outcome.stdout.strip())
    return text[-_TAIL:]


def _exit_text(outcome: ProcessOutcome) -> str:
    if outcome.timed_out:
        return "killed by the outer timeout"
    rc = outcome.returncode
    if rc is not None and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


def _complete_dict(raw: dict[str, Any], outcome: ProcessOutcome) -> dict[str, Any]:
    """A snapshot from a process that died mid-run, completed: the running target crashed (or hung)."""
    status = "hang" if outcome.timed_out else "crash"
    cur = raw.get("current", {}) or {}
    phase = str(cur.get("phase", "?"))
    why = f"the harness process died ({_exit_text(outcome)}) in phase {phase}: {_tail(outcome) or 'no output'}"
    kind, index = cur.get("kind"), int(cur.get("index", -1))
    cands = raw.get("candidates", [])
    parts = raw.get("parts", {})
    graph = cands[index].get("graph") if kind == "candidate" and 0 <= index < len(cands) else None
    if isinstance(graph, dict) and graph.get("status") == "running":
        # It had verified (and been timed) before its graph phase, as the harness's own fatal path records it.
        graph.update(status=status, reason=why)
        if cands[index].get("status", "") in ("", "ok"):
            cands[index].update(status="ok", message=f"graph replay: {status}: {why}", phase="")
    elif kind == "candidate" and 0 <= index < len(cands) and cands[index].get("status", "") in ("", "ok"):
        cands[index].update(status=status, message=why, phase=phase)
    if kind == "part":
        for j, name in enumerate(parts):
            if j == index and parts[name].get("status", "") == "":
                parts[name].update(status=status, message=why)
    for c in cands:
        if c.get("status", "") == "":
            c.update(status="not_run", message=f"not reached: {why}")
    for p in parts.values():
        if p.get("status", "") == "":
            p.update(status="not_run", message=f"not reached: {why}")
    raw["status"] = status
    raw["message"] = why
    return raw


def _no_result(request: HarnessRequest, outcome: ProcessOutcome) -> HarnessResult:
    why = f"the harness wrote no result ({_exit_text(outcome)}): {_tail(outcome) or 'no output'}"
    return HarnessResult(
        status="error", message=why, device="", sm_count=0, driver_version="", cuda_runtime_version="",
        nccl_version="", world=request.world, dims=request.dims, date="", hostname="", parts={},
        candidates=tuple(_not_run(str(c), why, request.graph_replays) for c in request.candidates),
        seeds=request.seeds)


def _not_run(path: str, why: str, graph_replays: int = 0) -> CandidateRun:
    graph = GraphRun(replays=graph_replays, status="not_run", reason=f"not reached: {why}") if graph_replays else None
    return CandidateRun(path=path, status="not_run", message=f"not reached: {why}", graph=graph)


def interpret(request: HarnessRequest, out: Path, outcome: ProcessOutcome) -> HarnessResult:
    """The result of one harness process from its JSON file (if any) and how it ended."""
    raw: Any = None
    if out.exists():
        try:
            raw = json.loads(out.read_text())
        except (ValueError, OSError):
            raw = None
    if not isinstance(raw, dict):   # `[]` or a number is no result either: never an exception here
        return _no_result(request, outcome)
    if raw.get("status") == "running":
        raw = _complete_dict(raw, outcome)
    return HarnessResult.from_dict(raw)


def run_harness(request: HarnessRequest, toolchain: Toolchain | None = None, *, binary: Path | None = None,
                env: Mapping[str, str] | None = None, workdir: Path | None = None,
                max_processes: int | None = None, outer_margin_s: float = OUTER_MARGIN_S) -> HarnessResult:
    """Run every candidate of `request` and return one merged result.

    Candidates that a hang, crash or abort left unreached run again in a fresh process, as long as each process
    gets further than the one before (at most `max_processes`, default one per candidate plus one). Each process
    is killed (whole group) `outer_margin_s` after the harness's own deadline, should its watchdog fail.
    """
    exe = Path(binary) if binary is not None else harness_binary(toolchain)
    if request.nvshmem_lib is None:
        from cuco.harness.build import nvshmem_host_library  # noqa: PLC0415

        request = attrs.evolve(request, nvshmem_lib=nvshmem_host_library(toolchain))
    run_env = env if env is not None else scrubbed_env()
    n = len(request.candidates)
    runs: list[CandidateRun | None] = [None] * n
    pending = list(range(n))
    parts: dict[str, PartRun] = {}
    results: list[HarnessResult] = []
    limit = max_processes if max_processes is not None else n + 1
    with tempfile.TemporaryDirectory(prefix="cuco-harness-", dir=workdir) as tmp:
        while True:
            sub = attrs.evolve(request, candidates=[request.candidates[i] for i in pending],
                               parts=request.parts and not parts)
            if not sub.candidates and not sub.parts:
                break
            out = Path(tmp) / f"result-{len(results)}.json"
            outcome = run_group(sub.command(exe, out), timeout_s=sub.total_timeout_s() + outer_margin_s,
                                env=run_env, cwd=Path(tmp))
            res = interpret(sub, out, outcome)
            results.append(res)
            if sub.parts:
                parts.update(res.parts)
            if len(res.candidates) != len(pending):
                raise HarnessResultError(f"the harness reported {len(res.candidates)} candidates for {len(pending)} "
                                         "requested; the binary and cuco.harness are out of sync (clear the cache)")
            for j, i in enumerate(pending):
                runs[i] = res.candidates[j]
            remaining = [i for j, i in enumerate(pending) if res.candidates[j].status == "not_run"]
            progressed = len(remaining) < len(pending)
            if not remaining or res.status not in RESTARTABLE or not progressed or len(results) >= limit:
                break
            pending = remaining
    return _merge(results, parts, runs)


def _merge(results: list[HarnessResult], parts: dict[str, PartRun], runs: list[CandidateRun | None]) -> HarnessResult:
    base = next((r for r in results if r.device), results[0])
    last = results[-1]
    reached = all(r is not None and r.status != "not_run" for r in runs)
    notes = [f"process {k + 1}: {r.status}: {r.message}" for k, r in enumerate(results) if r.status != "ok"]
    return attrs.evolve(
        base, status="ok" if reached and last.status != "error" else last.status,
        message="; ".join(notes), parts=parts or base.parts,
        candidates=tuple(r for r in runs if r is not None), processes=len(results),
        elapsed_s=sum(r.elapsed_s for r in results), current=last.current)


def gpu_count() -> int:
    """Visible NVIDIA GPUs (nvidia-smi, else /proc/driver/nvidia), honouring CUDA_VISIBLE_DEVICES; 0 if none."""
    n = 0
    smi = shutil.which("nvidia-smi")
    found = False
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
            if out.returncode == 0:
                n = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
                found = True
        except (OSError, subprocess.SubprocessError):
            pass
    if not found:
        gpus = Path("/proc/driver/nvidia/gpus")
        n = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip()]
        if any(v.strip().startswith("-") for v in ids):  # "-1" hides all devices from that entry on
            ids = ids[:next(i for i, v in enumerate(ids) if v.strip().startswith("-"))]
        n = min(n, len(ids))
    return n
