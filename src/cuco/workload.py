"""Workload: the declarative description of one problem (a folder under cuco/workloads/).

A workload never touches the core: it names its harness plugin source, its host-driven seed, its design
space and how to render a device-initiated candidate from a design point. It is a cuco.problem.Problem: the
run, the cascade and the search consume it through that interface.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import attrs

from cuco import reference_best
from cuco.candidate import Candidate
from cuco.design_space import DesignSpace, Directives, Topology
from cuco.kit.compute import ComputeLibrary
from cuco.problem import Runner, Say
from cuco.shape import Shape, ShapeError, dims_in

__all__ = ["Shape", "ShapeError", "Workload"]

#: A sentence ends at a full stop followed by a capital (not inside "e.g." or a dims list "S,HQ,D").
_SENTENCE_END = re.compile(r"(?<=\.)\s+(?=[A-Z])")


@attrs.frozen
class Workload:
    """Everything the harness, cascade and search need to know about one workload."""

    name: str
    description: str                     # prompt text: what is computed and communicated
    dim_names: tuple[str, ...] = attrs.field(converter=tuple)
    verify_shapes: tuple[Shape, ...] = attrs.field(converter=tuple)   # small, for L2
    bench_shapes: tuple[Shape, ...] = attrs.field(converter=tuple)    # full sizes, for L3
    folder: Path = attrs.field(converter=Path)
    plugin_source: str                   # file name in `folder`: the harness workload plugin (.cu)
    seed_source: str                     # file name in `folder`: the host-driven baseline in candidate-ABI form
    space: Callable[[Topology], DesignSpace] = attrs.field(eq=False, repr=False)
    # the template: a point's source, unchecked (given as `render`; the method render() checks the point first)
    _render: Callable[[Directives], str] = attrs.field(eq=False, repr=False, alias="render")
    check_shape: Callable[[Shape, int], None] = attrs.field(eq=False, repr=False)
    flops: Callable[[Shape, int], float] = attrs.field(eq=False, repr=False)        # per rank
    comm_bytes: Callable[[Shape, int], float] = attrs.field(eq=False, repr=False)   # received per rank
    # Libraries plugin, seed and candidates link against, by name (cuco.libraries resolves them).
    libraries: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    default_world: int = 2
    # Library kernels compiled once per configuration into lib<name>_compute.so (cuco.kit.compute).
    compute: ComputeLibrary | None = None
    # What each buffer holds, for the exported op (cuco.export): name -> (shape, dtype name such as "bfloat16"),
    # for (shape, world). None: the workload cannot be exported.
    tensors: Callable[[Shape, int], dict[str, tuple[tuple[int, ...], str]]] | None = attrs.field(
        default=None, eq=False, repr=False)
    kind: ClassVar[str] = "workload"

    # -- the Problem interface ---------------------------------------------------------------------------
    def render(self, point: Directives, topology: Topology | None = None) -> str:
        """The candidate's source at `point` (extra directives it does not name at their conservative values);
        IllegalPointError when the point breaks a rule of the space on `topology` (the run's; None: Topology())."""
        space = self.space(topology if topology is not None else Topology())
        return self._render(space.validate(space.complete(point)))

    def seed(self, topology: Topology, work_dir: Path, say: Say) -> Candidate:
        """The host seed through the rule-based fast path, or its cached result (build files in `work_dir`)."""
        from cuco import fastpath_cache

        say("cuco: fast path: cached result for this host seed" if fastpath_cache.lookup(self.seed_code())
            else "cuco: fast path (rule-based, no LLM) on the host seed ...")
        return fastpath_cache.candidate(self, work_dir)

    def runner(self, world: int, shape: str | None = None, executor: Any = None) -> Runner:
        """The measured cascade over the plugin harness at `world`, timing `shape` (None: the first bench shape
        `world` can run) on `executor`'s GPUs."""
        from cuco.evaluate.cascade import Evaluator

        return Evaluator(self, world=world, bench_shape=shape or None, executor=executor)

    def remote_runner(self, world: int, shape: str | None, address: str | None) -> Any:
        """The measured cascade on a Ray cluster at `address` (None: a local Ray instance)."""
        from cuco.evaluate.ray_executor import RayEvaluator, measured_evaluator

        bench = self.parse_shape(shape) if shape else self.bench_shapes[0]
        return RayEvaluator(functools.partial(measured_evaluator, self.name, str(bench), world), world,
                            address=address)

    def best_of(self, fastest: Candidate) -> Candidate:
        """Never slower than the host seed: the fastest verified candidate where it beat the seed in its own timed
        rounds, else the seed itself (cuco.reference_best; it is a candidate of the ABI too)."""
        return reference_best.best_of(fastest, self.seed_code(), self.name, "The host seed")

    def confirm(self, fastest: Candidate, runner: Any) -> Candidate:
        """`fastest` as it is: a workload's figures of record are the benchmarks' (benchmarks/record.py), and its
        search times the host seed beside every candidate."""
        return fastest

    def provenance(self, best: Candidate) -> dict[str, Any]:
        """Whether best/ holds the host seed itself; a workload's other candidates are renderings or edits of its
        template."""
        return {"is_original": best.mutation == "original"}


    def summary(self) -> str:
        """The description's first sentence, whole (the description is wrapped, so its first line may stop
        mid-sentence)."""
        text = " ".join(self.description.split())
        return _SENTENCE_END.split(text, maxsplit=1)[0]

    def plugin_path(self) -> Path:
        """The harness plugin's source file."""
        return self.folder / self.plugin_source

    def seed_path(self) -> Path:
        """The host-driven seed's source file."""
        return self.folder / self.seed_source

    def seed_code(self) -> str:
        """The host-driven seed's source text."""
        return self.seed_path().read_text()

    def shapes_for(self, world: int, which: str = "bench") -> list[Shape]:
        """The shapes of `which` ('bench' or 'verify') that this world size can run."""
        shapes = self.bench_shapes if which == "bench" else self.verify_shapes
        ok = []
        for s in shapes:
            try:
                self.check_shape(s, world)
            except ShapeError:
                continue
            ok.append(s)
        return ok

    def runs_at(self, world: int, shape: Shape | None = None) -> bool:
        """True when world size `world` can split `shape` (None: at least one of the verify and one of the bench
        shapes)."""
        if shape is not None:
            try:
                self.check_shape(shape, world)
            except ShapeError:
                return False
            return True
        return bool(self.shapes_for(world, "verify")) and bool(self.shapes_for(world, "bench"))

    def world_refusal(self, world: int, shape: Shape | None = None) -> str | None:
        """Why world size `world` cannot run `shape` (None: the workload's own shapes), naming the constraint and
        the nearest world sizes that can; None when it can."""
        if self.runs_at(world, shape):
            return None
        probe = shape if shape is not None else next(
            (s for s in (*self.verify_shapes, *self.bench_shapes) if not self.runs_at(world, s)), None)
        try:
            if probe is None:
                raise ShapeError("no verify or bench shape of its own fits")
            self.check_shape(probe, world)
            why = "no shape of its own fits"
        except ShapeError as exc:
            why = str(exc)
        near = sorted((w for w in range(1, max(16, 2 * world) + 1) if w != world and self.runs_at(w, shape)),
                      key=lambda w: (abs(w - world), w))
        near = [w for w in near if abs(w - world) == abs(near[0] - world)]  # the nearest below and above
        where = f" at {shape}" if shape is not None else ""
        fix = (f"; nearest world size that can: {' or '.join(str(w) for w in near)} (--world {near[0]})" if near
               else "; no world size up to 16 can, pick another shape (--shape)")
        return f"{self.name} cannot run at world size {world}{where}: {why}{fix}"

    def resolve_shape(self, given: Shape | str | Sequence[int] | None, world: int, which: str = "bench") -> Shape:
        """`given` (a Shape, a text such as "8192,8192,8192", or sizes) checked for `world`; None: the first
        `which` shape ('bench' or 'verify') that `world` can run. ShapeError when there is none."""
        if given is None:
            shapes = self.shapes_for(world, which)
            if not shapes:
                raise ShapeError(self.world_refusal(world) or
                                 f"{self.name} has no {which} shape that world size {world} can run")
            return shapes[0]
        shape = given if isinstance(given, Shape) else self.parse_shape(given)
        refusal = self.world_refusal(world, shape)
        if refusal:
            raise ShapeError(refusal)
        return shape

    def parse_shape(self, text: str | Sequence[int]) -> Shape:
        """'8192,8192,8192' or '8192x8192x8192' -> Shape, with a clear error naming the dims."""
        if isinstance(text, str):
            try:
                dims = dims_in(text)
            except ValueError:
                raise ShapeError(f"cannot read shape {text!r}; write {','.join(self.dim_names)} as integers") from None
        else:
            dims = tuple(int(d) for d in text)
        if len(dims) != len(self.dim_names) or any(d <= 0 for d in dims):
            raise ShapeError(f"{self.name} takes {len(self.dim_names)} positive sizes {','.join(self.dim_names)}; got {text!r}")
        return Shape(dims)
