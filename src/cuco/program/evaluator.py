"""The program runner's levels (cuco.evaluate.levels.Cascade): static -> compile -> verify -> bench of a user's
program, with the program harness (observe.h) in place of the plugin harness.

- Reference: the observed original, compiled before anything else (its errors at the user's lines), run twice;
  it must read something back and read back the same bytes both times (else ProgramError says so).
- L2: each candidate runs once with delayed arrival (CUCO_DELAY_COMM_US) and one instance of each region: its
  read-backs must equal those of the original run the same way, so a rewrite that reads received data without
  waiting for it fails even with one GPU. One instance, because a repeated region reads back only its last
  instance, whose late data the earlier instances already left in place (the same values): a missing wait
  would go unseen.
- L3: `timed_runs` rounds, each running the reference and then every survivor as a fresh process, so drift hits
  both alike; every timed run is verified too. Every run repeats each region REGION_REPEATS times in its
  process: its time is the warm instances' median (Observation.region_ms), its cold time the first instance
  (Observation.cold_ms); the figures are medians over runs. Fitness = host time / candidate time.
- A rewrite's run that takes HANG_FACTOR times the original's (at least HANG_FLOOR_S) is killed as hung.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

from cuco.candidate import Candidate, LevelResult
from cuco.design_space import Topology
from cuco.evaluate.batch import Batch
from cuco.evaluate.executor import DeviceGroup, Executor
from cuco.evaluate.levels import DEFAULT_VERIFY_DELAY_US, Cascade, failure_feedback
from cuco.evaluate.static import check_program
from cuco.fastpath.verify import build, host_toolchain
from cuco.manifest import describe_gpus
from cuco.program import diagnostics
from cuco.program import space as program_space
from cuco.program.launcher import LocalLauncher, ProgramLauncher
from cuco.program.observation import Observation, compare
from cuco.program.retime import Retimed, Round, retime, spread
from cuco.program.source import HostProgram, ProgramError

#: Instances of each region per process (observe.h): the first is cold, the rest are the steady state.
REGION_REPEATS = 8
#: What the program harness sets in every run, reference and candidates alike: NCCL connects at init and kernels
#: load eagerly. Each run also says how many times each region runs (`_run`): REGION_REPEATS in the timed runs,
#: once in verification, the original and the rewrite alike so read-backs compare like with like.
RUN_ENV = {"NCCL_RUNTIME_CONNECT": "0", "CUDA_MODULE_LOADING": "EAGER"}
#: A rewrite's run counts as hung after HANG_FACTOR times the original's slower checking run, never sooner than
#: HANG_FLOOR_S (a rewrite's process also sets up the LSA windows the original does not) nor later than the
#: evaluator's `timeout_s`: a rewrite that deadlocks costs seconds, not the whole limit, in each level that runs it.
HANG_FACTOR = 8.0
HANG_FLOOR_S = 30.0
TIMING = (f"each region run {REGION_REPEATS} times in one process, every rank's GPUs synchronised and the ranks "
          "aligned (a one-element AllReduce) before each instance; host wall time between device synchronisations "
          "(launch overhead included); per run the median of the warm instances (all but the first) of each "
          "region, summed over regions, the slowest rank's; the median over runs. The first instance is reported "
          "apart as the cold time")


def hang_limit_s(reference_wall_s: float, ceiling_s: float) -> float:
    """How long a rewrite's run may take before it counts as hung, from the original's run time (HANG_FACTOR)."""
    return min(ceiling_s, max(HANG_FLOOR_S, HANG_FACTOR * reference_wall_s))


class ProgramEvaluator(Cascade):
    """The cascade of levels over the program harness, for one program at world size `world`; `launcher` runs
    each binary once, observed (None: LocalLauncher, this machine's)."""

    bench_shape = "program"

    def __init__(self, program: HostProgram, world: int = 1, executor: Executor | None = None,
                 timed_runs: int = 3, verify_delay_us: float = DEFAULT_VERIFY_DELAY_US, timeout_s: float = 120.0,
                 work_dir: Path | None = None, parent_code: Callable[[Candidate], str | None] | None = None,
                 launcher: ProgramLauncher | None = None):
        if timed_runs < 1:
            raise ValueError(f"timed_runs must be >= 1, got {timed_runs}")
        self.program, self.world = program, world
        self.executor = executor if executor is not None else Executor(world=world)
        self.timed_runs, self.verify_delay_us, self.timeout_s = timed_runs, verify_delay_us, timeout_s
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="cuco-program-"))
        self.parent_code = parent_code
        if launcher is None:   # a program torchrun would start gets its W copies started by cuco
            launcher = LocalLauncher(ranks=world if program.started_by_launcher else 1)
        self.launcher = launcher
        self.toolchain = host_toolchain()
        self._reference: tuple[Path, Observation] | None = None
        self._verify_reference: Observation | None = None
        self._frozen_reference: str | None = None
        self._original: Path | None = None
        self._hang_s: float | None = None   # hang_limit_s, once the original's checking runs are timed

    @property
    def scale(self) -> str:
        """The run's first line: the timed shape, and the copies cuco starts of a program a launcher would start."""
        if self.program.started_by_launcher and self.world > 1:
            return f"shape {self.bench_shape}, {self.world} copies started as torchrun would"
        return f"shape {self.bench_shape}"

    def check_original(self, measured: bool) -> None:
        """The original compiled first (its errors are then the whole answer) and, where candidates are
        measured, its reference run: a program cuco cannot verify against is said before a run writes anything."""
        self.compile_original()
        if measured:
            self.reference()

    def close(self) -> None:
        """Remove the work folder (sources only: binaries are cached)."""
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def frozen_reference(self) -> str:
        """cuco's rewrite of the program at its conservative point: its text outside the EVOLVE blocks is the
        frozen text of every candidate."""
        if self._frozen_reference is None:
            space = program_space.program_space(Topology(world=self.world), self.program.analysis.kinds())
            self._frozen_reference = program_space.render(self.program.observed, self.program.observed_analysis(),
                                                          space.conservative())
        return self._frozen_reference

    # -- building and running --------------------------------------------------------------------------
    def _build(self, code: str, name: str) -> tuple[Path | None, str]:
        """(binary, '') or (None, the compiler's errors, each whole, at the user's lines where they are his)."""
        out = build(code, workdir=self.work_dir / name, include_dirs=[self.program.path.resolve().parent],
                    toolchain=self.toolchain, name="program", options=self.program.build)
        if out.ok:
            return out.binary, ""
        # the log goes to the database, the report and the prompts: only through the filter, which quotes the
        # candidate's own lines and no other file's; then its lines are told in the user's terms
        lines = diagnostics.line_map(code, self.program.text)
        return None, diagnostics.errors(diagnostics.in_user_terms(out.filtered(code), "program.cu", lines,
                                                                  self.program.path))

    def compile_original(self) -> Path:
        """The observed original's binary, built first of all; ProgramError with the compiler's errors at the
        user's lines if the program does not compile, so nothing else is built or run."""
        if self._original is None:
            binary, log = self._build(self.program.observed, "reference")
            if binary is None:
                raise ProgramError(f"{self.program.path}: the program does not compile as given:\n{log}")
            self._original = binary
        return self._original

    def _run(self, binary: Path, group: DeviceGroup, delay_us: float = 0.0,
             repeats: int = REGION_REPEATS, rewrite: bool = False) -> tuple[Observation | None, str]:
        """Run once, observed (with arrival delayed by `delay_us`, each region run `repeats` times; a `rewrite`
        within the hang limit the original's runs set); (observation, '') or (None, why it failed)."""
        env = {**RUN_ENV, "WORLD_SIZE": str(self.world), "CUCO_REGION_REPEATS": str(repeats)}
        if delay_us > 0:
            env["CUCO_DELAY_COMM_US"] = f"{delay_us:g}"
        limit = self._hang_s if rewrite and self._hang_s is not None else self.timeout_s
        return self.launcher.run(binary, group, env, limit, self.work_dir)

    def reference(self) -> Observation:
        """The reference's observation (built and run twice on first use); ProgramError for a program cuco cannot
        compare against."""
        if self._reference is None:
            binary = self.compile_original()

            def twice(g: DeviceGroup) -> list[tuple[tuple[Observation | None, str], float]]:
                out = []
                for _ in range(2):
                    t0 = time.monotonic()
                    out.append((self._run(binary, g), time.monotonic() - t0))
                return out

            (first, first_s), (second, second_s) = self.executor.run(twice, exclusive=True)
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
            self._hang_s = hang_limit_s(max(first_s, second_s), self.timeout_s)
        return self._reference[1]

    def verify_reference(self, group: DeviceGroup) -> Observation:
        """The original's read-backs with one instance of each region, what L2 compares against (run on first
        use, on `group`)."""
        if self._verify_reference is None:
            obs, why = self._run(self.compile_original(), group, repeats=1)
            if obs is None:
                raise ProgramError(f"{self.program.path}: the program fails when run by cuco with each timed region "
                                   f"run once (WORLD_SIZE={self.world}): {why}")
            self._verify_reference = obs
        return self._verify_reference

    # -- the levels ------------------------------------------------------------------------------------
    def static_level(self, c: Candidate) -> LevelResult:
        """L0 against the parent's frozen text or, without a parent, cuco's own rewrite of the program, which
        every design point shares: only the EVOLVE blocks are the candidate's, and the rule set checks them."""
        parent = self.parent_code(c) if self.parent_code else None
        return check_program(c.code, parent if parent is not None else self.frozen_reference())

    def verify_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L2: each survivor run once under delayed arrival, each region once, its read-backs compared with the
        original's run the same way."""
        self.reference()  # the original checked first (it reads back, deterministically)
        return self.executor.run(lambda g: self._verify(batch, alive, _binaries(batch, alive),
                                                        self.verify_reference(g), g), exclusive=True)

    def bench_level(self, batch: Batch, alive: list[str]) -> None:
        """L3: `timed_runs` rounds of the reference and every survivor, each a fresh process."""
        reference = self.reference()
        self.executor.run(lambda g: self._bench(batch, alive, _binaries(batch, alive), reference, g), exclusive=True)

    def retime(self, code: str, min_runs: int = 3, max_runs: int = 9) -> Retimed:
        """The figure of record of the rewrite `code` against the program (cuco.program.retime): interleaved rounds
        of fresh processes, each rewrite run's read-backs checked against the original's; ProgramError where a
        run fails or reads back other bytes."""
        binary, log = self._build(code, "retime")
        if binary is None:
            raise ProgramError(f"{self.program.path}: the rewrite to re-time does not compile:\n{log}")
        reference = self.reference()
        assert self._reference is not None
        original = self._reference[0]

        def rounds(group: DeviceGroup) -> Retimed:
            def one() -> Round:
                host, why_host = self._run(original, group)
                best, why_best = self._run(binary, group, rewrite=True)
                for obs, why, who in ((host, why_host, "the program"), (best, why_best, "the rewrite")):
                    if obs is None or obs.region_ms() is None:
                        raise ProgramError(f"{self.program.path}: re-timing, {who} failed: "
                                           f"{why or 'no timed region ran'}")
                assert host is not None and best is not None
                same, how = compare(reference, best)
                if not same:
                    raise ProgramError(f"{self.program.path}: re-timing, the rewrite read back other bytes than the "
                                       f"program: {how}")
                figures = (host.region_ms(), host.cold_ms(), best.region_ms(), best.cold_ms())
                assert all(f is not None for f in figures)   # a run with regions has both
                return Round(*figures)  # type: ignore[arg-type]
            return retime(one, min_runs, max_runs)

        return self.executor.run(rounds, exclusive=True)

    def feedback(self, c: Candidate) -> str:
        """The first failure with its reason, or the verdict and the time against the host program."""
        return _feedback(c)

    def compile_level(self, batch: Batch, alive: list[str]) -> list[str]:
        """L1: every survivor built in parallel (its errors at the user's lines)."""
        def one(cid: str) -> tuple[str, Path | None, str, float]:
            t0 = time.monotonic()
            # one folder per candidate id (a batch holds each id once), apart from the reference's folder
            binary, log = self._build(batch[cid].code, f"candidate-{cid}")
            return cid, binary, log, time.monotonic() - t0

        workers = max(1, min(len(alive), (os.cpu_count() or 2)))
        self._tell(batch, alive, "compile")
        done: dict[str, tuple[Path | None, str, float]] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for fut in concurrent.futures.as_completed([pool.submit(one, cid) for cid in alive]):
                cid, binary, log, seconds = fut.result()
                done[cid] = (binary, log, seconds)
                if binary is None or not self.has_gpu:  # its result is final now
                    self._tell(batch, [cid], "done")
        ok = []
        for cid in alive:
            binary, log, seconds = done[cid]
            if binary is None:
                batch.record(cid, LevelResult("compile", False, log, seconds))
            else:
                batch.record(cid, LevelResult("compile", True, "", seconds, {"binary": str(binary)}))
                ok.append(cid)
        return ok

    def _verify(self, batch: Batch, alive: list[str], binaries: dict[str, Path], reference: Observation,
                group: DeviceGroup) -> list[str]:
        ok = []
        for cid in alive:
            obs, why = self._run(binaries[cid], group, self.verify_delay_us, repeats=1, rewrite=True)
            same = False
            if obs is not None:
                same, why = compare(reference, obs)
            data = {"delay_comm_us": self.verify_delay_us, "world": self.world, "region_instances": 1,
                    "how": why if same else ""}
            batch.record(cid, LevelResult("verify", same, "" if same else why, 0.0, data))
            if same:
                ok.append(cid)
        return ok

    def _bench(self, batch: Batch, alive: list[str], binaries: dict[str, Path], reference: Observation,
               group: DeviceGroup) -> None:
        assert self._reference is not None
        host: list[float] = []
        host_cold: list[float] = []
        times: dict[str, list[float]] = {cid: [] for cid in alive}
        cold: dict[str, list[float]] = {cid: [] for cid in alive}
        failed: dict[str, str] = {}
        for _round in range(self.timed_runs):
            obs, _why = self._run(self._reference[0], group)
            if obs is not None and obs.region_ms() is not None:
                host.append(obs.region_ms())
                host_cold.append(obs.cold_ms())
            for cid in alive:
                if cid in failed:
                    continue
                obs, why = self._run(binaries[cid], group, rewrite=True)
                if obs is not None:
                    same, how = compare(reference, obs)
                    if not same:
                        obs, why = None, f"wrong result in a timed run: {how}"
                if obs is None or obs.region_ms() is None:
                    failed[cid] = why or "no timed region ran"
                else:
                    times[cid].append(obs.region_ms())
                    cold[cid].append(obs.cold_ms())
        context = {"world": self.world, "runs": self.timed_runs, "timing": TIMING,
                   "device": describe_gpus(group.visible), "nccl_version": self.toolchain.nccl.version,
                   "cuda_version": self.toolchain.cuda_version,
                   "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                   "host_runs_ms": host, "host_cold_runs_ms": host_cold, "host_timed_in_same_run": True}
        host_ms = statistics.median(host) if host else None
        for cid in alive:
            if cid in failed:
                batch.record(cid, LevelResult("bench", False, failed[cid], 0.0, context))
                continue
            t = statistics.median(times[cid])
            metrics: dict[str, float] = {"time_ms": t, "spread": spread(tuple(times[cid])),
                                         "cold_time_ms": statistics.median(cold[cid])}
            if host_ms is not None:
                metrics["host_ms"] = host_ms
                metrics["cold_ms"] = statistics.median(host_cold)
                metrics["speedup"] = host_ms / t if t else 0.0
            data = {**context, "runs_ms": times[cid], "cold_runs_ms": cold[cid]}
            batch.record(cid, LevelResult("bench", True, "", 0.0, data))
            batch.measure(cid, metrics, metrics.get("speedup"))


def _binaries(batch: Batch, alive: list[str]) -> dict[str, Path]:
    return {cid: Path(batch[cid].results["compile"].data["binary"]) for cid in alive}


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

