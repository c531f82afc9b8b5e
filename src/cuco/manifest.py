"""The run manifest (`manifest.json` in a run directory): what problem a run measures and where, written
atomically before anything else of the run, so that a resume can refuse to mix in another problem and a
report or export can say what the numbers are of."""

from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

from cuco import atomic
from cuco.errors import CucoError

MANIFEST_FILE = "manifest.json"
#: The fields a resume must agree on, with the option that sets each (None: not an option of `cuco run`).
COMPARED = (("workload", "workload"), ("program_sha256", None), ("shape", "--shape"), ("world", "--world"),
            ("seed", "--seed"), ("cuco_version", None), ("toolchain", None), ("device", None))


class ManifestError(CucoError):
    """manifest.json is missing, unreadable, or disagrees with what a resume asks for."""


@attrs.frozen
class RunManifest:
    """The identity of one run: its program (workload name and hash of its host seed), problem (shape, world),
    search seed and size, and the cuco, toolchain and GPUs it is measured with."""

    workload: str
    program_sha256: str
    shape: str
    world: int
    seed: int
    evaluations: int
    cuco_version: str
    toolchain: Mapping[str, str] = attrs.field(converter=lambda m: dict(sorted(dict(m).items())))
    device: str
    #: The LLM spending cap in USD; a resume without --budget-usd keeps it (None: a run from before it was kept).
    budget_usd: float | None = None
    created_at: str = attrs.field(factory=lambda: datetime.datetime.now(datetime.timezone.utc)
                                  .isoformat(timespec="seconds"))

    def to_dict(self) -> dict[str, Any]:
        """The manifest as a JSON-ready dict."""
        return {**attrs.asdict(self), "toolchain": dict(self.toolchain)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RunManifest":
        """The manifest stored by `to_dict`; raises ManifestError naming the fields it lacks."""
        names = [f.name for f in attrs.fields(cls)]
        missing = [n for n in names if n not in d and n not in ("created_at", "budget_usd")]
        if missing:
            raise ManifestError(f"manifest lacks {', '.join(missing)}")
        return cls(**{n: d[n] for n in names if n in d})

    def write(self, run_dir: Path) -> None:
        """Write run_dir/manifest.json atomically (a kill leaves the old file or the new one, never half)."""
        atomic.write_text(run_dir / MANIFEST_FILE, json.dumps(self.to_dict(), indent=2, sort_keys=True), fsync=True)

    @classmethod
    def read(cls, run_dir: Path) -> "RunManifest | None":
        """The manifest of run_dir, or None if it has none."""
        path = Path(run_dir) / MANIFEST_FILE
        if not path.exists():
            return None
        try:
            return cls.from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, TypeError, ManifestError) as exc:
            raise ManifestError(f"{path} cannot be read ({exc}); it was not written by cuco, or was edited: "
                                "restore it or start a new --run-dir") from None

    def differences(self, other: "RunManifest") -> list[str]:
        """Sentences naming each field on which `other` (what is asked now) differs from this (the run)."""
        out = []
        for name, option in COMPARED:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine == theirs:
                continue
            if option and option.startswith("--"):
                out.append(f"{option} {theirs} but the run was started with {option} {mine}; "
                           f"drop {option} or start a new --run-dir")
            elif option:
                out.append(f"{option} {theirs!r} but the run is of {option} {mine!r}; start a new --run-dir")
            else:
                what = name.replace("_", " ")
                out.append(f"{what} is {_show(theirs)} here but the run was started with {_show(mine)}; resume it "
                           f"where it was started, or start a new --run-dir")
        return out


def _show(value: Any) -> str:
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return repr(value) if isinstance(value, str) else str(value)


def sha256_text(text: str) -> str:
    """Hex SHA-256 of `text` encoded as UTF-8."""
    return hashlib.sha256(text.encode()).hexdigest()


def describe_gpus(visible: Sequence[str]) -> str:
    """The models of the visible GPUs ('NVIDIA H200', several joined by ' + '), or 'no GPU'."""
    if not visible:
        return "no GPU"
    names: dict[str, str] = {}
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "--query-gpu=index,uuid,name", "--format=csv,noheader"], capture_output=True,
                                 text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
        for line in out.splitlines():
            parts = [p.strip() for p in line.split(",", 2)]
            if len(parts) == 3:
                names[parts[0]] = names[parts[1]] = parts[2]
    return " + ".join(sorted({names.get(v, "NVIDIA GPU") for v in visible}))
