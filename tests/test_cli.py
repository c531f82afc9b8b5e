"""`cuco run` on bad input: a one-line message naming the problem and the fix, exit status 2, no traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import cuco.run
from cuco.cli import main

ROOT = Path(__file__).resolve().parents[1]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("args, expect", [
    (["nope"], "unknown workload 'nope'; available: "),
    (["gemm_allgather", "--evals", "0"], "--evals must be >= 1, got 0"),
    (["gemm_allgather", "--world", "0"], "--world must be >= 1"),
    (["gemm_allgather", "--world", "-3"], "--world must be >= 1"),
    (["gemm_allgather", "--budget-usd", "-1"], "--budget-usd must be >= 0"),
    (["gemm_allgather", "--budget-usd", "nan"], "--budget-usd must be >= 0"),
    (["gemm_allgather", "--shape", "abc"], "cannot read shape 'abc'"),
    (["gemm_allgather", "--shape", "1,2"], "takes 3 positive sizes"),
    (["gemm_allgather", "--resume"], "--resume needs --run-dir"),
    (["gemm_allgather", "--try", "lsa/fused"], "--try lsa/fused: a label has five parts"),
    (["gemm_allgather", "--try", "lsa/deferred/world/cta/1MiB"],
     "--try lsa/deferred/world/cta/1MiB is not a legal point of this run's space: [deferred-whole-buffer]"),
])
def test_bad_options_are_refused_before_any_work(args: list[str], expect: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, err = run(["run", *args, "--quiet"], capsys)
    assert code == 2 and err.startswith("cuco: error: ") and expect in err, err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_bad_run_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, err = run(["run", "gemm_allgather", "--run-dir", str(afile)], capsys)
    assert code == 2 and "is a file, not a directory; choose another --run-dir" in err
    code, err = run(["run", "gemm_allgather", "--run-dir", str(afile / "sub")], capsys)
    assert code == 2 and "is a file" in err
    code, err = run(["run", "gemm_allgather", "--resume", "--run-dir", str(tmp_path / "none")], capsys)
    assert code == 2 and "holds no run to resume; drop --resume" in err
    used = tmp_path / "used"
    used.mkdir()
    (used / "manifest.json").write_text("{}")
    code, err = run(["run", "gemm_allgather", "--run-dir", str(used)], capsys)
    assert code == 2 and "manifest.json cannot be read" in err
    assert afile.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile", "used"]


@pytest.mark.parametrize("content, what", [(b"", "is empty (0 bytes)"), (b"not sqlite " * 200, "is unreadable")])
@pytest.mark.parametrize("resume", [False, True])
def test_a_broken_database_is_named_for_start_and_resume_alike_and_stays_untouched(
        content: bytes, what: str, resume: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "candidates.db").write_bytes(content)
    code, err = run(["run", "gemm_allgather", "--quiet", "--run-dir", str(tmp_path), *(["--resume"] if resume else [])],
                    capsys)
    assert code == 2 and what in err and "not a cuco candidate database" in err and "rm " in err, err
    assert (tmp_path / "candidates.db").read_bytes() == content
    assert [p.name for p in tmp_path.iterdir()] == ["candidates.db"]


def test_space_with_world_zero_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(["space", "gemm_allgather", "--world", "0"], capsys)
    assert code == 2 and err.strip() == "cuco: error: --world must be >= 1 (ranks, one GPU each), got 0"


def test_space_takes_a_host_program_as_run_does_and_lists_the_points_run_try_accepts(
        capsys: pytest.CaptureFixture[str]) -> None:
    prog = Path(__file__).parent / "fixtures" / "host_programs" / "ar_residual_rmsnorm.cu"
    code = main(["space", str(prog), "--world", "2", "--list"])
    out = capsys.readouterr().out
    assert code == 0
    labels = [ln for ln in out.splitlines() if ln.startswith("lsa/")]
    assert "lsa/deferred/world/cta/whole/allreduce=push/comm_ctas=32" in labels and len(labels) == 40
    code, err = run(["space", "no_such_workload"], capsys)
    assert code == 2 and "or pass a workload folder or a host CUDA+NCCL program (.cu)" in err


_AS_USER = """
import os, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
from cuco.cli import build_parser, main
import cuco.run, cuco.search.api, cuco.evaluate.cascade, cuco.workloads.gemm_allgather
build_parser().parse_args(["workloads"])  # loads what argparse needs while the files are still readable
if uid >= 0:  # drop root for good: root ignores permission bits
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
sys.exit(main(sys.argv[3:]))
"""


def test_read_only_run_directory(tmp_path: Path, as_user: list[str]) -> None:
    base = Path(tempfile.mkdtemp(prefix="cuco-cli-ro-", dir="/tmp"))
    try:
        ro = base / "ro"
        ro.mkdir()
        base.chmod(0o755)
        ro.chmod(0o555)
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        out = subprocess.run([sys.executable, "-c", _AS_USER, *as_user, "run", "gemm_allgather", "--quiet",
                              "--run-dir", str(ro / "run")], capture_output=True, text=True, env=env, timeout=120,
                             cwd="/")
        assert out.returncode == 2, out.stderr
        assert "not writable" in out.stderr and "--run-dir" in out.stderr and "Traceback" not in out.stderr
        assert list(ro.iterdir()) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_operating_system_errors_are_reported_without_traceback(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    def fail(*_args: object, **_kw: object) -> None:
        raise PermissionError(13, "Permission denied", "/somewhere/candidates.db")

    monkeypatch.setattr(cuco.run, "run_workload", fail)
    code, err = run(["run", "gemm_allgather"], capsys)
    assert code == 2
    assert err.strip() == ("cuco: error: Permission denied: /somewhere/candidates.db; check that path, its "
                           "permissions and free space")


def test_the_installed_command_prints_one_line(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "cuco.cli", "run", "no_such_workload"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cuco: error: unknown workload 'no_such_workload'; available: ")
    assert "gemm_allgather" in lines[0]


def test_workloads_lists_each_with_its_first_sentence_whole(capsys: pytest.CaptureFixture[str]) -> None:
    from cuco import workloads

    assert main(["workloads"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split(":", 1)[0] for ln in lines] == workloads.available()
    for line in lines:
        name, said = line.split(": ", 1)
        text = " ".join(workloads.get(name).description.split())
        assert said.endswith(".") and text.startswith(said)  # a sentence, cut at its end
        assert text == said or text[len(said)] == " " and text[len(said) + 1].isupper()
