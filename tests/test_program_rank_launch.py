"""A program that torchrun would start: recognised from its text, and started W times with torchrun's variables."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cuco.process import run_group
from cuco.program import rank_launch
from cuco.program.evaluator import ProgramEvaluator
from cuco.program.launcher import RANK_LAUNCH, LocalLauncher
from cuco.program.source import HostProgram, ProgramError, started_by_launcher

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
#: A copy that records its environment in the folder its first argument names.
RECORD = ("import json, os, sys; keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', "
          "'MASTER_PORT'); open(os.path.join(sys.argv[1], 'rank' + os.environ['RANK']), 'w')"
          ".write(json.dumps({k: os.environ[k] for k in keys}))")


def _launch(tmp_path: Path, world: int, code: str, timeout_s: float = 60.0):
    argv = [sys.executable, "-I", "-S", str(RANK_LAUNCH), "--world", str(world), "--grace-s", "1", "--",
            sys.executable, "-c", code, str(tmp_path)]
    return run_group(argv, timeout_s)


@pytest.mark.parametrize("world", [1, 2, 4])
def test_every_copy_gets_its_rank_and_all_share_one_fresh_port(tmp_path: Path, world: int) -> None:
    out = _launch(tmp_path, world, RECORD)
    assert out.returncode == 0, out.stderr
    seen = [json.loads((tmp_path / f"rank{r}").read_text()) for r in range(world)]
    assert [(s["RANK"], s["LOCAL_RANK"]) for s in seen] == [(str(r), str(r)) for r in range(world)]
    assert {(s["WORLD_SIZE"], s["LOCAL_WORLD_SIZE"], s["MASTER_ADDR"], s["MASTER_PORT"]) for s in seen} == {
        (str(world), str(world), "127.0.0.1", seen[0]["MASTER_PORT"])}
    again = _launch(tmp_path, 1, RECORD)
    assert again.returncode == 0
    assert json.loads((tmp_path / "rank0").read_text())["MASTER_PORT"] != seen[0]["MASTER_PORT"] or world == 1


def test_a_failing_copy_ends_the_others_and_its_status_and_rank_are_told(tmp_path: Path) -> None:
    # rank 1 fails at once; rank 0 would sleep a minute: it is killed after the grace
    code = "import os, sys, time; r = int(os.environ['RANK']); sys.exit(3) if r == 1 else time.sleep(60)"
    out = _launch(tmp_path, 2, code, timeout_s=30)
    assert not out.timed_out and out.seconds < 20
    assert out.returncode == 3 and "rank 1 of 2 exited with status 3" in out.stderr


def test_exit_codes_of_signals_are_those_of_a_shell() -> None:
    assert rank_launch.exit_code(-9) == 137 and rank_launch.exit_code(2) == 2 and rank_launch.exit_code(0) == 0


def test_a_program_started_by_torchrun_is_told_from_ones_that_start_their_own_ranks(tmp_path: Path) -> None:
    torchrun = CORPUS / "torchrun_allreduce.cu"
    assert started_by_launcher(torchrun.read_text(), torchrun)
    # it reads RANK through host_util.h too, but that header forks its ranks
    forks = CORPUS / "ar_residual_rmsnorm.cu"
    assert not started_by_launcher(forks.read_text(), forks)
    mpi = 'int main() { MPI_Init(nullptr, nullptr); int r = atoi(getenv("RANK")); }'
    assert not started_by_launcher(mpi, tmp_path / "mpi.cu")
    no_env = "int main() { int r = 0; }"
    assert not started_by_launcher(no_env, tmp_path / "plain.cu")
    local_rank = 'int main() { int r = atoi(getenv( "LOCAL_RANK" )); }'
    assert started_by_launcher(local_rank, tmp_path / "lr.cu")


def test_only_the_torchrun_program_of_the_corpus_gets_its_copies_started_by_cuco() -> None:
    started = {p.stem for p in sorted(CORPUS.glob("*.cu"))
               if started_by_launcher(p.read_text(), p)}
    assert started == {"torchrun_allreduce"}
    program = HostProgram.load(CORPUS / "torchrun_allreduce.cu")
    assert program.started_by_launcher
    started = ProgramEvaluator(program, world=2)
    assert started.launcher == LocalLauncher(ranks=2) and started.scale.endswith("2 copies started as torchrun would")
    forks = ProgramEvaluator(HostProgram.load(CORPUS / "ar_residual_rmsnorm.cu"), world=2)
    assert forks.launcher == LocalLauncher() and forks.scale == "shape program"


def test_a_program_that_needs_mpirun_is_refused_naming_the_change(tmp_path: Path) -> None:
    text = (CORPUS / "torchrun_allreduce.cu").read_text().replace(
        "int main() {\n", "int main() {\n  MPI_Init(nullptr, nullptr);\n", 1)
    prog = tmp_path / "mpi_allreduce.cu"
    prog.write_text(text)
    (tmp_path / "host_util.h").write_text((CORPUS / "host_util.h").read_text())
    with pytest.raises(ProgramError, match="calls MPI_Init, and cuco has no mpirun.*Read the rank from RANK"):
        HostProgram.load(prog)


def test_the_launchers_command_starts_the_copies_only_when_asked() -> None:
    binary = Path("/opt/prog")
    assert LocalLauncher().argv(binary) == ["/opt/prog"]
    assert LocalLauncher(ranks=4).argv(binary) == [sys.executable, "-I", "-S", str(RANK_LAUNCH), "--world", "4", "--",
                                                   "/opt/prog"]
    with pytest.raises(ValueError):
        LocalLauncher(ranks=0)


def test_the_launcher_can_be_named_where_the_text_misleads_and_only_for_a_process_per_gpu_program() -> None:
    torchrun, forks = CORPUS / "torchrun_allreduce.cu", CORPUS / "ar_residual_rmsnorm.cu"
    assert not HostProgram.load(torchrun, launcher="self").started_by_launcher
    assert HostProgram.load(forks, launcher="torchrun").started_by_launcher
    assert not HostProgram.load(forks, launcher="auto").started_by_launcher
    with pytest.raises(ProgramError, match="this one is single-process .*drop --launcher"):
        HostProgram.load(CORPUS / "ag_tp_matvec.cu", launcher="torchrun")
    with pytest.raises(ProgramError, match="--launcher must be one of auto, torchrun, self"):
        HostProgram.load(torchrun, launcher="mpirun")


def test_the_run_options_and_the_command_line_take_the_launcher_and_refuse_it_for_a_workload(capsys) -> None:
    from cuco import cli
    from cuco.errors import CucoError
    from cuco.program.source import LAUNCHERS
    from cuco.run import resolve
    from cuco.run_options import RunOptions, check_options

    assert cli.LAUNCHERS == LAUNCHERS
    with pytest.raises(CucoError, match="--launcher torchrun applies to a host program"):
        resolve("gemm_allgather", launcher="torchrun")
    with pytest.raises(CucoError, match="--launcher must be one of"):
        check_options(RunOptions(workload="x.cu", launcher="srun"))
    assert resolve(str(CORPUS / "torchrun_allreduce.cu"), launcher="self").program.started_by_launcher is False
    with pytest.raises(SystemExit) as exit_:
        cli.main(["run", str(CORPUS / "torchrun_allreduce.cu"), "--launcher", "mpirun"])
    assert exit_.value.code == 2 and "invalid choice: 'mpirun'" in capsys.readouterr().err
