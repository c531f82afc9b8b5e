"""SearchConfig: every knob of the evolution loop as one frozen, serialisable value (stored with the run)."""

from __future__ import annotations

import difflib
from typing import Any, Mapping

import attrs

from cuco.errors import CucoError
from cuco.search.island import IslandSpec
from cuco.search.migration import MigrationPolicy
from cuco.search.novelty import NoveltyFilter
from cuco.search.schedule import Schedule
from cuco.search.selection import Policy, Weighted, policy_from_dict


class SearchConfigError(CucoError, ValueError):
    """A search setting is out of range; the message names it and the accepted values."""


def _positive(name: str):
    def check(_inst: Any, _attr: Any, value: int) -> None:
        if not isinstance(value, int) or value < 1:
            raise SearchConfigError(f"{name} must be a positive integer, got {value!r}")
    return check


@attrs.frozen
class SearchConfig:
    """islands x island_capacity populations; batch_size candidates per evaluation call (a generation);
    max_in_flight proposals prepared ahead (LLM calls overlap evaluation); meta_every: evaluations between
    meta-summaries; seed: makes offline runs reproducible (per-evaluation random streams derive from it);
    island_specs: none, or one IslandSpec per island (its own backend, seed point or prompt note)."""

    islands: int = attrs.field(default=4, validator=_positive("islands"))
    island_capacity: int = attrs.field(default=16, validator=_positive("island_capacity"))
    selection: Policy = attrs.field(factory=Weighted)
    migration: MigrationPolicy = attrs.field(factory=MigrationPolicy)
    schedule: Schedule = attrs.field(factory=Schedule)
    novelty: NoveltyFilter = attrs.field(factory=NoveltyFilter)
    archive_axes: tuple[str, ...] = attrs.field(default=("placement", "sync_scope"), converter=tuple)
    inspirations: int = attrs.field(default=3, validator=attrs.validators.ge(0))
    batch_size: int = attrs.field(default=4, validator=_positive("batch_size"))
    max_in_flight: int = attrs.field(default=8, validator=_positive("max_in_flight"))
    meta_every: int = attrs.field(default=10, validator=_positive("meta_every"))
    seed: int = 0
    island_specs: tuple[IslandSpec, ...] = attrs.field(default=(), converter=tuple)

    def __attrs_post_init__(self) -> None:
        if self.island_specs and len(self.island_specs) != self.islands:
            raise SearchConfigError(f"island_specs has {len(self.island_specs)} entries for {self.islands} islands; "
                                    "give one IslandSpec per island (IslandSpec() for a plain one) or none")
        if self.max_in_flight < self.batch_size:
            raise SearchConfigError(f"max_in_flight ({self.max_in_flight}) must be >= batch_size ({self.batch_size}) "
                                    "so that a whole batch can be prepared")
        if self.novelty.embedding is not None:
            raise SearchConfigError("a stored SearchConfig uses the offline n-gram novelty filter; pass an embedding "
                                    "filter to Search(novelty=...) directly")

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a JSON-ready dict (without the novelty filter's embedding function)."""
        return {
            "islands": self.islands, "island_capacity": self.island_capacity,
            "selection": attrs.asdict(self.selection), "migration": attrs.asdict(self.migration),
            "schedule": self.schedule.to_dict(),
            "novelty": {k: v for k, v in attrs.asdict(self.novelty).items() if k != "embedding"},
            "archive_axes": list(self.archive_axes), "inspirations": self.inspirations,
            "batch_size": self.batch_size, "max_in_flight": self.max_in_flight, "meta_every": self.meta_every,
            "seed": self.seed,
        } | ({"island_specs": [s.to_dict() for s in self.island_specs]} if self.island_specs else {})

    def with_settings(self, **settings: Any) -> "SearchConfig":
        """This configuration with `settings` (field=value) changed; SearchConfigError names an unknown field."""
        fields = attrs.fields_dict(type(self))
        unknown = sorted(set(settings) - set(fields))
        if unknown:
            near = {n: difflib.get_close_matches(n, fields, n=1) for n in unknown}
            said = ", ".join(f"{n!r}" + (f" (did you mean {m[0]!r}?)" if m else "") for n, m in near.items())
            raise SearchConfigError(f"unknown search setting {said}; the settings are {', '.join(fields)}")
        return attrs.evolve(self, **settings) if settings else self

    def check_space(self, space: Any) -> None:
        """Raise IslandError when an island's spec does not fit `space` (a DesignSpace)."""
        for i in range(self.islands):
            self.spec(i).check(i, space)

    def spec(self, island: int) -> IslandSpec:
        """The spec of island `island` (a plain one when none were given)."""
        return self.island_specs[island] if self.island_specs else IslandSpec()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SearchConfig":
        """The configuration stored by `to_dict`; raises SearchConfigError when it is incomplete."""
        d = dict(d)
        try:
            return cls(
                selection=policy_from_dict(d.pop("selection")), migration=MigrationPolicy(**d.pop("migration")),
                schedule=Schedule.from_dict(d.pop("schedule")), novelty=NoveltyFilter(**d.pop("novelty")),
                island_specs=tuple(IslandSpec.from_dict(x) for x in d.pop("island_specs", ())), **d)
        except (KeyError, TypeError) as exc:
            raise SearchConfigError(f"stored search config is incomplete or from another cuco version ({exc}); "
                                    "start a new run directory") from None
