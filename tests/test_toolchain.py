"""Toolchain discovery on bad machines: no nvcc, no NCCL, an NCCL too old for the device API, bad overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

import cuco.toolchain as tcmod
from cuco.cli import main
from cuco.toolchain import MIN_NCCL, ToolchainError, find_nccl, find_nvcc

NEEDED = ".".join(map(str, MIN_NCCL))


def fake_nccl(root: Path, version: tuple[int, int, int], device_api: bool) -> tuple[Path, Path]:
    """An NCCL install layout (include/, lib/) with the given version in nccl.h."""
    include, lib = root / "include", root / "lib"
    include.mkdir(parents=True)
    lib.mkdir(parents=True)
    major, minor, patch = version
    (include / "nccl.h").write_text(f"#define NCCL_MAJOR {major}\n#define NCCL_MINOR {minor}\n"
                                    f"#define NCCL_PATCH {patch}\n")
    if device_api:
        (include / "nccl_device.h").write_text("// device API\n")
    (lib / "libnccl.so.2").write_bytes(b"\x7fELF")
    return include, lib


@pytest.fixture
def bare_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No nvcc anywhere, no NCCL wheel, no system NCCL, no overrides."""
    for var in ("CUCO_NVCC", "CUDA_HOME", "NCCL_HOME"):
        monkeypatch.delenv(var, raising=False)
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(tcmod, "NVCC_FALLBACKS", ())
    monkeypatch.setattr(tcmod, "_site_dirs", lambda: [])
    monkeypatch.setattr(tcmod, "SYSTEM_NCCL", (tmp_path / "no-include", tmp_path / "no-lib"))
    return tmp_path


def test_no_nvcc_says_how_to_install_it(bare_machine: Path) -> None:
    with pytest.raises(ToolchainError, match="nvcc not found: install the CUDA toolkit") as info:
        find_nvcc()
    assert "CUDA_HOME" in str(info.value) and "CUCO_NVCC" in str(info.value)
    from cuco.evaluate.compile import Compiler  # L1 itself refuses with the same message

    with pytest.raises(ToolchainError, match="nvcc not found"):
        Compiler(cache_dir=bare_machine / "cache")


def test_missing_cuco_nvcc_is_named_not_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CUCO_NVCC", str(tmp_path / "nowhere" / "nvcc"))
    with pytest.raises(ToolchainError, match=r"CUCO_NVCC=.*nowhere/nvcc does not exist"):
        find_nvcc()


def test_cuda_home_and_path_are_used(bare_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = bare_machine / "cuda"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "nvcc").write_text("#!/bin/sh\n")
    monkeypatch.setenv("CUDA_HOME", str(home))
    assert find_nvcc() == home / "bin" / "nvcc"


def test_no_nccl_says_which_version_is_needed_and_how_to_install(bare_machine: Path) -> None:
    with pytest.raises(ToolchainError, match="NCCL not found") as info:
        find_nccl()
    assert NEEDED in str(info.value) and "pip install 'nvidia-nccl-cu13" in str(info.value)


def test_nccl_without_device_api_names_found_and_needed(bare_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tcmod, "SYSTEM_NCCL", fake_nccl(bare_machine / "sys", (2, 18, 3), device_api=False))
    with pytest.raises(ToolchainError) as info:
        find_nccl()
    msg = str(info.value)
    assert "NCCL 2.18.3" in msg and "too old" in msg and f">= {NEEDED}" in msg and "pip install" in msg


def test_nccl_home_wins_and_a_bad_one_is_an_error(bare_machine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tcmod, "SYSTEM_NCCL", fake_nccl(bare_machine / "sys", (2, 28, 3), device_api=True))
    assert find_nccl().version == "2.28.3" and find_nccl().origin == "system"
    fake_nccl(bare_machine / "home", (2, 28, 9), device_api=True)
    monkeypatch.setenv("NCCL_HOME", str(bare_machine / "home"))
    lib = find_nccl()
    assert (lib.version, lib.origin, lib.link_name) == ("2.28.9", "env", "libnccl.so.2")
    monkeypatch.setenv("NCCL_HOME", str(bare_machine / "typo"))
    with pytest.raises(ToolchainError, match=r"NCCL_HOME=.*typo has no include/nccl.h.*unset it"):
        find_nccl()


def test_cuco_run_without_nvcc_is_a_message_not_a_traceback(bare_machine: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = bare_machine / "run"
    assert main(["run", "gemm_allgather", "--run-dir", str(run_dir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("cuco: error: nvcc not found") and "Traceback" not in err
    assert not run_dir.exists()  # nothing written before the toolchain was known to be there
