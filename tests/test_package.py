"""The package as a user meets it: a fast `import cuco` with no heavy imports, and README == CI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

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
    assert _fenced(readme, "Test") == [ci[-1]] == ["python -m pytest"]
