"""benchmarks/gpu_env.sh: every GPU-machine script of benchmarks/ runs under it (NVLink multicast off, the source
tree on PYTHONPATH, the compile cache), itself or through the scripts it runs; on a fresh machine it unpacks the
carried compile cache (.devcache/cache.tgz) at once, and leaves a cache that already holds compute libraries alone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
SOURCES_ENV = re.compile(r"^\s*(\.|source)\s+benchmarks/gpu_env\.sh\b", re.M)
RUNS_SCRIPT = re.compile(r"\bbash\s+\"?benchmarks/([\w.]+\.sh)")


def _under_env(script: Path, seen: frozenset[str] = frozenset()) -> bool:
    # comments and usage messages name scripts without running them
    text = "\n".join(line for line in script.read_text().splitlines() if not line.lstrip().startswith("#"))
    text = re.sub(r"\$\{\w+:\?usage:[^}]*\}", "", text)
    if SOURCES_ENV.search(text):
        return True
    called = [BENCH / name for name in RUNS_SCRIPT.findall(text) if name not in seen | {script.name}]
    return bool(called) and all(_under_env(c, seen | {script.name}) for c in called)


def test_every_script_runs_under_the_gpu_env():
    scripts = sorted(p for p in BENCH.glob("*.sh") if p.name != "gpu_env.sh")
    assert scripts
    assert [p.name for p in scripts if not _under_env(p)] == []


def test_the_env_keeps_nvlink_multicast_off():
    text = (BENCH / "gpu_env.sh").read_text()
    assert "NCCL_NVLS_ENABLE=0" in text and "NVSHMEM_DISABLE_NVLS=1" in text


def _source_env(cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "CUCO_CACHE_DIR": str(cache),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", f"source {BENCH / 'gpu_env.sh'}"], cwd=cwd, env=env,
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
