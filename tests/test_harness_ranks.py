"""The process-per-rank launcher (cuco/harness/ranks.py): per-rank command lines, which rank's result stands for
the group, and a real run of the harness in process mode that fails at start-up (no GPU here, or a bad device):
one clear result, every rank process gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cuco.harness import HarnessRequest
from cuco.harness.ranks import choose_result, rank_argv

RANKS = Path(__file__).resolve().parent.parent / "src" / "cuco" / "harness" / "ranks.py"


def test_each_rank_gets_its_own_result_file_and_the_rendezvous(tmp_path):
    argv = ["cuco-harness", "--workload", "w.so", "--world", "2", "--out", "/x/result.json"]
    a = rank_argv(argv, 1, tmp_path)
    assert a[a.index("--out") + 1] == str(tmp_path / "rank1.json")
    assert a[-4:] == ["--rank", "1", "--rendezvous", str(tmp_path)]
    assert argv[argv.index("--out") + 1] == "/x/result.json"  # the caller's list is untouched
    with pytest.raises(ValueError, match="--out"):
        rank_argv(["cuco-harness"], 0, tmp_path)


def _res(status: str | None) -> dict | None:
    return None if status is None else {"status": status}


def test_rank_zero_stands_for_the_group_when_it_finished():
    assert choose_result([_res("ok"), _res("ok")], None) == 0
    # rank 1 hung (its watchdog wrote "hang"); rank 0 saw the lost peer and wrote "crash": rank 0's failure
    # names rank 1, and it holds the statuses of the candidates before.
    assert choose_result([_res("crash"), _res("hang")], 1) == 0


def test_the_first_failing_rank_stands_when_rank_zero_never_finished():
    assert choose_result([_res("running"), _res("error")], 1) == 1
    assert choose_result([None, _res("hang")], 1) == 1
    assert choose_result([_res("running"), _res("running")], 1) == 0  # a snapshot: the runner completes it
    assert choose_result([None, None], 0) is None


@given(st.lists(st.sampled_from([None, "running", "ok", "error", "crash", "hang"]), min_size=1, max_size=8),
       st.data())
def test_the_chosen_result_exists_and_prefers_finished_ones(statuses, data):
    first = data.draw(st.one_of(st.none(), st.integers(0, len(statuses) - 1)))
    results = [_res(s) for s in statuses]
    k = choose_result(results, first)
    if all(r is None for r in results):
        assert k is None
        return
    assert k is not None and results[k] is not None
    finished = [s not in (None, "running") for s in statuses]
    if any(finished):
        assert finished[k]


def test_process_mode_command_wraps_the_harness_in_the_rank_launcher(tmp_path):
    req = HarnessRequest(tmp_path / "w.so", [tmp_path / "c.so"], (64,), world=2, mode="process")
    cmd = req.command(Path("/bin/cuco-harness"), tmp_path / "out.json")
    assert cmd[0] == sys.executable and cmd[1].endswith("ranks.py")
    assert cmd[cmd.index("--") + 1] == "/bin/cuco-harness"
    thread = HarnessRequest(tmp_path / "w.so", [tmp_path / "c.so"], (64,), world=2)
    assert thread.command(Path("/bin/cuco-harness"), tmp_path / "o.json")[0] == "/bin/cuco-harness"
    with pytest.raises(ValueError):
        HarnessRequest(tmp_path / "w.so", [tmp_path / "c.so"], (64,), mode="mpi")


def test_ranks_that_fail_at_start_give_one_result_and_leave_no_process(tmp_path):
    """Real harness, process mode, a device that does not exist: every rank ends with a clear error."""
    from cuco.harness.build import harness_binary
    from cuco.toolchain import ToolchainError

    try:
        binary = harness_binary()
    except ToolchainError as exc:
        pytest.skip(f"no CUDA toolchain: {exc}")
    out = tmp_path / "result.json"
    argv = [str(binary), "--workload", str(tmp_path / "missing.so"), "--candidate", str(tmp_path / "c.so"),
            "--dims", "64", "--world", "2", "--devices", "90,91", "--timeout-s", "20", "--out", str(out)]
    proc = subprocess.run([sys.executable, str(RANKS), "--world", "2", "--grace-s", "5", "--", *argv],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["status"] == "error"
    assert "device" in res["message"] or "CUDA" in res["message"] or "cuda" in res["message"], res["message"]
    assert not list(tmp_path.glob(".ranks-*")), "the rendezvous folder is removed"


def test_the_launcher_refuses_a_command_without_separator():
    proc = subprocess.run([sys.executable, str(RANKS), "--world", "2"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage" in proc.stderr


# A stand-in for cuco-harness (a real process the launcher starts, per rank): what each rank does is in the
# script, so a rank can die, hang or write any result.
_STAND_IN = """
import json, sys, time
argv = sys.argv[1:]
rank, out = int(argv[argv.index("--rank") + 1]), argv[argv.index("--out") + 1]
actions = json.loads(argv[argv.index("--actions") + 1])
kind, value = actions[rank]
if kind == "sleep":
    time.sleep(value)
elif kind == "write":
    open(out, "w").write(value)
elif kind == "exit":
    sys.exit(value)
"""


def _launch(tmp_path: Path, actions: list, grace_s: float = 1.0) -> tuple[subprocess.CompletedProcess, float]:
    import time

    script = tmp_path / "stand_in.py"
    script.write_text(_STAND_IN)
    argv = [sys.executable, str(script), "--actions", json.dumps(actions), "--out", str(tmp_path / "result.json")]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, str(RANKS), "--world", str(len(actions)), "--grace-s", str(grace_s),
                           "--", *argv], capture_output=True, text=True, timeout=120)
    return proc, time.monotonic() - start


def test_a_rank_that_dies_while_rank_zero_runs_ends_the_group_after_the_grace(tmp_path):
    proc, seconds = _launch(tmp_path, [["sleep", 60], ["exit", 3]], grace_s=2.0)
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert seconds < 20, f"the launcher waited {seconds:.0f} s: it did not notice rank 1's death"
    assert seconds >= 2.0, "rank 0 was killed before its grace to notice the lost peer"
    assert not list(tmp_path.glob(".ranks-*"))


@pytest.mark.parametrize("written", ["[]", "3", '"ok"', '{"status": "ok"'])
def test_a_rank_result_that_is_not_a_result_does_not_crash_the_launcher(tmp_path, written):
    proc, _ = _launch(tmp_path, [["write", written], ["exit", 0]])
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0
    assert not (tmp_path / "result.json").exists()   # no result: the runner reports the rank's exit instead
    assert not list(tmp_path.glob(".ranks-*")), "the rendezvous folder is removed"
