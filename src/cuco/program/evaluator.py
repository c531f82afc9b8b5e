"""The measured evaluator of a user's program: static -> compile -> verify -> bench, like the workload cascade,
with the program harness (observe.h) in place of the plugin harness.

- Reference: the observed original, built once and run twice before anything else; it must read something back
  and read back the same bytes both times (else ProgramError says so).
- L2: each candidate runs once with delayed arrival (CUCO_DELAY_COMM_US): its read-backs must equal the
  reference's, so a rewrite that reads received data without waiting for it fails even with one GPU.
- L3: `timed_runs` rounds, each running the reference and then every survivor as a fresh process, so drift hits
  both alike; every timed run is verified too. A run's time is its regions' warm median (Observation.region_ms);
  the figure is the median over runs. Fitness = host time / candidate time.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

from cuco.candidate import Candidate, LevelResult
from cuco.evaluate.base import StageFn, tell
from cuco.evaluate.cascade import DEFAULT_VERIFY_DELAY_US, failure_feedback, mark_not_run_here
from cuco.evaluate.executor import DeviceGroup, Executor
from cuco.evaluate.static import check_program
from cuco.fastpath.verify import build, host_toolchain
from cuco.manifest import describe_gpus
from cuco.program.observation import Observation, compare
from cuco.program.source import HostProgram, ProgramError

#: What the program harness sets in every run: NCCL connects at init and kernels load eagerly, so one-time
#: set-up stays out of the timed regions for the reference as for the candidates.
RUN_ENV = {"NCCL_RUNTIME_CONNECT": "0", "CUDA_MODULE_LOADING": "EAGER"}
TIMING = ("host wall time between device synchronisations around each region (launch overhead included); per "
          "run the warm median of each region, summed; the median over runs")


class ProgramEvaluator:
    """CandidateEvaluator (kind 'measured') for one program at world size `world`."""

    kind = "measured"
    on_stage: StageFn | None = None  # set by the search to follow candidates through the levels
    bench_shape = "program"

    def __init__(self, program: HostProgram, world: int = 1, executor: Executor | None = None,
                 timed_runs: int = 5, verify_delay_us: float = DEFAULT_VERIFY_DELAY_US, timeout_s: float = 120.0,
                 work_dir: Path | None = None, parent_code: Callable[[Candidate], str | None] | None = None):
        if timed_runs < 1:
            raise ValueError(f"timed_runs must be >= 1, got {timed_runs}")
        self.program, self.world = program, world
        self.executor = executor if executor is not None else Executor(world=world)
        self.timed_runs, self.verify_delay_us, self.timeout_s = timed_runs, verify_delay_us, timeout_s
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="cuco-program-"))
        self.parent_code = parent_code
        self.toolchain = host_toolchain()
        self._reference: tuple[Path, Observation] | None = None

    @property
    def has_gpu(self) -> bool:
        """True when the executor has a GPU group, so verification and timing run here."""
        return self.executor.has_gpu

    # -- building and running --------------------------------------------------------------------------
    def _build(self, code: str, name: str) -> tuple[Path | None, str]:
        out = build(code, workdir=self.work_dir / name, include_dirs=[self.program.path.resolve().parent],
                    toolchain=self.toolchain, name="program", options=self.program.build)
        return out.binary, ("" if out.ok else out.summary() + "\n" + out.log[-3000:])

    def _run(self, binary: Path, group: DeviceGroup, delay_us: float = 0.0) -> tuple[Observation | None, str]:
        """Run once, observed; (observation, '') or (None, why it failed)."""
        with tempfile.TemporaryDirectory(prefix="obs-", dir=self.work_dir) as obs:
            env = {**RUN_ENV, "WORLD_SIZE": str(self.world), "CUCO_OBSERVE_DIR": obs}
            if delay_us > 0:
                env["CUCO_DELAY_COMM_US"] = f"{delay_us:g}"
            res = Executor.run_command([str(binary)], group, self.timeout_s, extra_env=env, cwd=str(binary.parent))
            if res.timed_out:
                return None, f"hang: killed after {self.timeout_s:g} s"
            if res.returncode != 0:
                tail = (res.stdout + res.stderr).strip()[-1500:]
                return None, f"exited with status {res.returncode}:\n{tail}"
            return Observation.read(Path(obs)), ""

    def reference(self) -> Observation:
        """The reference's observation (built and run twice on first use); ProgramError for a program cuco cannot
        compare against."""
        if self._reference is None:
            binary, log = self._build(self.program.observed, "reference")
            if binary is None:
                raise ProgramError(f"{self.program.path}: the program does not compile as given:\n{log}")
            first, second = self.executor.run(lambda g: (self._run(binary, g), self._run(binary, g)), exclusive=True)
            for obs, why in (first, second):
                if obs is None:
                    raise ProgramError(f"{self.program.path}: the program fails when run by cuco (WORLD_SIZE="
                                       f"{self.world}, no arguments): {why}")
            a, b = first[0], second[0]
            assert a is not None and b is not None
            if not a.readbacks:
                raise ProgramError(f"{self.program.path}: the program reads nothing back from the GPU, so there is no "
                                   "output to verify; copy its results to the host (cudaMemcpy device-to-host)")
            same, how = compare(a, b)
            if not same:
                raise ProgramError(f"{self.program.path}: the program's outputs differ between two runs on the same "
                                   f"inputs ({how}); cuco verifies against the program itself, so make its results "
                                   "deterministic (fixed seeds, no unordered atomics) first")
            self._reference = (binary, a)
        return self._reference[1]

    # -- the CandidateEvaluator protocol ----------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates checked and compiled, then, where GPUs exist, verified against the program and timed."""
        out = [c.evolve(results={}, metrics={}, fitness=None, feedback="") for c in candidates]
        alive = []
        for i, c in enumerate(out):
            res = check_program(c.code, self.parent_code(c) if self.parent_code else None)
            out[i] = c.with_result(res)
            if res.passed:
                alive.append(i)
            else:
                tell(self.on_stage, [c], "done")
        alive = self._compile(out, alive)
        binaries = {i: Path(out[i].results["compile"].data["binary"]) for i in alive}
        if alive and not self.has_gpu:
            mark_not_run_here(out, alive, self.executor)
        elif alive:
            reference = self.reference()
            tell(self.on_stage, (out[i] for i in alive), "verify")
            verified = self.executor.run(lambda g: self._verify(out, alive, binaries, reference, g), exclusive=True)
            tell(self.on_stage, (out[i] for i in alive if i not in verified), "done")
            if verified:
                tell(self.on_stage, (out[i] for i in verified), "bench")
                self.executor.run(lambda g: self._bench(out, verified, binaries, reference, g), exclusive=True)
                tell(self.on_stage, (out[i] for i in verified), "done")
        return [c.evolve(feedback=_feedback(c)) for c in out]

    def _compile(self, out: list[Candidate], alive: list[int]) -> list[int]:
        def one(i: int) -> tuple[int, Path | None, str, float]:
            t0 = time.monotonic()
            # by position too: candidates copied with evolve() share an id, and one folder each keeps them apart
            binary, log = self._build(out[i].code, f"{i}-{out[i].id}")
            return i, binary, log, time.monotonic() - t0

        workers = max(1, min(len(alive), (os.cpu_count() or 2)))
        tell(self.on_stage, (out[i] for i in alive), "compile")
        done = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in concurrent.futures.as_completed([pool.submit(one, i) for i in alive]):
                done.append(fut.result())
                if done[-1][1] is None or not self.has_gpu:  # its result is final now
                    tell(self.on_stage, [out[done[-1][0]]], "done")
        ok = []
        for i, binary, log, seconds in sorted(done, key=lambda d: d[0]):
            if binary is None:
                out[i] = out[i].with_result(LevelResult("compile", False, log, seconds))
            else:
                out[i] = out[i].with_result(LevelResult("compile", True, "", seconds, {"binary": str(binary)}))
                ok.append(i)
        return ok

    def _verify(self, out: list[Candidate], alive: list[int], binaries: dict[int, Path], reference: Observation,
                group: DeviceGroup) -> list[int]:
        ok = []
        for i in alive:
            obs, why = self._run(binaries[i], group, self.verify_delay_us)
            same = False
            if obs is not None:
                same, why = compare(reference, obs)
            data = {"delay_comm_us": self.verify_delay_us, "world": self.world, "how": why if same else ""}
            out[i] = out[i].with_result(LevelResult("verify", same, "" if same else why, 0.0, data))
            if same:
                ok.append(i)
        return ok

    def _bench(self, out: list[Candidate], alive: list[int], binaries: dict[int, Path], reference: Observation,
               group: DeviceGroup) -> None:
        assert self._reference is not None
        host: list[float] = []
        times: dict[int, list[float]] = {i: [] for i in alive}
        failed: dict[int, str] = {}
        for _round in range(self.timed_runs):
            obs, _why = self._run(self._reference[0], group)
            if obs is not None and obs.region_ms() is not None:
                host.append(obs.region_ms())
            for i in alive:
                if i in failed:
                    continue
                obs, why = self._run(binaries[i], group)
                if obs is not None:
                    same, how = compare(reference, obs)
                    if not same:
                        obs, why = None, f"wrong result in a timed run: {how}"
                if obs is None or obs.region_ms() is None:
                    failed[i] = why or "no timed region ran"
                else:
                    times[i].append(obs.region_ms())
        context = {"world": self.world, "runs": self.timed_runs, "timing": TIMING,
                   "device": describe_gpus(group.visible), "nccl_version": self.toolchain.nccl.version,
                   "cuda_version": self.toolchain.cuda_version,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "host_runs_ms": host, "host_timed_in_same_run": True}
        host_ms = statistics.median(host) if host else None
        for i in alive:
            if i in failed:
                out[i] = out[i].with_result(LevelResult("bench", False, failed[i], 0.0, context))
                continue
            t = statistics.median(times[i])
            metrics: dict[str, float] = {"time_ms": t, "spread": (max(times[i]) - min(times[i])) / t if t else 0.0}
            if host_ms is not None:
                metrics["host_ms"] = host_ms
                metrics["speedup"] = host_ms / t if t else 0.0
            out[i] = out[i].with_result(LevelResult("bench", True, "", 0.0, {**context, "runs_ms": times[i]}))
            out[i] = out[i].evolve(metrics=metrics, fitness=metrics.get("speedup"))


def _feedback(c: Candidate) -> str:
    failure = failure_feedback(c, {"verify": "Wrong result under delayed arrival:", "bench": "Timed runs failed:"})
    if failure is not None:
        return failure
    m = c.metrics
    if "time_ms" not in m:
        return ""
    how = c.results["verify"].data.get("how", "")
    text = f"Correct ({how}); {m['time_ms']:.3f} ms"
    if "host_ms" in m:
        text += f" vs host program {m['host_ms']:.3f} ms (speedup {m['speedup']:.2f}x)"
    return text + f"; spread {m.get('spread', 0):.3g}."

