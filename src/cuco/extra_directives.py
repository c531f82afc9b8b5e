"""Workload-specific directives (e.g. a dispatch dtype) that extend the five core ones without editing them."""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

import attrs

from cuco.errors import CucoError

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_VALUE = re.compile(r"^[A-Za-z0-9_.+-]+$")
#: Names an extra directive may not take (the core directives and the serialisation keys).
RESERVED = frozenset(("backend", "placement", "sync_scope", "issuer", "chunk_bytes", "extra"))


class DirectiveError(CucoError, ValueError):
    """A directive name or value is not part of the design space (core or extra directive)."""


def check_name(name: str) -> str:
    """`name`, checked: lower_snake_case and not a reserved directive name; raises DirectiveError otherwise."""
    if not isinstance(name, str) or not _NAME.match(name) or name in RESERVED:
        raise DirectiveError(f"extra directive name {name!r} must be lower_snake_case and not one of "
                                  f"{', '.join(sorted(RESERVED))}")
    return name


def check_value(name: str, value: Any) -> str:
    """`value`, checked: a non-empty string of letters, digits and _ . + -; raises DirectiveError otherwise."""
    if not isinstance(value, str) or not _VALUE.match(value):
        raise DirectiveError(f"extra directive {name}={value!r}: values are non-empty strings of letters, "
                                  "digits and _ . + - (they appear in labels, e.g. '.../dispatch_dtype=fp8')")
    return value


def normalise(extra: Mapping[str, Any] | Iterable[tuple[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    """Sorted ((name, value), ...) from a mapping or pairs; names and values checked."""
    if extra is None:
        return ()
    pairs = list(extra.items()) if isinstance(extra, Mapping) else [tuple(p) for p in extra]
    names = [check_name(n) for n, _v in pairs]
    if len(set(names)) != len(names):
        raise DirectiveError(f"extra directive named twice in {names}")
    return tuple(sorted((n, check_value(n, v)) for n, v in pairs))


def _values(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen
class ExtraDirective:
    """One workload-specific directive: its name, legal values (the first is the conservative one) and what it
    means (shown to the LLM)."""

    name: str = attrs.field(validator=lambda _i, _a, v: check_name(v))
    values: tuple[str, ...] = attrs.field(converter=_values)
    meaning: str = ""

    @values.validator
    def _check_values(self, _attr: attrs.Attribute, values: tuple[str, ...]) -> None:
        if not values:
            raise DirectiveError(f"extra directive {self.name} needs at least one value")
        for v in values:
            check_value(self.name, v)
        if len(set(values)) != len(values):
            raise DirectiveError(f"duplicate values in extra directive {self.name}: {values}")

    @property
    def default(self) -> str:
        """The conservative value (the first legal one)."""
        return self.values[0]

    def to_dict(self) -> dict[str, Any]:
        """The directive as a JSON-ready dict."""
        return {"name": self.name, "values": list(self.values), "meaning": self.meaning}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExtraDirective":
        """The directive stored by `to_dict`; raises DirectiveError for a malformed entry."""
        try:
            return cls(data["name"], data["values"], data.get("meaning", ""))
        except (KeyError, TypeError):
            raise DirectiveError(f"an extra directive is {{name, values, meaning}}; got {data!r}") from None
