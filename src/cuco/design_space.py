"""The design space: the legal values of each directive on a machine, the rules that tie them together, enumeration
and neighbourhoods. The directives themselves are `cuco.directives`, the rules `cuco.space_rules`, the machine
`cuco.topology` (all re-exported here)."""

from __future__ import annotations

import itertools
import json
import math
import random
from typing import Any, Callable, Iterator, Mapping, Sequence

import attrs

from cuco.directives import (BACKENDS, CHUNK_SIZES, DIRECTIVE_NAMES, GiB, ISSUERS, KiB, MAX_CHUNK, MEANINGS, MIN_CHUNK,
                             MiB, PLACEMENTS, SYNC_SCOPES, WHOLE, Directives, IllegalPointError, _chunk_ok,
                             format_bytes, json_object, parse_bytes)
from cuco.extra_directives import DirectiveError, ExtraDirective
from cuco.space_rules import DEFAULT_RULES, Check, Rule
from cuco.topology import Topology

__all__ = ["BACKENDS", "CHUNK_SIZES", "DEFAULT_RULES", "DIRECTIVE_NAMES", "ISSUERS", "MAX_CHUNK", "MEANINGS",
           "MIN_CHUNK", "PLACEMENTS", "SYNC_SCOPES", "WHOLE", "Check", "DesignSpace", "DirectiveError", "Directives",
           "GiB", "IllegalPointError", "KiB", "MiB", "Rule", "Topology", "format_bytes", "parse_bytes"]

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

    def complete(self, point: Directives) -> Directives:
        """`point` with every extra directive of this space that it does not name at its conservative value, so a
        label written before a workload gained a directive (in a results file, a script, `--try`) names the point
        it always did; a point naming one this space lacks is left for check() to refuse."""
        named = {n for n, _v in point.extra}
        missing = tuple((e.name, e.default) for e in self.extras if e.name not in named)
        if not missing:
            return point
        return attrs.evolve(point, extra=(*point.extra, *missing))

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
        return cls.from_dict(json_object(text, "design space", "(see DesignSpace.to_json)"), extra_rules)

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
