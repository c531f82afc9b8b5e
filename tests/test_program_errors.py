"""A program that does not compile is answered with the compiler's errors at the user's file and line, before
anything else is built or run; errors in a rewrite are moved back onto the user's lines. Real nvcc compiles, each
failing in the front end (about a second)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cuco.design_space import Topology
from cuco.program import diagnostics
from cuco.program.source import HostProgram, ProgramError

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not os.environ.get("CUCO_NVCC"),
                                reason="needs nvcc")


def _broken(tmp_path: Path, old: str, new: str, name: str = "prog.cu") -> tuple[Path, int]:
    """rs_grad_shard.cu beside its header with `old` replaced by `new`; the path and the edited line."""
    text = (CORPUS / "rs_grad_shard.cu").read_text()
    assert text.count(old) == 1
    shutil.copy(CORPUS / "host_util.h", tmp_path / "host_util.h")
    (tmp_path / name).write_text(text.replace(old, new))
    return tmp_path / name, text[:text.index(old)].count("\n") + 1


@needs_nvcc
def test_a_missing_semicolon_in_main_is_reported_at_its_line(tmp_path):
    prog, line = _broken(tmp_path, "std::vector<std::thread> workers;", "std::vector<std::thread> workers")
    with pytest.raises(ProgramError) as err:
        HostProgram.load(prog)
    text = str(err.value)
    assert "does not compile as given" in text and 'expected a ";"' in text
    assert re.search(rf"{re.escape(str(prog))}\(({line}|{line + 1})\): error", text), text
    assert "communicator" not in text and "cuco-original-" not in text   # the user's file, not cuco's copy


@needs_nvcc
def test_a_kernel_that_does_not_compile_stops_cuco_run_with_the_users_line(tmp_path):
    # the statement is valid syntax, so only the compiler finds it: the observed original is compiled first
    prog, line = _broken(tmp_path, "p[i] -= lr * g[i];", "p[i] -= lr * g[i] * no_such_scale;")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run([sys.executable, "-m", "cuco.cli", "run", str(prog), "--evals", "4", "--run-dir",
                          str(tmp_path / "r"), "--quiet"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=300)
    assert res.returncode != 0
    assert f'{prog}({line}): error: identifier "no_such_scale" is undefined' in res.stderr, res.stderr
    assert "statically checked" not in res.stdout + res.stderr and not (tmp_path / "r").exists()


@needs_nvcc
def test_a_rewrite_that_does_not_compile_names_the_users_line(tmp_path):
    from cuco.program.evaluator import ProgramEvaluator
    from cuco.program.workload import ProgramWorkload

    prog, line = _broken(tmp_path, "p[i] -= lr * g[i];", "p[i] -= lr * g[i];")
    w = ProgramWorkload.load(prog)
    fast = w.fast_path(Topology(world=1))
    bad = fast.evolve(code=fast.code.replace("p[i] -= lr * g[i];", "p[i] -= lr * g[i] * no_such_scale;"))
    ev = ProgramEvaluator(w.program, world=1, work_dir=tmp_path / "work")
    [out] = ev.evaluate([bad])
    assert out.status == "failed:compile"
    assert f'{prog}({line}): error: identifier "no_such_scale" is undefined' in out.results["compile"].reason


def test_positions_in_a_generated_file_move_to_the_users_lines():
    user = "int main() {\n  int a = 1;\n  return a\n}\n"
    generated = "#include <x.h>\n// runtime\nint main() {\n  int a = 1;\n  cuco_marker();\n  return a\n}\n"
    lines = diagnostics.line_map(generated, user)
    assert lines[3] == 1 and lines[6] == 3 and 5 not in lines and 2 not in lines
    log = ('/tmp/w/program.cu(7): error: expected a ";"\n  }\n  ^\n\n'
           "/tmp/w/program.cu:5:3: error: 'cuco_marker' was not declared\n"
           '2 errors detected in the compilation of "/tmp/w/program.cu".\n')
    moved = diagnostics.in_user_terms(log, "program.cu", lines, "src/app.cu")
    assert 'src/app.cu(4): error: expected a ";"' in moved
    assert "/tmp/w/program.cu:5 [code cuco generated" in moved and "not a line of app.cu" in moved
    assert 'compilation of "src/app.cu"' in moved
    shown = diagnostics.errors(moved)
    assert shown.splitlines()[:3] == ['src/app.cu(4): error: expected a ";"', "  }", "  ^"]


def test_errors_are_shown_whole_and_counted_past_the_limit():
    log = "".join(f"a.cu({n}): error: {'x' * 500}\n  code\n  ^\n\n" for n in range(1, 31))
    shown = diagnostics.errors(log)
    assert shown.count("x" * 500) == diagnostics.MAX_DIAGNOSTICS and shown.endswith("(and 10 more)")
    assert diagnostics.errors("ld: something odd\n") == "ld: something odd"


def test_the_summary_without_a_gpu_counts_only_candidates_that_compiled(tmp_path):
    from cuco.run_summary import RunSummary

    s = RunSummary("p", tmp_path, "unmeasured", 3, {"unmeasured": 1, "failed:compile": 2}, None, None, {})
    assert "1 of 3 candidates passed the static check and compiled" in s.text()
    assert "every candidate" not in s.text()
    assert json.dumps(s.to_dict())
