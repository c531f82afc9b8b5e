"""Every GPU-machine script of benchmarks/ runs under benchmarks/gpu_env.sh (NVLink multicast off, the source tree on
PYTHONPATH, the compile cache), itself or through the scripts it runs."""

from __future__ import annotations

import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
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
