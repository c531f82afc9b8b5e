"""Test-suite wiring: GPU tests run only where NVIDIA GPUs are present, and say so when skipped."""

from __future__ import annotations

import functools
import os
import pwd
import shutil
import subprocess

import pytest

# litellm downloads a price list at import unless told to use its bundled copy; tests never reach a network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@functools.lru_cache(maxsize=1)
def gpu_count() -> int:
    """Number of NVIDIA GPUs visible here (0 without a driver); no CUDA library is imported."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    n = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        n = min(n, len([v for v in visible.split(",") if v.strip()]))
    return n


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    n = gpu_count()
    if n > 0:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU: none found here (run `pytest -m gpu` on a GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def gpus() -> int:
    """GPU count, for tests that need a minimum (e.g. 2 for world size 2)."""
    return gpu_count()


@pytest.fixture
def as_user() -> list[str]:
    """[uid, gid] for a child that must not be root (root ignores permission bits): 'nobody' when we are root,
    ["-1", "-1"] (stay as we are) otherwise."""
    if os.geteuid() != 0:
        return ["-1", "-1"]
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no 'nobody' user to drop privileges to")
    return [str(nobody.pw_uid), str(nobody.pw_gid)]


def toolchain_or_skip():
    """This machine's CUDA toolchain (nvcc and NCCL, no cuBLASLt needed), or the calling test is skipped."""
    from cuco.toolchain import Toolchain, ToolchainError

    try:
        return Toolchain.detect(need_cublas=False)
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain here: {exc}")
