"""ModelledEvaluator: an analytic cost model of a workload, for machines without a GPU. Never a measurement.

Time of a design point = roofline compute (workload.flops at a bf16 rate of the measured class) combined with
bandwidth communication (workload.comm_bytes at a per-backend/issuer/chunk bandwidth) by an overlap model per
placement, plus launch and synchronisation overheads per sync scope and chunk count. Every level result it
writes carries data {"modelled": True}; every metric set carries modelled=1. Only the static check (level 0)
is real: the other levels are marked NOT_RUN_HERE, so its candidates are 'unmeasured', never 'passed'.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping, Sequence

import attrs

from cuco.candidate import NOT_RUN_HERE, Candidate, LevelResult
from cuco.design_space import WHOLE, Directives
from cuco.evaluate.base import StageFn
from cuco.evaluate.batch import Batch
from cuco.shape import Shape
from cuco.workload import Workload

KiB = 1024


@attrs.frozen
class Hardware:
    """Rates and overheads of the modelled machine. Defaults: the H200 pair measured for DESIGN.md
    (GEMM 8192^3 bf16 in 1.451 ms = ~758 TFLOP/s; LSA pull ~330 GB/s per rank; NCCL AllGather ~212 GB/s)."""

    name: str = "H200 (modelled)"
    bf16_flops: float = 758e12
    backend_gbps: Mapping[str, float] = attrs.field(factory=lambda: {"lsa": 330.0, "gin": 45.0, "nvshmem": 290.0})
    host_collective_gbps: float = 212.0
    issuer_efficiency: Mapping[str, float] = attrs.field(factory=lambda: {"thread": 0.55, "warp": 0.9, "cta": 1.0,
                                                                                       "copy_engine": 1.08})
    # share of the GPU's SMs the communication side takes while it overlaps compute; copy engines hold no SM, their
    # share stands for the HBM and power they take (a local GEMM ran 3% slower beside a copy on 2x H200)
    issuer_sm_share: Mapping[str, float] = attrs.field(factory=lambda: {"thread": 0.12, "warp": 0.04, "cta": 0.07,
                                                                        "copy_engine": 0.015})
    chunk_latency_bytes: float = 192 * KiB   # bandwidth of a chunk c is bw * c / (c + this)
    sync_us: Mapping[str, float] = attrs.field(factory=lambda: {"world": 14.0, "team": 9.0, "block": 4.0, "signal": 1.2})
    launch_us: float = 4.0
    fused_compute_efficiency: float = 0.985  # warp-specialised compute runs slightly below a library GEMM


LAUNCHES = {"deferred": 2, "split_put_wait": 3, "stream_overlap": 2, "fused": 1}
#: How hard communication competes with compute for SMs: two kernels scheduled side by side interfere more
#: than warps of one kernel that were given their own roles.
CONTENTION = {"deferred": 0.0, "split_put_wait": 1.5, "stream_overlap": 2.0, "fused": 1.0}


def _pipeline(a: float, b: float, n: int) -> float:
    """Two stages over n chunks: the longer one plus one chunk of the shorter (fill and drain)."""
    return max(a, b) + min(a, b) / max(n, 1)


@attrs.frozen
class ModelledTime:
    """The modelled parts of one design point, in seconds."""

    total: float
    compute: float
    comm: float
    sync: float
    launch: float
    host_baseline: float


def model_time(d: Directives, flops: float, comm_bytes: float, world: int, hw: Hardware) -> ModelledTime:
    """The analytic time of design point `d` for one rank."""
    t_comp = flops / hw.bf16_flops
    chunk = d.chunk_bytes if d.chunk_bytes != WHOLE else max(comm_bytes, 1.0)
    n_chunks = max(1, math.ceil(comm_bytes / chunk))
    bw = hw.backend_gbps[d.backend] * 1e9 * hw.issuer_efficiency[d.issuer] * chunk / (chunk + hw.chunk_latency_bytes)
    t_comm = comm_bytes / bw
    sync_each = hw.sync_us[d.sync_scope] * 1e-6
    launch = LAUNCHES[d.placement] * hw.launch_us * 1e-6
    # compute loses the communication's SM share only while the two overlap
    slowed = t_comp + min(t_comp, t_comm) * hw.issuer_sm_share[d.issuer] * CONTENTION[d.placement]
    if d.placement == "deferred":
        body, sync = t_comp + t_comm, sync_each
    elif d.placement == "split_put_wait":
        local = t_comp / world  # only the local shard's rows can be computed before the wait
        body = max(t_comm, local + min(local, t_comm) * hw.issuer_sm_share[d.issuer] * CONTENTION[d.placement]) \
            + t_comp * (1 - 1 / world)
        sync = sync_each * (1 + n_chunks / 4)
    else:
        if d.placement == "fused":
            slowed = slowed / hw.fused_compute_efficiency
        body = _pipeline(slowed, t_comm, n_chunks)
        # barriers stall both sides once per chunk; per-chunk signals are mostly hidden behind the pipeline
        sync = sync_each * n_chunks * (0.25 if d.sync_scope == "signal" else 1.0)
    host = t_comp + comm_bytes / (hw.host_collective_gbps * 1e9) + 2 * hw.launch_us * 1e-6
    return ModelledTime(body + sync + launch, t_comp, t_comm, sync, launch, host)


def _static_check() -> Callable[..., LevelResult] | None:
    try:
        from cuco.evaluate.static import check_static  # noqa: PLC0415 (level 0 lives beside the GPU cascade)
    except ImportError:
        return None
    return check_static


#: The measured Evaluator's settings of running candidates: accepted so that the two evaluators take the same
#: arguments and swap for each other; the model runs nothing, so they change nothing here.
MEASURED_ONLY = ("toolchain", "executor", "compiler", "seeds", "iters", "warmup", "timeout_s", "verify_timeout_s",
                 "verify_at_bench", "verify_delay_us", "bench_inputs", "harness")


class ModelledEvaluator:
    """CandidateEvaluator of kind 'modelled': real static check, then the analytic model in place of compile/verify/bench.

    Takes the measured Evaluator's arguments (`ModelledEvaluator(wl, world=2, bench_shape="8192,8192,8192")`, or
    `ModelledEvaluator(wl, 2, bench_shape=...)`) as well as its own order `(workload, shape, world)`; a shape is a
    Shape, a text such as "8192,8192,8192" or a sequence of sizes, and defaults to the workload's first.
    parent_code(candidate) -> code, if given, lets the static check compare frozen regions with the parent's.
    """

    kind = "modelled"
    on_stage: StageFn | None = None  # never called: the model has no compile, verify or bench stage

    def __init__(self, workload: Workload, shape: Shape | str | Sequence[int] | int | None = None,
                 world: int | None = None, hardware: Hardware | None = None,
                 parent_code: Callable[[Candidate], str | None] | None = None, *,
                 bench_shape: Shape | str | Sequence[int] | None = None,
                 verify_shape: Shape | str | Sequence[int] | None = None, **measured_only: Any):
        unknown = sorted(set(measured_only) - set(MEASURED_ONLY))
        if unknown:
            raise TypeError(f"ModelledEvaluator got unexpected keyword argument(s) {', '.join(unknown)}")
        if isinstance(shape, int) and not isinstance(shape, bool):  # the measured order: (workload, world, ...)
            if world is not None:
                raise TypeError("ModelledEvaluator(workload, world, ...) takes the shape as bench_shape=")
            shape, world = None, shape
        if shape is not None and bench_shape is not None:
            raise TypeError("give the shape once: shape or bench_shape")
        self.workload = workload
        self.world = world if world is not None else workload.default_world
        self.shape = workload.resolve_shape(shape if shape is not None else bench_shape, self.world, "bench")
        if verify_shape is not None:  # not used by the model, but as wrong as it would be on a GPU
            workload.resolve_shape(verify_shape, self.world, "verify")
        self.hardware = hardware or Hardware()
        self.parent_code = parent_code
        self._check_static = _static_check()

    @property
    def bench_shape(self) -> Shape:
        """The shape modelled (the measured Evaluator's name for it)."""
        return self.shape

    def time_of(self, d: Directives) -> ModelledTime:
        """The modelled time of design point `d` for this workload, shape, world size and hardware."""
        return model_time(d, self.workload.flops(self.shape, self.world), self.workload.comm_bytes(self.shape, self.world),
                          self.world, self.hardware)

    def fitness_of(self, d: Directives) -> float:
        """Modelled speedup over the host-driven baseline (higher is better)."""
        t = self.time_of(d)
        return t.host_baseline / t.total

    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates statically checked and timed by the model, in the order given; DuplicateIdError for two
        candidates with one id (every runner keys its results by id)."""
        batch = Batch(candidates)
        for c in batch.candidates():
            batch.put(self._one(c))
        return batch.candidates()

    def prepare(self, candidates: Sequence[Candidate], compile: bool = True) -> list[Candidate]:
        """L0 only, as a Ray CPU worker runs it before the evaluation: the model compiles nothing (`compile` is
        taken for the measured runners' signature)."""
        batch = Batch.fresh(candidates)
        for c in batch.candidates():
            batch.record(c.id, self._static(c))
        return batch.candidates()

    def _static(self, c: Candidate) -> LevelResult:
        if self._check_static is None:
            return LevelResult("static", True, "static checker unavailable in this install; not checked",
                               data={"modelled": True, "skipped": True})
        return self._check_static(c.code, self.parent_code(c) if self.parent_code else None)

    def _one(self, c: Candidate) -> Candidate:
        start = time.perf_counter()
        static = self._static(c)
        c = c.with_result(static)
        if not static.passed:
            return c.evolve(fitness=None, feedback=static.reason)
        skipped = {"modelled": True, "skipped": True, NOT_RUN_HERE: True}
        c = c.with_result(LevelResult("compile", True, "not compiled: modelled evaluation (no GPU)", 0.0, skipped))
        c = c.with_result(LevelResult("verify", True, "not verified: modelled evaluation (no GPU)", 0.0, skipped))
        if c.directives is None:
            bench = LevelResult("bench", False, "the modelled evaluator needs the candidate's directives; state them "
                                "(DIRECTIVES: {...}) or evaluate on a GPU", 0.0, {"modelled": True})
            return c.with_result(bench).evolve(fitness=None, feedback=bench.reason)
        t = self.time_of(c.directives)
        metrics = {
            "modelled": 1.0, "time_ms": t.total * 1e3, "compute_ms": t.compute * 1e3, "comm_ms": t.comm * 1e3,
            "sync_ms": t.sync * 1e3, "launch_ms": t.launch * 1e3, "bound_ms": max(t.compute, t.comm) * 1e3,
            "host_ms": t.host_baseline * 1e3, "speedup": t.host_baseline / t.total,
        }
        data = {"modelled": True, NOT_RUN_HERE: True, "hardware": self.hardware.name, "shape": str(self.shape), "world": self.world,
                **{k: v for k, v in metrics.items() if k != "modelled"}}
        bench = LevelResult("bench", True, f"modelled {t.total * 1e3:.3f} ms on {self.hardware.name} (not measured)",
                            time.perf_counter() - start, data)
        return c.with_result(bench).evolve(metrics=metrics, fitness=metrics["speedup"],
                                           feedback=f"modelled time {t.total * 1e3:.3f} ms "
                                                    f"(compute {t.compute * 1e3:.3f}, comm {t.comm * 1e3:.3f})")


def modelled_evaluator(workload: str, shape: str, world: int) -> ModelledEvaluator:
    """A ModelledEvaluator of the built-in workload `workload`, built on a Ray worker (pass
    `functools.partial(modelled_evaluator, ...)` as cuco.evaluate.ray_executor.RayEvaluator's factory)."""
    from cuco.workloads import get  # noqa: PLC0415

    wl = get(workload)
    return ModelledEvaluator(wl, wl.parse_shape(shape), world)
