"""The example notebooks execute top to bottom on CPU (nbclient, a real Jupyter kernel)."""

from __future__ import annotations

from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "quickstart.ipynb"


def test_quickstart_notebook_runs_and_shows_its_results(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if o.get("output_type") == "stream")
    assert "legal points" in text and "16 candidates, modelled" in text and "best:" in text
    assert "fused-no-thread-issuer" in text  # the illegal point's reason
    html = [o for c in nb.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert html and "<polyline" in html[0]["data"]["text/html"]  # the fitness chart


def test_measured_run_notebook_reads_the_committed_gpu_run_and_plots_it():
    path = NOTEBOOK.parent / "measured_run.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                     if o.get("output_type") == "stream")
    assert "8 candidates" in text and "'passed': 4" in text and "best: lsa/deferred/world/cta/whole" in text
    html = [o["data"]["text/html"] for c in nb.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {})]
    assert any("host " in h and "<rect" in h for h in html)   # the bars against the host program's time
    assert any("<polyline" in h for h in html)                 # the fitness chart
