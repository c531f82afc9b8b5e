"""The package as a user meets it: a fast `import cuco` with no heavy imports, and README == CI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("litellm", "cupy", "nccl", "nvidia", "torch", "tree_sitter")
IMPORT_BUDGET_US = 500_000


def _python(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, env=env,
                          timeout=120, check=True)


def test_import_cuco_is_fast() -> None:
    """`python -X importtime -c "import cuco"`: the cumulative time of cuco itself, best of three runs."""
    best = None
    for _ in range(3):
        out = _python("import cuco", "-X", "importtime")
        line = next(ln for ln in out.stderr.splitlines() if re.search(r"\|\s*cuco$", ln))
        cumulative = int(line.split("|")[1])
        best = cumulative if best is None else min(best, cumulative)
    assert best < IMPORT_BUDGET_US, f"import cuco took {best / 1e6:.3f} s"


def test_import_cuco_and_its_core_types_load_no_heavy_module() -> None:
    out = _python("import json, sys, cuco\n"
                  "from cuco import Candidate, CandidateDB, DesignSpace, Directives, Workload\n"
                  "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(json.loads(out.stdout))
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_the_five_first_class_objects_import_from_cuco_without_heavy_modules() -> None:
    out = _python("import json, sys, cuco\n"
                  "from cuco import DesignSpace, FastPathAgent, Island, Evaluator, CandidateDB, run_workload\n"
                  "assert Evaluator.kind == 'measured' and Evaluator.__module__ == 'cuco.evaluate.cascade'\n"
                  "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(json.loads(out.stdout))
    # The fast path's parser (tree-sitter) is what FastPathAgent is made of; the GPU and LLM stacks stay unloaded.
    assert not loaded & {"litellm", "cupy", "torch", "nccl"}, loaded


def _fenced(text: str, heading: str) -> list[str]:
    """Command lines (comments stripped) of the first bash block under a README heading."""
    section = text.split(f"## {heading}\n", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [ln.split("#", 1)[0].strip() for ln in block.splitlines() if ln.split("#", 1)[0].strip()]


def test_ci_installs_and_tests_exactly_as_the_readme_says() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    install, main_job = _fenced(readme, "Set up")
    assert install.startswith("pip install -e ") and install in ci
    assert main_job == "cuco run gemm_allgather"
    assert _fenced(readme, "Test") == [ci[-1]] == ["python -m pytest -n 2"]


def test_cuco_dir_lists_the_lazily_loaded_names() -> None:
    out = _python("import json, cuco; print(json.dumps(dir(cuco)))")
    names = set(json.loads(out.stdout))
    assert {"DesignSpace", "FastPathAgent", "Evaluator", "CandidateDB", "workloads", "__version__"} <= names


def test_cuco_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    import cuco
    from cuco.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"cuco {cuco.__version__}"


def test_python_dash_m_cuco_is_the_cuco_command() -> None:
    import cuco

    out = subprocess.run([sys.executable, "-m", "cuco", "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"cuco {cuco.__version__}", out.stderr


def _build(tmp_path: Path) -> tuple[set[str], set[str], str]:
    """sdist then wheel from that sdist (as pip does from PyPI), from a clean copy of the tree; returns the
    sdist's names (without the top folder), the wheel's names and the wheel's METADATA."""
    pytest.importorskip("build")
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "runs", "*.egg-info", "__pycache__", ".pytest_cache", ".cuco-cache"))
    out = tmp_path / "dist"
    # --no-isolation: the test needs no network; setuptools comes from the environment under test
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(src)],
                   capture_output=True, text=True, timeout=300, check=True)
    (sdist,), (wheel,) = out.glob("*.tar.gz"), out.glob("*.whl")
    with tarfile.open(sdist) as tar:
        sdist_names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    with zipfile.ZipFile(wheel) as whl:
        wheel_names = set(whl.namelist())
        metadata = whl.read(next(n for n in wheel_names if n.endswith(".dist-info/METADATA"))).decode()
    return sdist_names, wheel_names, metadata


def test_sdist_and_wheel_hold_the_harness_sources_license_and_type_marker(tmp_path: Path) -> None:
    sdist, wheel, metadata = _build(tmp_path)
    csrc = {p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc").rglob("*") if p.is_file()
            and "__pycache__" not in p.parts}
    assert csrc and csrc <= sdist, sorted(csrc - sdist)[:5]
    assert {"LICENSE", "src/cuco/py.typed"} <= sdist
    assert {f"cuco/_{name}" for name in csrc} <= wheel  # the harness sources ship as cuco/_csrc
    assert "cuco/py.typed" in wheel
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel)
    import cuco

    assert f"Version: {cuco.__version__}\n" in metadata and "License-Expression: Apache-2.0\n" in metadata
    assert "Apache License\n                           Version 2.0" in (ROOT / "LICENSE").read_text()


def test_ci_installs_torch_as_the_readme_says_and_falls_back_to_pypi() -> None:
    readme = (ROOT / "README.md").read_text()
    said = re.search(r"`(pip install torch==[^`]+)`", " ".join(readme.split())).group(1)
    assert "--index-url https://download.pytorch.org/whl/cpu" in said  # PyPI's torch is the CUDA build
    line = next(ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.startswith("pip install torch"))
    first, fallback = (part.strip() for part in line.split("||"))
    assert first == said and fallback == said.split(" --index-url")[0]


def test_readme_says_nvcc_must_be_installed() -> None:
    setup = (ROOT / "README.md").read_text().split("## Set up\n", 1)[1].split("\n## ", 1)[0]
    assert "nvcc" in setup and "must be installed" in setup
