"""The harness runner's levels (cuco.evaluate.levels.Cascade): static -> compile -> verify -> bench over the
plugin harness, each level a LevelResult on the candidate.

Batching: L0 runs per candidate; L1 compiles every survivor in parallel; L2 verifies the survivors at the
small shape on several seeds in ONE harness process per GPU group (groups run concurrently); L3 times the
survivors at the full shape in ONE harness process, serialised over the host (see executor.py). The
harness runner re-runs the candidates left `not_run` after a hang or crash.

Fitness is T_host / T_candidate. The workload's host seed is an extra candidate in EVERY L3 batch rather
than a number cached per (shape, device): the ratio is then taken under the same clocks, thermal state,
NCCL build and neighbours, so drift between runs cannot masquerade as speedup; the cost is one more
timed program per batch. L3 also verifies at the full shape (first seed): races can hide at small sizes.
"""

from __future__ import annotations

import datetime
import functools
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs

from cuco.candidate import Candidate, LevelResult
from cuco.errors import CucoError
from cuco.evaluate.batch import Batch
from cuco.evaluate.compile import Compiler
from cuco.evaluate.executor import DeviceGroup, Executor
from cuco.evaluate.levels import (DEFAULT_VERIFY_DELAY_US, NO_GPU_REASON, Cascade, failure_feedback,
                                  feedback_headline, mark_not_run_here)
from cuco.evaluate.harness_runner import HarnessRunner, HarnessWorkload, LocalHarness
from cuco.evaluate.static import check_static
from cuco.kit.compute import LinkOptions, link_options
from cuco.shape import Shape
from cuco.toolchain import Toolchain

__all__ = ["DEFAULT_VERIFY_DELAY_US", "NO_GPU_REASON", "CascadeError", "Evaluator", "HarnessRunner",
           "HarnessWorkload", "LocalHarness", "failure_feedback", "feedback_headline", "mark_not_run_here"]

_STATUS_TEXT = {"verify_failed": "wrong result", "hang": "hang (killed at the timeout)", "crash": "crashed",
                "error": "error", "unsupported": "unsupported here", "not_run": "not run"}


class CascadeError(CucoError):
    """The cascade itself cannot run (the workload plugin does not build, the harness is missing)."""


def _plain(value: Any) -> Any:
    """JSON-friendly copy of harness result pieces (attrs objects, mappings, sequences)."""
    if attrs.has(type(value)):
        return _plain(attrs.asdict(value, recurse=False))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def _median_ms(obj: Any) -> float | None:
    timing = getattr(obj, "timing", None)
    value = getattr(timing, "max_median_ms", None)
    return float(value) if value is not None else None


def _first_bad_check(run: Any) -> str:
    """The numbers of the first failed check: what an LLM needs to see how wrong the output is."""
    for c in getattr(run, "checks", None) or ():
        if not getattr(c, "passed", True):
            return (f"seed {c.seed}, rank {c.rank}: {c.n_bad} of {c.n_checked} elements outside tolerance, "
                    f"{c.n_nan} NaN/Inf (unwritten outputs stay NaN), max abs err {c.max_abs_err:.3g}, "
                    f"rel L2 err {c.rel_l2_err:.3g}")
    return ""


def _run_reason(run: Any) -> str:
    status = getattr(run, "status", "error")
    message = (getattr(run, "message", "") or "").strip()
    phase = getattr(run, "phase", "")
    text = _STATUS_TEXT.get(status, status)
    if phase and status not in ("unsupported", "verify_failed"):
        text += f" in {phase}"
    text = f"{text}: {message}" if message else text
    numbers = _first_bad_check(run) if status == "verify_failed" else ""
    return f"{text} ({numbers})" if numbers else text


class Evaluator(Cascade):
    """The cascade of levels over the plugin harness, for one workload and world size (see the module docstring).

    `parent_code(candidate)` returns the parent's source for the frozen-region check (None: skip it).
    With no GPU group, L0 and L1 still run and L2/L3 are recorded as not run here (NO_GPU_REASON), which
    makes the candidate 'unmeasured', never a failure.
    `verify_timeout_s` (L2) and `timeout_s` (L3) bound each harness phase (setup, one candidate's
    launch, check or timing loop); the harness runner derives each process's deadline from them.
    `harness` runs each harness process (None: LocalHarness, this machine's).
    """

    def __init__(self, workload: HarnessWorkload, world: int | None = None, toolchain: Toolchain | None = None,
                 executor: Executor | None = None, compiler: Compiler | None = None,
                 verify_shape: Shape | str | Sequence[int] | None = None,
                 bench_shape: Shape | str | Sequence[int] | None = None, seeds: Sequence[int] = (1, 2),
                 iters: int = 30, warmup: int = 5, timeout_s: float = 120.0, verify_timeout_s: float = 60.0,
                 parent_code: Callable[[Candidate], str | None] | None = None, verify_at_bench: bool = True,
                 verify_delay_us: float = DEFAULT_VERIFY_DELAY_US, bench_inputs: str = "full",
                 harness: HarnessRunner | None = None):
        if not seeds:
            raise ValueError("seeds must name at least one input seed, e.g. (1, 2)")
        if iters < 1 or warmup < 0:
            raise ValueError(f"iters must be >= 1 and warmup >= 0, got iters={iters}, warmup={warmup}")
        self.workload = workload
        self.world = world if world is not None else workload.default_world
        self.verify_shape = workload.resolve_shape(verify_shape, self.world, "verify")
        self.bench_shape = workload.resolve_shape(bench_shape, self.world, "bench")
        self.compiler = compiler if compiler is not None else Compiler(toolchain)
        self.executor = executor if executor is not None else Executor(world=self.world)
        if self.executor.world != self.world:
            raise ValueError(f"the executor groups {self.executor.world} GPUs per run but world is {self.world}")
        self.seeds = tuple(int(s) for s in seeds)
        self.iters, self.warmup = iters, warmup
        self.timeout_s, self.verify_timeout_s = timeout_s, verify_timeout_s
        self.parent_code = parent_code
        self.verify_at_bench = verify_at_bench
        self.verify_delay_us = verify_delay_us
        if bench_inputs not in ("q256", "full"):
            raise ValueError(f"bench_inputs must be 'full' (full-entropy bf16, figures of record) or 'q256', "
                             f"got {bench_inputs!r}")
        self.bench_inputs = bench_inputs
        self.harness = harness if harness is not None else LocalHarness()
        self._plugin_so: Path | None = None
        self._seed: str | None = None
        self._link_options: LinkOptions | None = None
        self._one_pe_per_process: set[str] = set()  # shared objects of NVSHMEM programs

    def link(self) -> LinkOptions:
        """The workload's libraries and compute library (built once here), for plugin, seed and candidates."""
        if self._link_options is None:
            try:
                self._link_options = link_options(self.workload, self.compiler.toolchain)
            except CucoError as exc:
                raise CascadeError(f"workload {self.workload.name}: {exc}") from None
        return self._link_options

    def _seed_code(self) -> str:
        if self._seed is None:
            self._seed = self.workload.seed_code()
        return self._seed

    @property
    def toolchain(self) -> Toolchain:
        """The toolchain candidates are compiled with."""
        return self.compiler.toolchain

    @property
    def scale(self) -> str:
        """The timed shape, as the run's first line names it."""
        return f"shape {self.bench_shape}"

    # -- L0 and L1 ---------------------------------------------------------------------------------------
    def static_level(self, c: Candidate) -> LevelResult:
        """L0: the workload's name, then the static check against the parent's frozen regions."""
        if c.workload != self.workload.name:
            return LevelResult("static", False, f"candidate is for workload {c.workload!r}, this cascade "
                               f"evaluates {self.workload.name!r}")
        # The workload's own host seed has no EVOLVE block: it is measured, never mutated.
        is_seed = c.mutation == "seed" and c.code == self._seed_code()
        return check_static(c.code, self.parent_code(c) if self.parent_code else None, require_blocks=not is_seed)

    def compile_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L1: every survivor compiled in parallel into the content-addressed cache."""
        link = self.link()
        self._tell(batch, alive, "compile")

        def compiled(k: int, outcome: Any) -> None:  # final for a failure, and without GPUs for a success too
            if not outcome.ok or not self.has_gpu:
                self._tell(batch, [alive[k]], "done")  # k: the place in the list of codes below

        outcomes = self.compiler.compile_many([batch[cid].code for cid in alive], link.libraries, link.include_dirs,
                                              link.extra, on_done=compiled)
        from cuco.libraries import libraries_for  # noqa: PLC0415

        survivors = []
        for cid, o in zip(alive, outcomes):
            if o.ok and "nvshmem" in libraries_for(batch[cid].code, ()):
                self._one_pe_per_process.add(str(o.so_path))
            data = {"cached": o.cached, "key": o.key, "so_path": str(o.so_path) if o.so_path else None}
            batch.record(cid, LevelResult("compile", o.ok, o.log_excerpt, o.seconds, data))
            if o.ok:
                survivors.append(cid)
        return survivors

    # -- harness runs (L2, L3) ---------------------------------------------------------------------------
    def plugin(self) -> Path:
        """The workload plugin's shared object, built (and cached) the harness's way."""
        if self._plugin_so is None:
            from cuco.harness.build import build_shared

            try:
                link = self.link()
                self._plugin_so = build_shared(self.workload.plugin_path().resolve(), link.libraries,
                                               toolchain=self.compiler.toolchain, include_dirs=link.include_dirs,
                                               extra=link.extra)
            except CucoError as exc:
                raise CascadeError(f"workload {self.workload.name}: its plugin does not build: {exc}") from None
        return self._plugin_so

    def _harness(self, sos: Sequence[Path], shape: Shape, *, bench: bool, verify: bool, seeds: Sequence[int],
                 timeout_s: float, group: DeviceGroup, inputs: str = "q256") -> tuple[dict[str, Any], Any, float, str]:
        """One harness process: ({str(so): CandidateRun}, HarnessResult or None, seconds, error text)."""
        try:
            from cuco.harness.runner import HarnessRequest
        except ImportError as exc:
            raise CascadeError(f"cuco.harness is not importable ({exc}); reinstall cuco") from None

        # Thread mode (one CUDA/NCCL start-up, the same times) unless an NVSHMEM program needs one PE per process.
        mode = "process" if self.world > 1 and any(str(so) in self._one_pe_per_process for so in sos) else "thread"
        request = HarnessRequest(workload_plugin=self.plugin(), candidates=tuple(sos), dims=tuple(shape.dims),
                                 world=self.world, devices=tuple(group.devices), seeds=tuple(seeds), inputs=inputs,
                                 verify=verify, bench=bench, warmup=self.warmup, iters=self.iters, parts=bench,
                                 timeout_s=timeout_s, delay_comm_us=self.verify_delay_us if verify else 0.0,
                                 mode=mode)
        start = time.monotonic()
        try:
            result = self.harness.run(request, self.compiler.toolchain)
        except CucoError as exc:
            return {}, None, time.monotonic() - start, f"harness run failed: {exc}"
        runs = {str(Path(r.path)): r for r in result.candidates}
        return runs, result, time.monotonic() - start, ""

    def _verify_job(self, sos: Sequence[Path], group: DeviceGroup) -> tuple[dict[str, Any], Any, float, str]:
        return self._harness(sos, self.verify_shape, bench=False, verify=True, seeds=self.seeds,
                             timeout_s=self.verify_timeout_s, group=group)

    def verify_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L2: the survivors at the verify shape on every seed, one harness process per GPU group."""
        sos = list(dict.fromkeys(Path(batch[cid].results["compile"].data["so_path"]) for cid in alive))
        n = len(self.executor.groups)
        chunks = [sos[k::n] for k in range(n) if sos[k::n]]
        batches = self.executor.map([functools.partial(self._verify_job, c) for c in chunks])
        runs: dict[str, Any] = {}
        errors: dict[str, tuple[str, float]] = {}
        for chunk, (chunk_runs, _result, seconds, error) in zip(chunks, batches):
            runs.update(chunk_runs)
            for so in chunk:
                errors[str(so)] = (error or "the harness returned no result for this candidate", seconds / len(chunk))
        survivors = []
        for cid in alive:
            so = batch[cid].results["compile"].data["so_path"]
            run = runs.get(so)
            data = {"shape": str(self.verify_shape), "seeds": list(self.seeds)}
            if run is None:
                reason, seconds = errors[so]
                batch.record(cid, LevelResult("verify", False, reason, seconds, data))
                continue
            data.update(status=run.status, phase=getattr(run, "phase", ""), checks=_plain(getattr(run, "checks", None)))
            seconds = float(getattr(run, "seconds", None) or errors[so][1])
            ok = run.status == "ok"
            batch.record(cid, LevelResult("verify", ok, "" if ok else _run_reason(run), seconds, data))
            if ok:
                survivors.append(cid)
        return survivors

    def bench_level(self, batch: Batch, alive: list[str]) -> None:
        """L3: the survivors and the host seed timed at the bench shape in one harness process."""
        link = self.link()
        seed = self.compiler.compile(self._seed_code(), link.libraries, link.include_dirs, link.extra)
        if not seed.ok:
            for cid in alive:
                batch.record(cid, LevelResult("bench", False, "the workload's host seed does not compile, "
                                              f"so there is no baseline:\n{seed.log_excerpt}"))
            return
        sos = list(dict.fromkeys([seed.so_path] + [Path(batch[cid].results["compile"].data["so_path"])
                                                   for cid in alive]))
        verify = self.verify_at_bench
        runs, result, seconds, error = self.executor.run(
            lambda g: self._harness(sos, self.bench_shape, bench=True, verify=verify, seeds=self.seeds[:1],
                                    timeout_s=self.timeout_s, group=g, inputs=self.bench_inputs), exclusive=True)
        host_run = runs.get(str(seed.so_path))
        host_ms = _median_ms(host_run) if host_run is not None and host_run.status == "ok" else None
        context = self._context(result, host_run, host_ms)
        compute_ms, comm_ms = self._parts(result)
        for cid in alive:
            run = runs.get(batch[cid].results["compile"].data["so_path"])
            data = dict(context)
            if run is None or run.status != "ok" or _median_ms(run) is None:
                reason = _run_reason(run) if run is not None else (error or "the harness returned no result")
                batch.record(cid, LevelResult("bench", False, reason, seconds / len(sos), data))
                continue
            timing = run.timing
            data["per_rank_median_ms"] = _plain(getattr(timing, "per_rank_median_ms", None))
            metrics = self._metrics(_median_ms(run), host_ms, compute_ms, comm_ms, getattr(timing, "spread", None))
            fitness = metrics.get("speedup")
            batch.record(cid, LevelResult("bench", True, "", float(getattr(run, "seconds", None) or
                                                                   seconds / len(sos)), data))
            batch.measure(cid, metrics, fitness)

    def _context(self, result: Any, host_run: Any, host_ms: float | None) -> dict[str, Any]:
        """What every figure of this run must carry: shape, device, versions, date, how the host was timed."""
        data: dict[str, Any] = {
            "shape": str(self.bench_shape), "world": self.world, "iters": self.iters, "warmup": self.warmup,
            "inputs": self.bench_inputs,
            "date": getattr(result, "date", "") or datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds"),
            "host_timed_in_same_run": True,
        }
        for key in ("device", "nccl_version", "cuda_runtime_version", "driver_version", "driver_release", "hostname"):
            data[key] = _plain(getattr(result, key, None))
        if host_ms is None:
            data["host_error"] = _run_reason(host_run) if host_run is not None else "host seed was not timed"
        return data

    @staticmethod
    def _parts(result: Any) -> tuple[float | None, float | None]:
        """(compute_ms, comm_ms) from the harness's parts (each part timed alone in the same run)."""
        compute: list[float] = []
        comm: list[float] = []
        for name, part in (getattr(result, "parts", None) or {}).items():
            ms = _median_ms(part)
            if ms is not None and getattr(part, "status", "ok") == "ok":
                (comm if getattr(part, "is_comm", name == "comm") else compute).append(ms)
        return (sum(compute) if compute else None), (sum(comm) if comm else None)

    @staticmethod
    def _metrics(time_ms: float | None, host_ms: float | None, compute_ms: float | None, comm_ms: float | None,
                 spread: float | None) -> dict[str, float]:
        m: dict[str, float] = {}
        if time_ms is not None:
            m["time_ms"] = time_ms
        if host_ms is not None:
            m["host_ms"] = host_ms
            if time_ms:
                m["speedup"] = host_ms / time_ms
        if compute_ms is not None:
            m["compute_ms"] = compute_ms
        if comm_ms is not None:
            m["comm_ms"] = comm_ms
        if compute_ms is not None and comm_ms is not None:
            m["bound_ms"] = max(compute_ms, comm_ms)
            if host_ms is not None and time_ms is not None and host_ms > m["bound_ms"]:
                m["overlap_efficiency"] = (host_ms - time_ms) / (host_ms - m["bound_ms"])
        if spread is not None:
            m["spread"] = float(spread)
        return m

    # -- feedback ----------------------------------------------------------------------------------------
    def feedback(self, c: Candidate) -> str:
        """A short summary for a person or an LLM: the first failure with its reason, or the timing."""
        r = c.results
        failure = failure_feedback(c, {"verify": f"Verification at {self.verify_shape} (seeds {self._seeds()}) failed:",
                                       "bench": f"Benchmark at {self.bench_shape} failed:"})
        if failure is not None:
            return failure
        m = c.metrics
        if "time_ms" not in m:
            return ""
        text = f"Correct at {self.verify_shape} (seeds {self._seeds()}); at {self.bench_shape}: {m['time_ms']:.3f} ms"
        if "host_ms" in m:
            text += f" vs host {m['host_ms']:.3f} ms (speedup {m['speedup']:.2f}x)"
        else:
            text += f" (host seed not timed: {r['bench'].data.get('host_error', 'unknown')})"
        if "bound_ms" in m:
            text += f"; bound {m['bound_ms']:.3f} ms (compute {m['compute_ms']:.3f}, comm {m['comm_ms']:.3f})"
        if "overlap_efficiency" in m:
            text += f"; overlap efficiency {m['overlap_efficiency']:.2f}"
        if "spread" in m:
            text += f"; spread {m['spread']:.3g}"
        return text + "."

    def _seeds(self) -> str:
        return ",".join(map(str, self.seeds))
