"""The design space: five directives as frozen values, validity rules, enumeration and neighbourhoods."""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs

from cuco.errors import CucoError
from cuco.extra_directives import DirectiveError, ExtraDirective, normalise

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

#: chunk_bytes value meaning "the whole buffer in one transfer" (no pipelining).
WHOLE = 0

BACKENDS = ("lsa", "gin", "nvshmem")
PLACEMENTS = ("deferred", "split_put_wait", "stream_overlap", "fused")
SYNC_SCOPES = ("world", "team", "block", "signal")
ISSUERS = ("thread", "warp", "cta", "copy_engine")
MIN_CHUNK = 64 * KiB
MAX_CHUNK = 1 * GiB
CHUNK_SIZES = (WHOLE, 64 * MiB, 16 * MiB, 4 * MiB, 1 * MiB, 256 * KiB, 64 * KiB)

DIRECTIVE_NAMES = ("backend", "placement", "sync_scope", "issuer", "chunk_bytes")

MEANINGS = {
    "backend": "device-initiated transport: lsa = NVLink/P2P load-store (one node), gin = NIC RDMA put/signal "
    "(across nodes), nvshmem = NVSHMEM puts/gets",
    "placement": "where communication is issued relative to compute: deferred = after all compute, "
    "split_put_wait = put kernel and wait kernel bracketing compute, stream_overlap = communication kernel on a "
    "high-priority stream beside compute, fused = inside the compute kernel (tile-and-send)",
    "sync_scope": "how widely completion is synchronised: world barrier, team (LSA team) barrier, block-level "
    "barrier sessions, or signal = per-chunk flags with no barrier",
    "issuer": "which thread group issues a transfer: thread, warp or cta (ncclCoopThread/Warp/Cta), or "
    "copy_engine = the GPU's DMA copy engines (stream copies between LSA-mapped buffers: no SM moves data)",
    "chunk_bytes": "bytes per transfer, the pipelining granularity; 0 = whole buffer",
}


class IllegalPointError(CucoError, ValueError):
    """A point of the design space breaks a validity rule; `reason` says which and how to fix it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _one_of(options: Sequence[str]) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(_inst: Any, attribute: attrs.Attribute, value: Any) -> None:
        if value not in options:
            raise DirectiveError(
                f"unknown {attribute.name} {value!r}; choose one of {', '.join(options)}"
            )

    return check


def _chunk_ok(_inst: Any, _attribute: attrs.Attribute, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DirectiveError(f"chunk_bytes must be an int, got {value!r}")
    if value == WHOLE:
        return
    if value < MIN_CHUNK or value > MAX_CHUNK or value & (value - 1):
        raise DirectiveError(
            f"chunk_bytes={value} is out of range: use 0 (whole buffer) or a power of two "
            f"from {format_bytes(MIN_CHUNK)} to {format_bytes(MAX_CHUNK)}"
        )


def format_bytes(n: int) -> str:
    """Human form of a chunk size: 'whole', '64KiB', '4MiB', '1GiB'."""
    if n == WHOLE:
        return "whole"
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def parse_bytes(text: str | int) -> int:
    """Inverse of format_bytes; also accepts plain integers."""
    if isinstance(text, bool):
        raise DirectiveError(f"chunk size must be a number of bytes, got {text!r}")
    if isinstance(text, int):
        return text
    if isinstance(text, float):
        if text.is_integer():
            return int(text)
        raise DirectiveError(f"chunk size must be a whole number of bytes, got {text!r}")
    if not isinstance(text, str):
        raise DirectiveError(f"cannot read chunk size {text!r}; write e.g. 'whole', '256KiB', '4MiB' or bytes")
    t = text.strip()
    if t.lower() == "whole":
        return WHOLE
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB), ("B", 1)):
        if t.endswith(unit):
            try:
                return int(t[: -len(unit)]) * size
            except ValueError:
                break
    try:
        return int(t)
    except ValueError:
        raise DirectiveError(f"cannot read chunk size {text!r}; write e.g. 'whole', '256KiB', '4MiB'") from None


@attrs.frozen
class Directives:
    """One point of the design space: the five directives, plus the workload's extra ones (name -> value)."""

    backend: str = attrs.field(validator=_one_of(BACKENDS))
    placement: str = attrs.field(validator=_one_of(PLACEMENTS))
    sync_scope: str = attrs.field(validator=_one_of(SYNC_SCOPES))
    issuer: str = attrs.field(validator=_one_of(ISSUERS))
    chunk_bytes: int = attrs.field(validator=_chunk_ok)
    extra: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=normalise)

    def get(self, name: str) -> Any:
        """A core or extra directive's value by name."""
        if name in DIRECTIVE_NAMES:
            return getattr(self, name)
        for key, value in self.extra:
            if key == name:
                return value
        raise DirectiveError(f"point {self.label()} has no directive {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """The point as a JSON-ready dict: the five directives, plus 'extra' when it has extra ones."""
        d: dict[str, Any] = {n: getattr(self, n) for n in DIRECTIVE_NAMES}
        if self.extra:  # points without extras keep the five-key JSON
            d["extra"] = dict(self.extra)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Directives":
        """The point stored by `to_dict`; raises DirectiveError for an unknown, missing or malformed entry."""
        unknown = set(data) - set(DIRECTIVE_NAMES) - {"extra"}
        if unknown:
            raise DirectiveError(
                f"unknown directive name(s) {sorted(unknown)}; the directives are {', '.join(DIRECTIVE_NAMES)}"
            )
        missing = [n for n in DIRECTIVE_NAMES if n not in data]
        if missing:
            raise DirectiveError(f"missing directive(s) {missing}; a point names all of {', '.join(DIRECTIVE_NAMES)}")
        values = dict(data)
        values["chunk_bytes"] = parse_bytes(values["chunk_bytes"])
        if not isinstance(values.get("extra", {}), Mapping):
            raise DirectiveError(f"'extra' must be an object of extra directive values, got {values['extra']!r}")
        return cls(**values)

    def to_json(self) -> str:
        """The point as JSON with sorted keys."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Directives":
        """The point stored by `to_json`; raises DirectiveError for text that is not a JSON object."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DirectiveError(f"directives are not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DirectiveError("directives JSON must be an object with the five directive names as keys")
        return cls.from_dict(data)

    def replace(self, **changes: Any) -> "Directives":
        """A copy with core or extra directives changed (an extra one only if the point already has it)."""
        extra = dict(changes.pop("extra", self.extra))
        for name in [n for n in changes if n not in attrs.fields_dict(Directives)]:
            if name not in extra:
                raise DirectiveError(f"point {self.label()} has no directive {name!r}")
            extra[name] = changes.pop(name)
        return attrs.evolve(self, extra=extra, **changes)

    def label(self) -> str:
        """Compact, stable name, e.g. 'lsa/stream_overlap/signal/warp/4MiB' (+ '/name=value' per extra)."""
        core = (self.backend, self.placement, self.sync_scope, self.issuer, format_bytes(self.chunk_bytes))
        return "/".join((*core, *(f"{n}={v}" for n, v in self.extra)))

    @classmethod
    def from_label(cls, label: str) -> "Directives":
        """The point a `label()` names (backend/placement/sync_scope/issuer/chunk, then name=value per extra directive);
        raises DirectiveError for a malformed label."""
        parts = label.split("/")
        if len(parts) < 5 or any("=" not in p for p in parts[5:]):
            raise DirectiveError(f"a label has five parts backend/placement/sync_scope/issuer/chunk, then "
                                 f"name=value per extra directive; got {label!r}")
        extra = [tuple(p.split("=", 1)) for p in parts[5:]]
        return cls(parts[0], parts[1], parts[2], parts[3], parse_bytes(parts[4]), extra)


@attrs.frozen
class Topology:
    """What the machine offers; decides which backends are legal."""

    world: int = attrs.field(default=2, validator=attrs.validators.ge(1))
    nodes: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    @nodes.validator
    def _nodes_le_world(self, _attr: attrs.Attribute, value: int) -> None:
        if value > self.world:
            raise DirectiveError(f"topology has {value} nodes but only {self.world} ranks; nodes must be <= world")
    gin_available: bool | None = None  # None: unknown (legal in the space, the harness reports "unsupported")
    nvshmem_available: bool | None = None
    sm_count: int = 132

    @property
    def gpus_per_node(self) -> int:
        """GPUs on each node (at least 1)."""
        return max(1, self.world // self.nodes)


Check = Callable[["Directives", "DesignSpace"], "str | None"]


@attrs.frozen
class Rule:
    """A validity rule: `check` returns None when the point is legal, else the reason and the fix."""

    name: str
    check: Check = attrs.field(eq=False, repr=False)


def _lsa_single_node(d: Directives, s: "DesignSpace") -> str | None:
    if d.backend == "lsa" and s.topology.nodes > 1 and d.sync_scope == "world":
        return (
            "backend=lsa reaches only peers in the LSA team (one NVLink domain) but sync_scope=world spans "
            f"{s.topology.nodes} nodes; use sync_scope=team or backend=gin"
        )
    return None


def _gin_needs_nic(d: Directives, s: "DesignSpace") -> str | None:
    if d.backend == "gin" and s.topology.gin_available is False:
        return "backend=gin needs an RDMA NIC and none was detected here; use backend=lsa on one node"
    return None


def _nvshmem_present(d: Directives, s: "DesignSpace") -> str | None:
    if d.backend == "nvshmem" and s.topology.nvshmem_available is False:
        return "backend=nvshmem needs the NVSHMEM library; install the cu12/cu13 extra or pick backend=lsa"
    return None


def _deferred_whole(d: Directives, s: "DesignSpace") -> str | None:
    if d.placement == "deferred" and d.chunk_bytes != WHOLE:
        return (
            "placement=deferred issues communication after all compute, so chunking has nothing to overlap; "
            "use chunk_bytes=0 (whole) or another placement"
        )
    return None


def _fused_coresident(d: Directives, s: "DesignSpace") -> str | None:
    if d.placement != "fused" or s.fused_grid_ctas is None or s.max_coresident_ctas is None:
        return None
    if s.fused_grid_ctas > s.max_coresident_ctas:
        return (
            f"placement=fused launches {s.fused_grid_ctas} CTAs but only {s.max_coresident_ctas} can be "
            "co-resident; in-kernel waits on peers would deadlock. Shrink the fused grid or pick another placement"
        )
    return None


def _fused_thread_issuer(d: Directives, s: "DesignSpace") -> str | None:
    if d.placement == "fused" and d.issuer == "thread":
        return (
            "placement=fused with issuer=thread makes every compute thread a communication issuer and serialises "
            "tiles on transfers; use issuer=warp (warp-specialised) or cta"
        )
    return None


def _signal_needs_chunks(d: Directives, s: "DesignSpace") -> str | None:
    if d.sync_scope == "signal" and d.chunk_bytes == WHOLE and d.placement != "fused":
        return (
            "sync_scope=signal uses one flag per chunk; with chunk_bytes=whole it is a single flag and no "
            "different from a barrier. Pick a chunk size or sync_scope=world/team/block"
        )
    return None


def _copy_engine_transport(d: Directives, s: "DesignSpace") -> str | None:
    if d.issuer != "copy_engine":
        return None
    if d.backend == "gin":
        return ("issuer=copy_engine copies between NVLink-mapped buffers, but backend=gin moves data through the "
                "NIC; use issuer=thread/warp/cta with gin, or backend=lsa")
    if d.placement == "fused":
        return ("placement=fused issues transfers from inside the compute kernel, which a copy engine cannot do; "
                "use issuer=warp or cta with fused, or another placement")
    return None


DEFAULT_RULES: tuple[Rule, ...] = (
    Rule("lsa-single-node", _lsa_single_node),
    Rule("gin-needs-nic", _gin_needs_nic),
    Rule("nvshmem-present", _nvshmem_present),
    Rule("deferred-whole-buffer", _deferred_whole),
    Rule("fused-co-resident", _fused_coresident),
    Rule("fused-no-thread-issuer", _fused_thread_issuer),
    Rule("signal-needs-chunks", _signal_needs_chunks),
    Rule("copy-engine-transport", _copy_engine_transport),
)


def _tuple_of(options: Sequence[Any], name: str) -> Callable[[Any, attrs.Attribute, Any], None]:
    def check(_inst: Any, _attr: attrs.Attribute, values: tuple) -> None:
        if not values:
            raise DirectiveError(f"the design space needs at least one {name}")
        for v in values:
            if name == "chunk_bytes":
                _chunk_ok(None, _attr, v)
            elif v not in options:
                raise DirectiveError(f"unknown {name} {v!r}; choose from {', '.join(map(str, options))}")
        if len(set(values)) != len(values):
            raise DirectiveError(f"duplicate {name} values in {values}")

    return check


@attrs.frozen
class DesignSpace:
    """The legal values of each directive, the rules that tie them together, and the machine."""

    backends: tuple[str, ...] = attrs.field(default=BACKENDS, converter=tuple, validator=_tuple_of(BACKENDS, "backend"))
    placements: tuple[str, ...] = attrs.field(
        default=PLACEMENTS, converter=tuple, validator=_tuple_of(PLACEMENTS, "placement")
    )
    sync_scopes: tuple[str, ...] = attrs.field(
        default=SYNC_SCOPES, converter=tuple, validator=_tuple_of(SYNC_SCOPES, "sync_scope")
    )
    issuers: tuple[str, ...] = attrs.field(default=ISSUERS, converter=tuple, validator=_tuple_of(ISSUERS, "issuer"))
    chunk_sizes: tuple[int, ...] = attrs.field(
        default=CHUNK_SIZES, converter=tuple, validator=_tuple_of((), "chunk_bytes")
    )
    topology: Topology = attrs.field(factory=Topology)
    fused_grid_ctas: int | None = None
    max_coresident_ctas: int | None = None
    rules: tuple[Rule, ...] = attrs.field(default=DEFAULT_RULES, converter=tuple)
    extras: tuple[ExtraDirective, ...] = attrs.field(default=(), converter=tuple)

    @extras.validator
    def _extras_unique(self, _attr: attrs.Attribute, extras: tuple[ExtraDirective, ...]) -> None:
        names = [e.name for e in extras]
        if len(set(names)) != len(names):
            raise DirectiveError(f"extra directives named twice: {names}")

    @property
    def names(self) -> tuple[str, ...]:
        """Every directive of this space: the five core ones, then the workload's extras."""
        return DIRECTIVE_NAMES + tuple(e.name for e in self.extras)

    def _make(self, values: Sequence[Any]) -> Directives:
        core, extra = values[:len(DIRECTIVE_NAMES)], values[len(DIRECTIVE_NAMES):]
        return Directives(*core, extra=tuple(zip((e.name for e in self.extras), extra)))

    # -- values ---------------------------------------------------------------------------------------
    def values(self, name: str) -> tuple:
        """Legal values of one directive."""
        for e in self.extras:
            if e.name == name:
                return e.values
        table = {
            "backend": self.backends,
            "placement": self.placements,
            "sync_scope": self.sync_scopes,
            "issuer": self.issuers,
            "chunk_bytes": self.chunk_sizes,
        }
        if name not in table:
            raise DirectiveError(f"unknown directive name {name!r}; the directives are {', '.join(self.names)}")
        return table[name]

    # -- validity -------------------------------------------------------------------------------------
    def check(self, point: Directives) -> str | None:
        """None if `point` is legal here, else the reason (naming the fix)."""
        for name in DIRECTIVE_NAMES:
            value = getattr(point, name)
            if value not in self.values(name):
                shown = format_bytes(value) if name == "chunk_bytes" else value
                allowed = [format_bytes(v) if name == "chunk_bytes" else v for v in self.values(name)]
                return f"{name}={shown} is outside this design space; choose one of {', '.join(map(str, allowed))}"
        given, wanted = {n for n, _v in point.extra}, {e.name for e in self.extras}
        if given != wanted:
            return (f"point {point.label()} names extra directive(s) {sorted(given) or 'none'} but this space has "
                    f"{sorted(wanted) or 'none'}; name exactly those (e.g. from conservative())")
        for e in self.extras:
            if point.get(e.name) not in e.values:
                return f"{e.name}={point.get(e.name)} is outside this design space; choose one of {', '.join(e.values)}"
        for rule in self.rules:
            reason = rule.check(point, self)
            if reason:
                return f"[{rule.name}] {reason}"
        return None

    def is_legal(self, point: Directives) -> bool:
        """True when `point` breaks no rule of this space."""
        return self.check(point) is None

    def validate(self, point: Directives) -> Directives:
        """Return `point` if legal, else raise IllegalPointError with the reason."""
        reason = self.check(point)
        if reason:
            raise IllegalPointError(reason)
        return point

    # -- enumeration ----------------------------------------------------------------------------------
    def all_points(self) -> Iterator[Directives]:
        """Every combination of values, legal or not."""
        for combo in itertools.product(*(self.values(n) for n in self.names)):
            yield self._make(combo)

    def points(self) -> Iterator[Directives]:
        """Every legal point, in a stable order."""
        return (p for p in self.all_points() if self.is_legal(p))

    def size(self) -> int:
        """The number of legal points."""
        return sum(1 for _ in self.points())

    def sample(self, rng: random.Random | int | None = None, attempts: int = 10_000) -> Directives:
        """A uniformly drawn legal point (rejection sampling, then enumeration as a fallback). `rng`: a
        random.Random, an int seed (the same seed, the same point), or None for a fresh random stream."""
        if rng is None or (isinstance(rng, int) and not isinstance(rng, bool)):
            rng = random.Random(rng)
        elif not isinstance(rng, random.Random):
            raise TypeError(f"sample() takes a random.Random, an int seed or None, got {type(rng).__name__}")
        for _ in range(attempts):
            p = self._make([rng.choice(self.values(n)) for n in self.names])
            if self.is_legal(p):
                return p
        legal = list(self.points())
        if not legal:
            raise IllegalPointError("the design space has no legal point; relax its restrictions")
        return rng.choice(legal)

    def neighbours(self, point: Directives) -> list[Directives]:
        """Legal points that differ from `point` in exactly one directive."""
        out = []
        for name in self.names:
            for value in self.values(name):
                if value == point.get(name):
                    continue
                q = point.replace(**{name: value})
                if self.is_legal(q):
                    out.append(q)
        return out

    def distance(self, a: Directives, b: Directives) -> float:
        """Categorical directives count 1 when they differ; chunk sizes by log2 ratio, capped at 1."""
        d = sum(getattr(a, n) != getattr(b, n) for n in ("backend", "placement", "sync_scope", "issuer"))
        d += sum(dict(a.extra).get(e.name) != dict(b.extra).get(e.name) for e in self.extras)
        ca, cb = a.chunk_bytes, b.chunk_bytes
        if ca != cb:
            if WHOLE in (ca, cb):
                d += 1.0
            else:
                d += min(1.0, abs(math.log2(ca) - math.log2(cb)) / 4.0)
        return float(d)

    def conservative(self) -> Directives:
        """The fast path's point: deferred / world (or team) / cta / whole buffer on the first backend that
        allows it, extras at their first value; else the first legal point."""
        defaults = tuple((e.name, e.default) for e in self.extras)
        for scopes in (("world", "team"), tuple(self.sync_scopes)):
            for backend in self.backends:
                for scope in scopes:
                    p = Directives(backend, "deferred", scope, "cta", WHOLE, defaults)
                    if p.sync_scope in self.sync_scopes and self.is_legal(p):
                        return p
        first = next(self.points(), None)
        if first is None:
            raise IllegalPointError("the design space has no legal point; relax its restrictions")
        return first

    def restrict(self, **values: Sequence[Any]) -> "DesignSpace":
        """A sub-space: e.g. restrict(backends=('lsa',), chunk_sizes=(0, 4*MiB))."""
        for key, vals in values.items():
            full = getattr(self, key, None)
            if key not in attrs.fields_dict(DesignSpace) or key in ("rules", "topology"):
                raise DirectiveError(f"cannot restrict {key!r}; use one of backends, placements, sync_scopes, issuers, chunk_sizes")
            if key in ("backends", "placements", "sync_scopes", "issuers", "chunk_sizes"):
                extra = set(vals) - set(full)
                if extra:
                    raise DirectiveError(f"{key} {sorted(map(str, extra))} are not in the space being restricted")
        return attrs.evolve(self, **values)

    def with_topology(self, topology: Topology) -> "DesignSpace":
        """The same space on another machine."""
        return attrs.evolve(self, topology=topology)

    # -- serialisation --------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The space as a JSON-ready dict; its rules are stored by name."""
        return {
            "backends": list(self.backends),
            "placements": list(self.placements),
            "sync_scopes": list(self.sync_scopes),
            "issuers": list(self.issuers),
            "chunk_sizes": list(self.chunk_sizes),
            "topology": attrs.asdict(self.topology),
            "fused_grid_ctas": self.fused_grid_ctas,
            "max_coresident_ctas": self.max_coresident_ctas,
            "rules": [r.name for r in self.rules],
            **({"extras": [e.to_dict() for e in self.extras]} if self.extras else {}),
        }

    def to_json(self) -> str:
        """The space as JSON with sorted keys."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], extra_rules: Sequence[Rule] = ()) -> "DesignSpace":
        """The space stored by `to_dict`; rules beyond the default ones must be given as `extra_rules`. Raises
        DirectiveError for an unknown rule or field."""
        known = {r.name: r for r in (*DEFAULT_RULES, *extra_rules)}
        names = data.get("rules", [r.name for r in DEFAULT_RULES])
        missing = [n for n in names if n not in known]
        if missing:
            raise DirectiveError(f"unknown rule(s) {missing}; pass them as extra_rules when loading")
        fields = {k: v for k, v in data.items() if k not in ("rules", "topology", "extras")}
        unknown = set(fields) - set(attrs.fields_dict(cls))
        if unknown:
            raise DirectiveError(f"unknown design-space field(s) {sorted(unknown)}")
        return cls(
            topology=Topology(**data.get("topology", {})),
            rules=tuple(known[n] for n in names),
            extras=tuple(ExtraDirective.from_dict(e) for e in data.get("extras", ())),
            **fields,
        )

    @classmethod
    def from_json(cls, text: str, extra_rules: Sequence[Rule] = ()) -> "DesignSpace":
        """The space stored by `to_json` (see `from_dict`); raises DirectiveError for text that is not a JSON object."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DirectiveError(f"design space is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise DirectiveError("design space JSON must be an object (see DesignSpace.to_json)")
        return cls.from_dict(data, extra_rules)

    # -- prompt ---------------------------------------------------------------------------------------
    def prompt_text(self) -> str:
        """The space as an LLM reads it: directives, legal values, rules. Proposals name a point first."""
        lines = ["Design space (name your point before your code, as `DIRECTIVES: {json}`):"]
        for name in DIRECTIVE_NAMES:
            vals = self.values(name)
            shown = [format_bytes(v) for v in vals] if name == "chunk_bytes" else list(vals)
            lines.append(f"- {name}: {' | '.join(map(str, shown))} -- {MEANINGS[name]}")
        for e in self.extras:
            lines.append(f"- {e.name}: {' | '.join(e.values)} -- {e.meaning} (workload-specific; write it under "
                         f"\"extra\" in the JSON)")
        t = self.topology
        lines.append(
            f"Machine: world={t.world} ranks on {t.nodes} node(s), {t.sm_count} SMs per GPU, "
            f"GIN {'available' if t.gin_available else 'unavailable' if t.gin_available is False else 'unknown'}, "
            f"NVSHMEM {'available' if t.nvshmem_available else 'unavailable' if t.nvshmem_available is False else 'unknown'}."
        )
        lines.append("Rules: " + "; ".join(r.name for r in self.rules) + ".")
        lines.append(f"Legal points: {self.size()}; conservative point: {self.conservative().label()}.")
        return "\n".join(lines)
