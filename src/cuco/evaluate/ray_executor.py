"""Evaluation spread over a Ray cluster (`pip install -e ".[ray]"`; the local executor stays the default).

`RayEvaluator` wraps any CandidateEvaluator, built on each worker from a picklable factory:
- compiles fan out to CPU workers (`prepare` tasks, one CPU each: static check and compile, which fill the content-
  addressed compile cache; on one node, or with CUCO_CACHE_DIR on shared storage, the GPU task then finds the object);
- each candidate's evaluation runs as a task holding a placement group of `world` GPU bundles packed on one node
  (`gpu_resource`: "GPU" on a real cluster; tests declare GPU groups as a custom resource);
- only the driver sees the results: it returns them to the search, which is the one writer of the run's database,
  so every candidate is recorded exactly once;
- a task whose worker or node is lost is retried by Ray (`max_retries`); when retries run out the candidate is
  recorded as an infrastructure failure (status 'unmeasured', the reason naming the loss), never as its own failure.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from cuco.candidate import LEVELS, NOT_RUN_HERE, Candidate, LevelResult
from cuco.errors import CucoError

EvaluatorFactory = Callable[[], Any]


class RayUnavailableError(CucoError):
    """Ray is not installed, the cluster cannot be reached, or it cannot host a group of W GPUs."""


def import_ray() -> Any:
    """The `ray` module; raises RayUnavailableError, naming how to install it, when Ray is missing."""
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        raise RayUnavailableError("the Ray executor needs Ray: pip install -e \".[ray]\" (or pip install ray), or run "
                                  "without --executor ray") from None
    return ray


def modelled_evaluator(workload: str, shape: str, world: int) -> Any:
    """A ModelledEvaluator built on a worker (pass `functools.partial(modelled_evaluator, ...)` as the factory)."""
    from cuco.evaluate.modelled import ModelledEvaluator  # noqa: PLC0415
    from cuco.workloads import get  # noqa: PLC0415

    wl = get(workload)
    return ModelledEvaluator(wl, wl.parse_shape(shape), world)


def measured_evaluator(workload: str, shape: str, world: int) -> Any:
    """The GPU Evaluator built on a worker, on the GPUs Ray gave the task (CUDA_VISIBLE_DEVICES)."""
    from cuco.evaluate.cascade import Evaluator  # noqa: PLC0415
    from cuco.workloads import get  # noqa: PLC0415

    return Evaluator(get(workload), world=world, bench_shape=shape)


def check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """RayUnavailableError when `address` (host:port or ray://host:port) does not accept a connection: Ray itself
    waits minutes for an unreachable head."""
    import socket  # noqa: PLC0415

    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailableError(f"--address {address!r}: write host:port (the head node's GCS address, e.g. "
                                  "10.0.0.1:6379) or ray://host:10001")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise RayUnavailableError(f"the Ray head at {address} does not answer ({exc.strerror or exc}): start it "
                                  "(ray start --head) or fix --address") from None


def _evaluate_here(factory: EvaluatorFactory, candidates: list[Candidate]) -> list[Candidate]:
    return factory().evaluate(candidates)


def _prepare_here(factory: EvaluatorFactory, candidate: Candidate) -> bool:
    """Static check and compile on a CPU worker (warms the compile cache); True when it compiled."""
    evaluator = factory()
    prepare = getattr(evaluator, "prepare", None)
    if prepare is None:  # an evaluator with nothing to compile (the modelled one)
        return True
    (out,) = prepare([candidate])
    return out.results.get("compile") is not None and out.results["compile"].passed


class RayEvaluator:
    """A CandidateEvaluator whose work runs on a Ray cluster (see the module docstring)."""

    def __init__(self, factory: EvaluatorFactory, world: int, *, address: str | None = None,
                 gpu_resource: str = "GPU", max_retries: int = 2, compile_fanout: bool = True,
                 init_kwargs: dict[str, Any] | None = None):
        if world < 1:
            raise ValueError(f"world must be >= 1, got {world}")
        self.ray = import_ray()
        self.factory, self.world, self.gpu_resource = factory, world, gpu_resource
        self.max_retries, self.compile_fanout = max_retries, compile_fanout
        check_reachable(address)  # Ray itself would wait minutes for a head that is not there
        if not self.ray.is_initialized():
            try:
                self.ray.init(address=address, ignore_reinit_error=True, log_to_driver=False, **(init_kwargs or {}))
            except Exception as exc:  # noqa: BLE001 - Ray raises many types for a cluster it cannot reach
                raise RayUnavailableError(f"cannot reach the Ray cluster at {address or 'a new local cluster'}: "
                                          f"{exc}; check --address (ray status on the head node)") from None
        self.check_cluster()
        self.kind = factory().kind
        self._prepare = self.ray.remote(num_cpus=1, max_retries=max_retries)(_prepare_here)
        self._evaluate = self.ray.remote(num_cpus=0, max_retries=max_retries)(_evaluate_here)

    def check_cluster(self) -> None:
        """RayUnavailableError unless some node offers `world` units of the GPU resource."""
        per_node = [float(n.get("Resources", {}).get(self.gpu_resource, 0)) for n in self.ray.nodes() if n.get("Alive")]
        if not per_node or max(per_node) < self.world:
            raise RayUnavailableError(
                f"no node of the Ray cluster has {self.world} '{self.gpu_resource}' (per node: "
                f"{[int(x) for x in per_node] or 'no live node'}); a candidate's group of {self.world} GPUs must sit on "
                "one node: add such a node or lower --world")

    def evaluate(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """One result per candidate, in order; never raises for a candidate (lost workers are recorded)."""
        ray = self.ray
        from ray.util.placement_group import placement_group, remove_placement_group  # noqa: PLC0415
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

        if self.compile_fanout:
            try:
                ray.get([self._prepare.remote(self.factory, c) for c in candidates])
            except Exception:  # noqa: BLE001 - a lost compile worker only costs the cache warm-up
                pass
        groups, refs = [], []
        # A bundle never spans nodes: one bundle of `world` GPUs is a group of GPUs on one node.
        need = {"num_gpus": self.world} if self.gpu_resource == "GPU" else {"resources": {self.gpu_resource: self.world}}
        for c in candidates:
            pg = placement_group([{self.gpu_resource: self.world}], strategy="STRICT_PACK")
            groups.append(pg)
            strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0)
            refs.append(self._evaluate.options(scheduling_strategy=strategy, **need).remote(self.factory, [c]))
        # Each group is given back as soon as its task ends, so a batch larger than the cluster flows through it.
        results: dict[int, Candidate] = {}
        index = {ref: i for i, ref in enumerate(refs)}
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                i = index[ready[0]]
                try:
                    (results[i],) = ray.get(ready[0])
                except Exception as exc:  # noqa: BLE001 - worker/node lost after retries: infrastructure
                    results[i] = self._lost(candidates[i], exc)
                remove_placement_group(groups[i])
                groups[i] = None
        finally:
            for pg in groups:
                if pg is not None:
                    remove_placement_group(pg)
        return [results[i] for i in range(len(candidates))]

    def _lost(self, c: Candidate, exc: BaseException) -> Candidate:
        why = (f"infrastructure: the Ray worker evaluating this candidate was lost {self.max_retries + 1} time(s) "
               f"({type(exc).__name__}); not a verdict on the candidate")
        data = {NOT_RUN_HERE: True, "infrastructure": True}
        results = {lv: LevelResult(lv, False, why, 0.0, data) for lv in LEVELS}
        return c.evolve(results=results, metrics={}, fitness=None, feedback=why)
