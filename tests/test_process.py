"""run_group: hostile output (bytes that are not UTF-8, gigabytes) and processes that try to outlive the run."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cuco.process import KEEP_BYTES, run_group

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"   # a zombie is dead, only not yet reaped
    except (FileNotFoundError, IndexError):
        return False


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _alive(pid)


def _pids(path: Path, n: int, within_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        lines = path.read_text().split() if path.exists() else []
        if len(lines) >= n:
            return [int(x) for x in lines[:n]]
        time.sleep(0.05)
    raise AssertionError(f"{path} did not get {n} pids")


def test_bytes_that_are_not_utf8_come_back_replaced_not_raised():
    out = run_group(["bash", "-c", r"printf 'a\xffb'; printf '\xfe' >&2"], 5)
    assert out.returncode == 0 and not out.timed_out
    assert out.stdout == "a\ufffdb" and out.stderr == "\ufffd"


def _bounded_child(argv: list[str], timeout_s: float, limit_mib: int = 400) -> subprocess.CompletedProcess:
    """run_group in a child python whose address space is capped, so unbounded buffering fails there."""
    code = textwrap.dedent(f"""
        import resource, sys
        sys.path.insert(0, {SRC!r})
        from cuco.process import run_group
        resource.setrlimit(resource.RLIMIT_AS, ({limit_mib} << 20, {limit_mib} << 20))
        out = run_group({argv!r}, {timeout_s})
        print(len(out.stdout), out.stdout_dropped, out.timed_out, out.returncode)
        print(out.stdout[-200:].replace("\\n", "|"))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_a_gigabyte_of_output_is_kept_as_head_and_tail_in_bounded_memory():
    res = _bounded_child(["bash", "-c", "echo first; head -c 1200M /dev/zero | tr '\\0' x; echo; echo last"], 60)
    assert res.returncode == 0, res.stderr[-2000:]
    length, dropped, timed_out, rc = res.stdout.split("\n")[0].split()
    assert timed_out == "False" and rc == "0"
    assert int(dropped) > 1_100_000_000
    assert int(length) < 3 * KEEP_BYTES
    assert res.stdout.split("\n")[1].endswith("x|last|")


def test_endless_output_until_the_timeout_stays_bounded():
    res = _bounded_child(["yes"], 2.0)
    assert res.returncode == 0, res.stderr[-2000:]
    length, dropped, timed_out, rc = res.stdout.split("\n")[0].split()
    assert timed_out == "True" and rc == "None" and int(dropped) > 0 and int(length) < 3 * KEEP_BYTES


def test_the_dropped_middle_is_said_in_the_text():
    out = run_group([sys.executable, "-c", f"import sys; sys.stdout.write('a' * {KEEP_BYTES} + 'b' * 1000 + "
                                           f"'c' * {KEEP_BYTES})"], 30)
    assert out.stdout_dropped == 1000
    assert out.stdout == "a" * KEEP_BYTES + "\n[... 1000 bytes dropped ...]\n" + "c" * KEEP_BYTES


def test_a_background_child_and_a_setsid_daemon_are_gone_after_a_normal_exit(tmp_path):
    pids = tmp_path / "pids"
    script = (f"sleep 300 & echo $! >> {pids}; "
              f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' > /dev/null 2>&1 < /dev/null & "
              f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & "   # this one keeps the output pipes open
              f"sleep 0.5; echo done")
    start = time.monotonic()
    out = run_group(["sh", "-c", script], 60)
    assert out.returncode == 0 and out.stdout.strip() == "done" and not out.timed_out
    assert time.monotonic() - start < 20
    for pid in _pids(pids, 3):
        assert _gone(pid), f"process {pid} outlived run_group"


def test_a_double_forked_daemon_is_gone_after_a_timeout(tmp_path):
    pids = tmp_path / "pids"
    daemon = tmp_path / "daemon.sh"
    daemon.write_text(f"echo $$ >> {pids}\nexec sleep 300\n")
    # setsid leaves the session, the subshell's parent exits at once: the daemon is an orphan in its own session
    script = (f"setsid sh -c 'sh {daemon} &' > /dev/null 2>&1 < /dev/null; "
              f"echo $$ >> {pids}; exec sleep 300")
    out = run_group(["sh", "-c", script], 1.5, grace_s=0.5)
    assert out.timed_out and out.returncode is None
    for pid in _pids(pids, 2):
        assert _gone(pid), f"process {pid} outlived the timeout"


def test_killing_the_caller_takes_the_candidate_processes_with_it(tmp_path):
    pids = tmp_path / "pids"
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from cuco.process import run_group
        run_group(["sh", "-c", "setsid sh -c 'echo $$ >> {pids}; exec sleep 300' >/dev/null 2>&1 </dev/null & "
                               "echo $$ >> {pids}; exec sleep 300"], 300)
    """)
    caller = subprocess.Popen([sys.executable, "-c", code])
    try:
        found = _pids(pids, 2)
    finally:
        caller.send_signal(signal.SIGKILL)
        caller.wait()
    for pid in found:
        assert _gone(pid), f"process {pid} outlived its SIGKILLed caller"


def test_a_missing_program_is_an_os_error_as_before(tmp_path):
    import pytest
    with pytest.raises(FileNotFoundError):
        run_group(["/no/such/program"], 5)
    with pytest.raises(FileNotFoundError):
        run_group(["no-such-program-anywhere"], 5)


def test_exit_codes_and_signals_pass_through():
    assert run_group(["sh", "-c", "exit 7"], 10).returncode == 7
    assert run_group(["sh", "-c", "kill -SEGV $$"], 10).returncode == -signal.SIGSEGV


def test_a_harness_process_that_prints_poison_is_a_result_not_an_exception(tmp_path):
    from cuco.harness.runner import HarnessRequest, run_harness

    fake = tmp_path / "harness"
    fake.write_text("#!/bin/sh\nprintf 'boom \\377\\376' >&2\nexit 3\n")
    fake.chmod(0o755)
    request = HarnessRequest(workload_plugin=tmp_path / "plugin.so", candidates=[tmp_path / "a.so"], dims=(8,),
                             world=1, timeout_s=5)
    result = run_harness(request, binary=fake, workdir=tmp_path)
    assert result.status == "error" and "boom \ufffd\ufffd" in result.message
    assert result.candidates[0].status == "not_run"


def test_a_setsid_daemon_is_gone_when_the_command_killed_its_launcher(tmp_path):
    """The command SIGKILLs the launcher (its parent), so the subreaper below cuco is gone: the orphans, a
    double-forked setsid daemon among them, come to the caller, which kills them."""
    pids = tmp_path / "pids"
    code = textwrap.dedent(f"""
        import os, signal, sys, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                open({str(pids)!r}, "a").write(f"{{os.getpid()}}\\n")
                time.sleep(300)
            os._exit(0)
        time.sleep(0.5)
        os.kill(os.getppid(), signal.SIGKILL)   # the launcher
        time.sleep(0.5)
    """)
    start = time.monotonic()
    out = run_group([sys.executable, "-c", code], 60)
    assert time.monotonic() - start < 30 and out.returncode == -signal.SIGKILL
    for pid in _pids(pids, 1):
        assert _gone(pid), f"process {pid} outlived the launcher its command killed"
