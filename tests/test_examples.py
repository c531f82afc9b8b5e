"""The Python examples run as users would run them (CPU: the labelled cost model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_search_and_report_runs_offline_and_writes_its_report(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, str(EXAMPLES / "search_and_report.py"), str(run), "--evals", "10",
                           "--modelled"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "evaluated 10 candidates (modelled)" in proc.stdout, proc.stdout
    assert "best: " in proc.stdout and (run / "report.html").is_file()
    assert "modelled (a CPU cost model" in (run / "report.html").read_text()


def test_the_torch_module_example_documents_its_use():
    """The torch-module example needs a GPU and a run to do its work; here: it parses and says how to use it."""
    import ast

    src = (EXAMPLES / "torch_module_export.py").read_text()
    tree = ast.parse(src)
    assert "torchrun --nproc-per-node 2 examples/torch_module_export.py runs/ag" in ast.get_docstring(tree)
    assert "--search" in ast.get_docstring(tree)
    assert any(isinstance(n, ast.ClassDef) and n.name == "GatherLinear" for n in tree.body)


def test_the_torch_module_example_on_a_machine_without_gpu_says_it_needs_one(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the example would run")
    proc = subprocess.run([sys.executable, str(EXAMPLES / "torch_module_export.py"), str(tmp_path / "run")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "needs an NVIDIA GPU" in proc.stderr and "Traceback" not in proc.stderr
