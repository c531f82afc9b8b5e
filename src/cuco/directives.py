"""The five directives of a design point as one frozen value, their allowed values and meanings, and chunk sizes
written as bytes ("4MiB")."""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Sequence

import attrs

from cuco.errors import CucoError
from cuco.extra_directives import DirectiveError, normalise

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


def json_object(text: str, what: str, hint: str) -> dict:
    """The JSON object in `text`; DirectiveError naming `what` (and `hint` on what the object holds) otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DirectiveError(f"{what}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DirectiveError(f"{what} JSON must be an object {hint}")
    return data


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
        return cls.from_dict(json_object(text, "directives", "with the five directive names as keys"))

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
