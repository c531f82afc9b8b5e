"""benchmarks/gpu_env.sh, sourced by every GPU-machine script: on a fresh machine it unpacks the carried compile
cache (.devcache/cache.tgz) at once, and leaves a cache that already holds compute libraries alone."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _source_env(cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUCO_CACHE_DIR": str(cache),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", f"source {ROOT / 'benchmarks' / 'gpu_env.sh'}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=True)


def _carried(tree: Path) -> None:
    lib = tree / "staging" / "compute" / "k1" / "libx_compute.so"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF")
    (tree / ".devcache").mkdir()
    with tarfile.open(tree / ".devcache" / "cache.tgz", "w:gz") as tar:
        tar.add(tree / "staging" / "compute", arcname="compute")


def test_a_fresh_machine_gets_the_carried_compute_libraries(tmp_path):
    _carried(tmp_path)
    cache = tmp_path / "cache"
    res = _source_env(tmp_path, cache)
    assert (cache / "compute" / "k1" / "libx_compute.so").read_bytes() == b"\x7fELF"
    assert "unpacked" in res.stderr


def test_a_cache_that_holds_compute_libraries_is_left_alone(tmp_path):
    _carried(tmp_path)
    cache = tmp_path / "cache"
    (cache / "compute" / "k0").mkdir(parents=True)
    res = _source_env(tmp_path, cache)
    assert not (cache / "compute" / "k1").exists() and "unpacked" not in res.stderr
