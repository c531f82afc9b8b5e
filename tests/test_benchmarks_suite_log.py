"""The GPU suite's log at one world size (benchmarks/suite_log.py), gathered from per-file logs: every GPU test file
named with its summary, and the suite passed only when every file passed at one commit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import suite_log  # noqa: E402

FILES = [ROOT / "tests" / "test_workload_moe_gpu.py", ROOT / "tests" / "test_fastpath_gpu.py"]


def _log(folder: Path, name: str, commit: str, summary: str | None, date: str = "2026-11-27T07:37:01Z") -> None:
    end = f"{'=' * 10} {summary} {'=' * 10}\ngpu tests: exit 0\n" if summary else "gpu tests: exit 124\n"
    (folder / f"gpu_tests_{name}_w2.log").write_text(
        f"# device: NVIDIA H100 80GB HBM3, 580.159.04 x4; date: {date}\n# Build cuda\n# commit {commit}\n"
        f"tests/x.py::test_a PASSED\n{end}")


def test_part_names_follow_the_test_files():
    assert [suite_log.part_name(f) for f in FILES] == ["moe", "fastpath"]
    assert suite_log.part_name(Path("tests/test_harness_process_gpu.py")) == "harness_process"


@pytest.mark.parametrize("summary, ok", [("5 passed in 12.3s", True), ("9 passed, 6 skipped in 93.12s (0:01:33)", True),
                                         ("1 failed, 10 passed in 86.76s (0:01:26)", False),
                                         ("2 errors in 3.0s", False), ("6 skipped in 1.0s", False)])
def test_a_file_passes_with_passes_and_no_failure(summary, ok):
    assert suite_log.passed(summary) is ok


def test_the_suite_passes_only_with_every_file_passed_at_one_commit(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "no log: fastpath" in lines[-1]
    _log(tmp_path, "fastpath", "d1fb750", "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "commits: c405229, d1fb750" in lines[-1]
    _log(tmp_path, "fastpath", "c405229", "1 failed, 4 passed in 100.0s (0:01:40)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok and "failed: fastpath" in lines[-1]
    _log(tmp_path, "fastpath", "c405229", "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert ok and lines[-1] == "suite: all 2 files passed at commit c405229"
    assert "tests/test_workload_moe_gpu.py: 4 passed, 12 skipped in 75.51s (0:01:15)  [c405229; device:" in lines[1]


def test_todo_names_the_files_not_yet_passed_at_the_commit_the_longest_first(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    _log(tmp_path, "fastpath", "c405229", "1 failed, 4 passed in 100.0s (0:01:40)")
    assert [p for _f, p in suite_log.todo(2, tmp_path, "c405229", FILES)] == ["fastpath"]
    # by the last log's run time, so that lanes taking every n-th file get even shares
    assert [p for _f, p in suite_log.todo(2, tmp_path, "d1fb750", FILES)] == ["fastpath", "moe"]
    assert [p for _f, p in suite_log.todo(2, tmp_path, "", FILES)] == ["fastpath", "moe"]   # no commit: run all
    (tmp_path / "gpu_tests_fastpath_w2.log").unlink()                                        # no log: last
    assert [p for _f, p in suite_log.todo(2, tmp_path, "d1fb750", FILES)] == ["moe", "fastpath"]
    assert suite_log.seconds("9 passed, 6 skipped in 93.12s (0:01:33)") == 93.12 and suite_log.seconds(None) == 0.0


def _commit(repo: Path, path: str, text: str) -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True, capture_output=True)
    subprocess.run([*git, "commit", "-qm", path], check=True, capture_output=True)
    return subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def test_files_passed_at_commits_that_differ_only_outside_the_library_are_one_suite(tmp_path):
    repo, logs = tmp_path / "repo", tmp_path / "logs"
    repo.mkdir(), logs.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    first = _commit(repo, "src/cuco/x.py", "a = 1\n")
    test_fix = _commit(repo, "tests/test_x_gpu.py", "def test_x(): pass\n")
    library_change = _commit(repo, "csrc/x.cu", "int x;\n")
    _log(logs, "moe", first, "4 passed, 12 skipped in 75.51s (0:01:15)")
    _log(logs, "fastpath", test_fix, "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, logs, FILES, repo=repo)
    assert ok and lines[-1].startswith(f"suite: all 2 files passed at commits {', '.join(sorted([first, test_fix]))}")
    assert "no change to src/ or csrc/" in lines[-1] and "NVIDIA H100 80GB HBM3, 580.159.04 x4 (2 files)" in lines[-1]
    _log(logs, "fastpath", library_change, "5 passed in 122.95s (0:02:02)")
    lines, ok = suite_log.gather(2, logs, FILES, repo=repo)
    assert not ok and "(the library differs)" in lines[-1]
    _log(logs, "fastpath", "0000000", "5 passed in 122.95s (0:02:02)")   # a commit git does not know
    lines, ok = suite_log.gather(2, logs, FILES, repo=repo)
    assert not ok and "cannot tell whether the library differs" in lines[-1]
    # a copy of the tree with no history (the GPU machine's) cannot tell either, and says so
    _log(logs, "fastpath", test_fix, "5 passed in 122.95s (0:02:02)")
    bare = tmp_path / "bare"
    bare.mkdir()
    lines, ok = suite_log.gather(2, logs, FILES, repo=bare)
    assert not ok and "git here does not know every one of these commits" in lines[-1]


def test_a_failed_run_before_the_pass_is_named_in_the_suite_line(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    _log(tmp_path, "fastpath", "c405229", "5 passed in 27.45s")
    (tmp_path / "gpu_tests_fastpath_w2.log").rename(tmp_path / "passed.tmp")
    _log(tmp_path, "fastpath", "c405229", "1 failed, 4 passed in 58.21s")
    (tmp_path / "gpu_tests_fastpath_w2.log").rename(tmp_path / "gpu_tests_fastpath_w2.failed-1.log")
    _log(tmp_path, "fastpath", "0000000", "1 failed, 4 passed in 50.0s")   # another commit's failure: not this suite's
    (tmp_path / "gpu_tests_fastpath_w2.log").rename(tmp_path / "gpu_tests_fastpath_w2.failed-2.log")
    (tmp_path / "passed.tmp").rename(tmp_path / "gpu_tests_fastpath_w2.log")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert ok
    assert lines[-1] == ("suite: all 2 files passed at commit c405229; a run failed before passing: "
                         "fastpath (gpu_tests_fastpath_w2.failed-1.log)")
    assert any("an earlier run at c405229: 1 failed, 4 passed in 58.21s" in ln for ln in lines)
    assert not any("failed-2" in ln for ln in lines)


def test_a_run_cut_off_by_its_time_limit_is_named_as_cut_off_with_its_test_not_as_a_failure(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    (tmp_path / "gpu_tests_fastpath_w2.failed-1.log").write_text(
        "# device: NVIDIA H200, 580.159.04 x4; date: 2026-11-27T07:30:00Z\n# commit c405229\n"
        "tests/x.py::test_a PASSED [ 50%]\ntests/x.py::test_b[w4] gpu tests: exit 124\n")
    _log(tmp_path, "fastpath", "c405229", "5 passed in 27.45s")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert ok
    assert lines[-1] == ("suite: all 2 files passed at commit c405229; runs cut off by their part's time limit "
                         "before passing: fastpath (gpu_tests_fastpath_w2.failed-1.log)")
    assert any("cut off by the part's time limit (exit 124) in tests/x.py::test_b[w4]" in ln for ln in lines)
    # a run that ended with pytest's own failure is a failure, whatever its exit code
    (tmp_path / "gpu_tests_fastpath_w2.failed-1.log").write_text(
        "# device: NVIDIA H200, 580.159.04 x4; date: 2026-11-27T07:30:00Z\n# commit c405229\n"
        "==== 1 failed, 4 passed in 58.21s ====\ngpu tests: exit 124\n")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert lines[-1].endswith("a run failed before passing: fastpath (gpu_tests_fastpath_w2.failed-1.log)")


def test_an_earlier_failed_run_is_named_in_a_suite_that_did_not_pass_either(tmp_path):
    _log(tmp_path, "moe", "c405229", "1 failed, 3 passed in 75.51s (0:01:15)")
    (tmp_path / "gpu_tests_moe_w2.log").rename(tmp_path / "gpu_tests_moe_w2.failed-1.log")
    _log(tmp_path, "moe", "c405229", "1 failed, 3 passed in 70.0s")
    _log(tmp_path, "fastpath", "c405229", "5 passed in 27.45s")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok
    assert lines[-1] == ("suite: not passed (failed: moe); earlier failed runs: moe (gpu_tests_moe_w2.failed-1.log)")


def test_a_kept_run_dated_after_the_pass_is_named_as_a_later_run(tmp_path):
    # a later device call ran the file again at the same commit and was cut off: it is named, and not as a failure
    # that came before the pass
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    _log(tmp_path, "fastpath", "c405229", None, date="2026-11-27T18:16:23Z")
    (tmp_path / "gpu_tests_fastpath_w2.log").rename(tmp_path / "gpu_tests_fastpath_w2.failed-1.log")
    _log(tmp_path, "fastpath", "c405229", "5 passed in 27.45s", date="2026-11-27T18:06:21Z")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert ok
    assert lines[-1] == ("suite: all 2 files passed at commit c405229; later runs that did not pass: "
                         "fastpath (gpu_tests_fastpath_w2.failed-1.log)")
    assert any(ln.startswith("  a later run at c405229: cut off by the part's time limit (exit 124)") for ln in lines)


def test_todo_skips_a_file_passed_where_neither_the_library_nor_the_test_file_changed_since(tmp_path):
    repo, logs = tmp_path / "repo", tmp_path / "logs"
    repo.mkdir(), logs.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    files = [repo / "tests" / "test_workload_moe_gpu.py", repo / "tests" / "test_fastpath_gpu.py"]
    _commit(repo, "tests/test_fastpath_gpu.py", "def test_f(): pass\n")
    passed_at = _commit(repo, "tests/test_workload_moe_gpu.py", "def test_m(): pass\n")
    _log(logs, "moe", passed_at, "4 passed in 75.51s (0:01:15)")
    _log(logs, "fastpath", passed_at, "5 passed in 122.95s (0:02:02)")
    docs_only = _commit(repo, "benchmarks/x.py", "b = 1\n")
    assert suite_log.todo(2, logs, docs_only, files, repo=repo) == []
    test_changed = _commit(repo, "tests/test_fastpath_gpu.py", "def test_f(): assert True\n")
    assert [p for _f, p in suite_log.todo(2, logs, test_changed, files, repo=repo)] == ["fastpath"]
    library_changed = _commit(repo, "src/cuco/x.py", "a = 2\n")
    assert [p for _f, p in suite_log.todo(2, logs, library_changed, files, repo=repo)] == ["fastpath", "moe"]
    assert [p for _f, p in suite_log.todo(2, logs, "0000000", files, repo=repo)] == ["fastpath", "moe"]


def test_a_file_whose_own_run_was_cut_off_is_named_as_cut_off_not_as_missing(tmp_path):
    _log(tmp_path, "moe", "c405229", "4 passed, 12 skipped in 75.51s (0:01:15)")
    (tmp_path / "gpu_tests_fastpath_w2.log").write_text(
        "# device: NVIDIA H200, 580.159.04 x2; date: 2026-11-27T07:30:00Z\n# commit c405229\n"
        "tests/x.py::test_a PASSED [ 50%]\ntests/x.py::test_b gpu tests: exit 124\n")
    lines, ok = suite_log.gather(2, tmp_path, FILES)
    assert not ok
    assert any("fastpath_gpu.py: cut off by the part's time limit (exit 124) in tests/x.py::test_b" in ln
               for ln in lines)
    assert lines[-1] == "suite: not passed (cut off by the part's time limit: fastpath)"
