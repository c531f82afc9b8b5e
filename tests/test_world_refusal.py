"""A world size a workload's shapes cannot split is refused before anything is built or written, naming the
constraint and the nearest world sizes that can (and the flag that sets one)."""

from __future__ import annotations

import pytest

from cuco import workloads
from cuco.cli import main
from cuco.workload import ShapeError

CASES = [  # (workload, world, constraint words, nearest)
    ("moe", 3, "multiple of the world size 3", "2 or 4 (--world 2)"),
    ("kv_transfer", 3, "is odd", "2 or 4 (--world 2)"),
    ("gemm_allgather", 3, "divisible by the world size 3", "2 or 4 (--world 2)"),
]


@pytest.mark.parametrize("name,world,constraint,nearest", CASES, ids=[c[0] for c in CASES])
def test_refusal_names_the_constraint_and_the_nearest_world_sizes(name, world, constraint, nearest):
    text = workloads.get(name).world_refusal(world)
    assert text is not None and constraint in text and f"nearest world size that can: {nearest}" in text, text


@pytest.mark.parametrize("name", [c[0] for c in CASES])
def test_every_workload_runs_at_one_two_and_four(name):
    wl = workloads.get(name)
    assert [wl.world_refusal(w) for w in (1, 2, 4)] == [None, None, None]


def test_a_shape_the_world_cannot_split_names_the_nearest_world_for_that_shape():
    wl = workloads.get("moe")
    text = wl.world_refusal(8, wl.parse_shape("verify-top1"))   # E = 4 experts
    assert text is not None and "E=4 experts" in text and "nearest world size that can: 4 (--world 4)" in text, text


def test_the_evaluator_refuses_before_building():
    from cuco.evaluate.cascade import Evaluator

    with pytest.raises(ShapeError, match=r"--world 2"):
        Evaluator(workloads.get("moe"), world=3)


def test_cuco_run_refuses_world_three_with_a_nonzero_exit_and_no_run_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU group: the refusal must come from the shapes
    run_dir = tmp_path / "run"
    code = main(["run", "moe", "--world", "3", "--run-dir", str(run_dir), "--evals", "2"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "moe cannot run at world size 3" in err and "(--world 2)" in err, err
    assert "verify_shape" not in err
    assert not run_dir.exists()
