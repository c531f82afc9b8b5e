"""One observed run of a program (observe.h's files): its read-backs, its timed regions, and how two runs
compare. Pure functions of the files, so they are tested on the CPU."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Mapping

import attrs
import numpy as np

#: Relative tolerance (to the largest magnitude of a read-back) when bytes differ and the data reads as fp32:
#: device reductions add in another order than NCCL's.
FP32_RTOL = 1e-5


@attrs.frozen
class Observation:
    """Read-backs keyed by (device, sequence on that device) and region samples (site, device, instance, ms)."""

    readbacks: Mapping[tuple[int, int], bytes] = attrs.field(repr=False)
    regions: tuple[tuple[int, int, int, float], ...]

    @classmethod
    def read(cls, directory: Path) -> "Observation":
        """Every process's files in `directory` (a process without read-backs or regions writes none)."""
        reads: dict[tuple[int, int], bytes] = {}
        regions: list[tuple[int, int, int, float]] = []
        for index in sorted(directory.glob("obs-*.txt")):
            blob = index.with_suffix(".bin").read_bytes()
            for line in index.read_text().splitlines():
                parts = line.split()
                if parts and parts[0] == "readback":
                    dev, seq, off, n = (int(x) for x in parts[1:5])
                    key = (dev, seq)
                    while key in reads:   # two processes on one device: keep both, in file order
                        key = (key[0], key[1] + 1_000_000)
                    reads[key] = blob[off:off + n]
                elif parts and parts[0] == "region":
                    regions.append((int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4])))
        return cls(reads, tuple(sorted(regions)))

    def region_ms(self) -> float | None:
        """The run's time: per site, the slowest device's median over warm instances (every instance after the
        first where a site ran more than once), summed over sites. None without regions."""
        if not self.regions:
            return None
        total = 0.0
        for site in sorted({r[0] for r in self.regions}):
            per_device: dict[int, list[tuple[int, float]]] = {}
            for s, dev, inst, ms in self.regions:
                if s == site:
                    per_device.setdefault(dev, []).append((inst, ms))
            medians = []
            for samples in per_device.values():
                warm = [ms for inst, ms in samples if inst > 0] or [ms for _inst, ms in samples]
                medians.append(statistics.median(warm))
            total += max(medians)
        return total


    def cold_ms(self) -> float | None:
        """The run's first (cold) pass: per site, the slowest device's first instance, summed over sites; it pays
        what the warm instances do not (NCCL's lazy connections, first launches). None without regions."""
        if not self.regions:
            return None
        first: dict[int, float] = {}
        for site, _dev, inst, ms in self.regions:
            if inst == 0:
                first[site] = max(first.get(site, 0.0), ms)
        return sum(first.values())


def compare(reference: Observation, got: Observation) -> tuple[bool, str]:
    """(equal, how): equal bytes, or fp32 data within FP32_RTOL of the reference's largest magnitude."""
    if set(reference.readbacks) != set(got.readbacks):
        missing = sorted(set(reference.readbacks) - set(got.readbacks))
        extra = sorted(set(got.readbacks) - set(reference.readbacks))
        return False, (f"the program read back {len(got.readbacks)} buffers, the reference {len(reference.readbacks)}"
                       f" (missing (device, n): {missing[:4]}, extra: {extra[:4]})")
    worst = 0.0
    for key in sorted(reference.readbacks):
        a, b = reference.readbacks[key], got.readbacks[key]
        if a == b:
            continue
        if len(a) != len(b):
            return False, f"read-back {key} (device, n) has {len(b)} bytes, the reference's {len(a)}"
        if len(a) % 4:
            return False, f"read-back {key} (device, n) differs from the reference (not fp32 data: compared as bytes)"
        x = np.frombuffer(a, dtype=np.float32).astype(np.float64)
        y = np.frombuffer(b, dtype=np.float32).astype(np.float64)
        if not np.array_equal(np.isfinite(x), np.isfinite(y)):
            return False, f"read-back {key} (device, n): NaN/Inf where the reference has none (or the reverse)"
        finite = np.isfinite(x)
        scale = float(np.max(np.abs(x[finite]))) if finite.any() else 0.0
        err = float(np.max(np.abs(x[finite] - y[finite]))) if finite.any() else 0.0
        rel = err / scale if scale else (0.0 if err == 0 else float("inf"))
        if rel > FP32_RTOL:
            bad = int(np.argmax(np.abs(np.where(finite, x - y, 0))))
            return False, (f"read-back {key} (device, n) differs: element {bad} is {y[bad]:.6g}, the reference "
                           f"{x[bad]:.6g} (max error {rel:.3g} of the largest magnitude, tolerance {FP32_RTOL:g})")
        worst = max(worst, rel)
    n = len(reference.readbacks)
    if worst == 0.0:
        return True, f"{n} read-back(s) bit-identical to the reference"
    return True, f"{n} read-back(s) equal to the reference within fp32 rounding (max error {worst:.2g} of the largest magnitude)"
