"""Runs harness processes on groups of GPUs of one host.

A host with N visible GPUs and a world size W is split into N // W disjoint device groups of W GPUs; up
to that many runs proceed at once, each on its own group. Every command runs in its own process group
with a hard timeout that kills the whole group (grandchildren included), and with an environment
scrubbed of LLM API keys and with NVLink multicast forced off.

Timing policy: verification (L2) runs concurrently on all groups; benchmarking (L3) is serialised over
the whole host (`exclusive=True` takes every group), because runs on different groups of one host share
NVLink switches, PCIe, host memory bandwidth and the power/thermal budget, and disturb each other's timing.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Callable, Mapping, Sequence, TypeVar

import attrs

from cuco.errors import CucoError
from cuco.process import ProcessOutcome, run_group, scrubbed_env

R = TypeVar("R")


class NoGPUError(CucoError):
    """Work that needs GPUs was submitted where there are not enough of them."""


@attrs.frozen
class DeviceGroup:
    """W GPUs that one harness run owns: ordinals as this process sees them, and what the child sees."""

    index: int
    devices: tuple[int, ...] = attrs.field(converter=tuple)     # ordinals among this process's visible GPUs
    visible: tuple[str, ...] = attrs.field(converter=tuple)     # CUDA_VISIBLE_DEVICES entries for a child

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """A scrubbed environment in which exactly this group's GPUs are visible (as 0..W-1)."""
        return scrubbed_env(extra={**(extra or {}), "CUDA_VISIBLE_DEVICES": ",".join(self.visible)})


def visible_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices or UUIDs).

    CUDA_VISIBLE_DEVICES wins when set (empty or '-1' means none); else nvidia-smi is asked; no
    nvidia-smi means no GPU.
    """
    env = os.environ if environ is None else environ
    if "CUDA_VISIBLE_DEVICES" in env:
        kept: list[str] = []
        for entry in env["CUDA_VISIBLE_DEVICES"].split(","):
            entry = entry.strip()
            if not entry or entry.startswith("-") or entry.lower().startswith("nodev"):
                break  # CUDA, too, stops at the first invalid entry
            kept.append(entry)
        return tuple(kept)
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ()
    if out.returncode != 0:
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip().isdigit())


def partition(visible: Sequence[str], world: int) -> tuple[DeviceGroup, ...]:
    """Consecutive groups of `world` GPUs; a remainder that cannot form a group stays unused."""
    if world < 1:
        raise ValueError(f"world size must be >= 1, got {world}")
    return tuple(DeviceGroup(g, range(g * world, (g + 1) * world), visible[g * world:(g + 1) * world])
                 for g in range(len(visible) // world))


class Executor:
    """Runs functions (each given a DeviceGroup) on the host's GPU groups.

    `gpus=None` uses every visible GPU, an int the first `gpus` of them (NoGPUError where fewer are
    visible). `devices` names the GPUs explicitly (CUDA_VISIBLE_DEVICES entries) and skips detection.
    """

    def __init__(self, gpus: int | None = None, world: int = 2, devices: Sequence[str] | None = None):
        if devices is not None:
            visible = tuple(str(d) for d in devices)
        else:
            found = visible_gpus()
            if gpus is not None and not 0 <= gpus <= len(found):
                raise NoGPUError(f"{gpus} GPUs requested but {len(found)} visible ({', '.join(found) or 'none'}); "
                                 "pass gpus=None to use what is there")
            visible = found if gpus is None else found[:gpus]
        self.world = world
        self.gpus = len(visible)
        self.groups = partition(visible, world)
        self._free: queue.Queue[DeviceGroup] = queue.Queue()
        for g in self.groups:
            self._free.put(g)
        self._exclusive = threading.Lock()

    @property
    def has_gpu(self) -> bool:
        """True when at least one group of `world` GPUs exists."""
        return bool(self.groups)

    def describe(self) -> str:
        """The visible GPUs and how they are grouped, in one line for messages."""
        if not self.gpus:
            return "no GPU visible (nvidia-smi found none, or CUDA_VISIBLE_DEVICES is empty)"
        if not self.groups:
            return f"{self.gpus} GPU(s) visible but world size {self.world} needs {self.world} per run"
        return f"{self.gpus} GPU(s) in {len(self.groups)} group(s) of {self.world}"

    def require_gpu(self) -> None:
        """Raise NoGPUError (with what was found and what is needed) when no group exists."""
        if not self.groups:
            raise NoGPUError(f"{self.describe()}: verifying and timing candidates needs a host with at least "
                             f"{self.world} NVIDIA GPUs (set CUDA_VISIBLE_DEVICES to choose them)")

    # -- running -----------------------------------------------------------------------------------
    def _acquire(self, exclusive: bool) -> list[DeviceGroup]:
        if not exclusive:
            return [self._free.get()]
        with self._exclusive:  # one exclusive taker at a time, so two cannot each hold half the host
            return [self._free.get() for _ in self.groups]

    def _release(self, taken: list[DeviceGroup]) -> None:
        for g in taken:
            self._free.put(g)

    def run(self, fn: Callable[[DeviceGroup], R], exclusive: bool = False) -> R:
        """Run fn on a free group (blocking until one is free); exclusive: with the whole host to itself,
        on group 0's devices."""
        self.require_gpu()
        taken = self._acquire(exclusive)
        try:
            group = min(taken, key=lambda g: g.index)
            return fn(group)
        finally:
            self._release(taken)

    def map(self, fns: Sequence[Callable[[DeviceGroup], R]], exclusive: bool = False) -> list[R]:
        """Run each fn on some group, up to len(groups) at once (one at a time when exclusive);
        results in input order. An exception in fn propagates."""
        self.require_gpu()
        if exclusive or len(self.groups) == 1 or len(fns) <= 1:
            return [self.run(fn, exclusive) for fn in fns]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self.groups)) as pool:
            return list(pool.map(lambda fn: self.run(fn, False), fns))

    @staticmethod
    def run_command(argv: Sequence[str], group: DeviceGroup | None, timeout_s: float,
                    extra_env: Mapping[str, str] | None = None, cwd: str | None = None) -> ProcessOutcome:
        """Run a command in its own process group under a hard timeout, with a scrubbed environment in
        which only `group`'s GPUs are visible (none when group is None)."""
        env = group.env(extra_env) if group is not None else scrubbed_env(extra={**(extra_env or {}),
                                                                                 "CUDA_VISIBLE_DEVICES": ""})
        return run_group(argv, timeout_s, env=env, cwd=None if cwd is None else Path(cwd))
