"""Evaluation spread over a Ray cluster (`pip install -e ".[ray]"`; the local executor stays the default).

`RayEvaluator` wraps any runner with `prepare` and `parent_code` (cuco.evaluate.levels.Cascade, the modelled
evaluator), built on each worker from a picklable factory:
- compiles fan out to CPU workers (`prepare` tasks, one CPU each: static check and compile, which fill the content-
  addressed compile cache; on one node, or with CUCO_CACHE_DIR on shared storage, the GPU task then finds the object);
- each candidate's evaluation runs as a task holding a placement group of `world` GPU bundles packed on one node
  (`gpu_resource`: "GPU" on a real cluster; tests declare GPU groups as a custom resource);
- only the driver sees the results: it returns them to the search, which is the one writer of the run's database,
  so every candidate is recorded exactly once;
- a task whose worker or node is lost is retried by Ray (`max_retries`); when retries run out the candidate is
  recorded as an infrastructure failure (status 'unmeasured', the reason naming the loss), never as its own failure;
  so is a candidate given GPUs its node declares but lacks;
- the driver sends each candidate's parent source with it, so L0's frozen-region check runs on the worker as it
  does locally (`parent_code`, set by the run like the local evaluator's).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Callable, Sequence

from cuco.candidate import LEVELS, NOT_RUN_HERE, Candidate, LevelResult
from cuco.errors import CucoError
from cuco.evaluate.base import StageFn
from cuco.evaluate.batch import Batch

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


def measured_evaluator(workload: str, shape: str, world: int) -> Any:
    """The GPU Evaluator built on a worker, on the GPUs Ray gave the task (CUDA_VISIBLE_DEVICES)."""
    from cuco.evaluate.cascade import Evaluator  # noqa: PLC0415
    from cuco.workloads import get  # noqa: PLC0415

    return Evaluator(get(workload), world=world, bench_shape=shape)


# An HTTP/2 client's opening (the preface, then an empty SETTINGS frame): a Ray head's GCS (or Ray Client server)
# speaks gRPC and answers with its own SETTINGS frame; anything else answers otherwise or not at all.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_H2_SETTINGS = 4


def check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """RayUnavailableError when `address` (host:port or ray://host:port) does not accept a connection, or accepts
    one but does not answer as a gRPC server (a Ray head's GCS does) within `timeout_s`: Ray itself waits minutes
    for either."""
    if not address or address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1].rsplit("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise RayUnavailableError(f"--address {address!r}: write host:port (the head node's GCS address, e.g. "
                                  "10.0.0.1:6379) or ray://host:10001")
    try:
        conn = socket.create_connection((host, int(port)), timeout=timeout_s)
    except OSError as exc:
        raise RayUnavailableError(f"the Ray head at {address} does not answer ({exc.strerror or exc}): start it "
                                  "(ray start --head) or fix --address") from None
    with conn:
        try:
            conn.sendall(_H2_PREFACE)
            head = b""
            while len(head) < 9:
                chunk = conn.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
        except OSError:  # a timeout or a reset: no gRPC server there either way
            head = b""
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        raise RayUnavailableError(
            f"{address} accepts connections but is not a Ray head (no gRPC answer in {timeout_s:g} s): give the "
            "address `ray start --head` printed (host:6379 by default), or ray://host:10001 for Ray Client")


def enable_token_auth(address: str | None) -> None:
    """Turn on Ray's token authentication for a driver joining `address` when this machine holds a token
    (~/.ray/auth_token, RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH) and RAY_AUTH_MODE is unset.

    `ray start --head` enables token auth whenever a token exists, but `ray.init(address=...)` only does so for
    address "auto": without this, the documented flow fails with InvalidAuthToken. An explicit RAY_AUTH_MODE wins.
    """
    if not address or address == "local" or "RAY_AUTH_MODE" in os.environ:
        return
    try:  # Ray's own switch, where this Ray has token auth; older Rays have nothing to enable
        from ray._private.authentication.authentication_token_setup import (  # noqa: PLC0415
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _connect_error(address: str | None, exc: BaseException) -> RayUnavailableError:
    if not address:
        return RayUnavailableError(f"cannot start a local Ray instance: {exc}")
    return RayUnavailableError(
        f"cannot join the Ray cluster at {address}: {exc}. If its log says InvalidAuthToken, the head uses token "
        "authentication: give this machine the head's token (`ray get-auth-token` on the head, then RAY_AUTH_TOKEN="
        "<token> or ~/.ray/auth_token here), or start the head with RAY_AUTH_MODE=disabled; otherwise check "
        "--address (ray status on the head node)")


def missing_gpus() -> list[str]:
    """The GPUs Ray gave this task (CUDA_VISIBLE_DEVICES) that this node does not have (nvidia-smi): a node may
    declare GPUs (`ray start --num-gpus`) it lacks."""
    from cuco.evaluate.executor import visible_gpus  # noqa: PLC0415

    present = set(visible_gpus({}))  # no CUDA_VISIBLE_DEVICES: nvidia-smi's list of the node's GPUs
    return [g for g in visible_gpus() if g not in present and (g.isdigit() or not present)]


def infrastructure_failure(c: Candidate, why: str) -> Candidate:
    """`c` recorded as not evaluated for a reason outside it (status 'unmeasured'): every level it has not passed
    is marked not run here, never failed."""
    data = {NOT_RUN_HERE: True, "infrastructure": True}
    results = {lv: c.results[lv] if lv in c.results and c.results[lv].passed else LevelResult(lv, False, why, 0.0, data)
               for lv in LEVELS}
    return c.evolve(results=results, metrics={}, fitness=None, feedback=why)


def _with_parents(evaluator: Any, parents: dict[str, str]) -> Any:
    evaluator.parent_code = lambda c: parents.get(c.id)
    return evaluator


def _evaluate_here(factory: EvaluatorFactory, candidates: list[Candidate], parents: dict[str, str],
                   check_gpus: bool) -> list[Candidate]:
    evaluator = _with_parents(factory(), parents)
    lost = missing_gpus() if check_gpus else []
    if not lost:
        return evaluator.evaluate(candidates)
    import platform  # noqa: PLC0415

    why = (f"infrastructure: Ray gave this task GPU(s) {', '.join(lost)} that node {platform.node()} declares "
           "but does not have (nvidia-smi); fix the node's --num-gpus; not a verdict on the candidate")
    # L0 needs no GPU, and its verdict is the candidate's own
    checked = evaluator.prepare(candidates, compile=False)
    return [c if c.failed else infrastructure_failure(c, why) for c in checked]


def _prepare_here(factory: EvaluatorFactory, candidate: Candidate, parents: dict[str, str]) -> None:
    """Static check and compile on a CPU worker: it warms the compile cache (a modelled evaluator compiles
    nothing)."""
    _with_parents(factory(), parents).prepare([candidate])


class RayEvaluator:
    """A CandidateEvaluator whose work runs on a Ray cluster (see the module docstring).

    `address` None starts a local Ray instance (never a cluster some earlier `ray start` left recorded);
    `parent_code(candidate)` gives the parent's source for the frozen-region check (None: skip it)."""

    def __init__(self, factory: EvaluatorFactory, world: int, *, address: str | None = None,
                 gpu_resource: str = "GPU", max_retries: int = 2, compile_fanout: bool = True,
                 init_kwargs: dict[str, Any] | None = None):
        if world < 1:
            raise ValueError(f"world must be >= 1, got {world}")
        self.ray = import_ray()
        self.factory, self.world, self.gpu_resource = factory, world, gpu_resource
        self.max_retries, self.compile_fanout = max_retries, compile_fanout
        self.parent_code: Callable[[Candidate], str | None] | None = None
        self.on_stage: StageFn | None = None  # never called: the stages run on the workers
        check_reachable(address)  # Ray itself would wait minutes for a head that is not there
        if not self.ray.is_initialized():
            enable_token_auth(address)
            try:
                # "local": ray.init() without an address joins whatever cluster file an earlier `ray start` left,
                # dead or alive
                self.ray.init(address=address or "local", ignore_reinit_error=True, log_to_driver=False,
                              **(init_kwargs or {}))
            except Exception as exc:  # noqa: BLE001 - Ray raises many types for a cluster it cannot reach
                raise _connect_error(address, exc) from None
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
        """One result per candidate, in order; never raises for a candidate (lost workers are recorded);
        DuplicateIdError for two candidates with one id."""
        ray = self.ray
        batch = Batch(candidates)
        from ray.util.placement_group import placement_group, remove_placement_group  # noqa: PLC0415
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # noqa: PLC0415

        parents = [self._parent(c) for c in candidates]
        if self.compile_fanout:
            try:
                ray.get([self._prepare.remote(self.factory, c, p) for c, p in zip(candidates, parents)])
            except Exception:  # noqa: BLE001 - a lost compile worker only costs the cache warm-up
                pass
        groups: dict[str, Any] = {}
        refs: dict[Any, str] = {}  # each task's ObjectRef -> the id of the candidate it evaluates
        # A bundle never spans nodes: one bundle of `world` GPUs is a group of GPUs on one node.
        need = {"num_gpus": self.world} if self.gpu_resource == "GPU" else {"resources": {self.gpu_resource: self.world}}
        check_gpus = self.gpu_resource == "GPU"  # a custom resource stands for GPUs that are not there
        for c, p in zip(candidates, parents):
            pg = placement_group([{self.gpu_resource: self.world}], strategy="STRICT_PACK")
            groups[c.id] = pg
            strategy = PlacementGroupSchedulingStrategy(placement_group=pg, placement_group_bundle_index=0)
            task = self._evaluate.options(scheduling_strategy=strategy, **need)
            refs[task.remote(self.factory, [c], p, check_gpus)] = c.id
        # Each group is given back as soon as its task ends, so a batch larger than the cluster flows through it.
        pending = list(refs)
        try:
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                cid = refs[ready[0]]
                try:
                    (done,) = ray.get(ready[0])
                except Exception as exc:  # noqa: BLE001 - worker/node lost after retries: infrastructure
                    done = self._lost(batch[cid], exc)
                batch.put(done)
                remove_placement_group(groups.pop(cid))
        finally:
            for pg in groups.values():
                remove_placement_group(pg)
        return batch.candidates()

    def _parent(self, c: Candidate) -> dict[str, str]:
        """{id: the parent's source} for the worker's frozen-region check; empty when there is none to compare."""
        code = self.parent_code(c) if self.parent_code else None
        return {} if code is None else {c.id: code}

    def _lost(self, c: Candidate, exc: BaseException) -> Candidate:
        why = (f"infrastructure: the Ray worker evaluating this candidate was lost {self.max_retries + 1} time(s) "
               f"({type(exc).__name__}); not a verdict on the candidate")
        return infrastructure_failure(c, why)
