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


#: World sizes the `world` fixture is parametrized over; `--world` picks some, GPUs present bound the rest.
WORLDS = (1, 2, 4, 8)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--world", default=None, metavar="W[,W...]",
                     help="world sizes of the multi-GPU tests (tests taking the `world` fixture), e.g. 2 or 2,4; "
                          "default: every W in 1, 2, 4, 8 that this machine has GPUs for")


def selected_worlds(config: pytest.Config) -> tuple[int, ...] | None:
    """The world sizes `--world` names (None: not given); a clear usage error for anything else."""
    text = config.getoption("--world")
    if text is None:
        return None
    try:
        worlds = tuple(int(w) for w in str(text).split(",") if w.strip())
    except ValueError:
        raise pytest.UsageError(f"--world takes world sizes such as 2 or 2,4; got {text!r}") from None
    bad = [w for w in worlds if w not in WORLDS]
    if not worlds or bad:
        raise pytest.UsageError(f"--world takes sizes among {', '.join(map(str, WORLDS))}; got {text!r}")
    return worlds


def world_skip_reason(world: int, selected: tuple[int, ...] | None, gpus: int) -> str | None:
    """Why a test at `world` does not run here (None: it runs)."""
    if selected is not None and world not in selected:
        return f"world {world} not selected (--world {','.join(map(str, selected))})"
    if gpus < world:
        return f"world {world} needs {world} GPUs, found {gpus}"
    return None


def pytest_configure(config: pytest.Config) -> None:
    selected_worlds(config)  # a bad --world is a usage error before collection


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "world" not in metafunc.fixturenames:
        return
    for mark in metafunc.definition.iter_markers("parametrize"):  # a test that lists its own world sizes keeps them
        names = mark.args[0] if mark.args else mark.kwargs.get("argnames", "")
        if "world" in (names.replace(" ", "").split(",") if isinstance(names, str) else names):
            return
    selected = selected_worlds(metafunc.config)
    params = []
    for w in WORLDS:
        reason = world_skip_reason(w, selected, gpu_count())
        marks = [pytest.mark.skip(reason=reason)] if reason else []
        params.append(pytest.param(w, id=f"w{w}", marks=marks))
    metafunc.parametrize("world", params)


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
