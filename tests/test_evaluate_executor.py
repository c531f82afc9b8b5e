"""Executor: GPU groups, process-group timeouts, scrubbed environments, serialised timing."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.evaluate.executor import DeviceGroup, Executor, NoGPUError, partition, visible_gpus
from cuco.process import SAFE_GPU_ENV, is_allowed, is_secret, run_group, scrubbed_env


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"   # a zombie is dead, only not yet reaped
    except (FileNotFoundError, IndexError):
        return False


def test_timeout_kills_the_whole_process_group_including_a_grandchild(tmp_path):
    pidfile = tmp_path / "grandchild.pid"
    start = time.monotonic()
    outcome = Executor.run_command(["sh", "-c", f"sleep 100 & echo $! > {pidfile}; sleep 100"], None, timeout_s=1.0)
    elapsed = time.monotonic() - start
    assert outcome.timed_out and outcome.returncode is None
    assert elapsed < 10, elapsed
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), f"grandchild {grandchild} survived the timeout"


def test_command_that_finishes_keeps_its_output_and_status():
    outcome = Executor.run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], None, timeout_s=30)
    assert not outcome.timed_out and outcome.returncode == 3
    assert outcome.stdout.strip() == "out" and outcome.stderr.strip() == "err"


def test_environment_of_a_run_has_no_api_keys_and_only_its_gpus(monkeypatch):
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "HF_TOKEN", "LITELLM_MASTER_KEY"):
        monkeypatch.setenv(key, "secret-value")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    monkeypatch.setenv("CUCO_KEEP_ME", "yes")
    group = DeviceGroup(1, (2, 3), ("2", "3"))
    outcome = Executor.run_command(["env"], group, timeout_s=30)
    env = dict(line.split("=", 1) for line in outcome.stdout.splitlines() if "=" in line)
    assert "secret-value" not in outcome.stdout
    assert not any(k in env for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "HF_TOKEN",
                                      "LITELLM_MASTER_KEY"))
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert env["NCCL_NVLS_ENABLE"] == "0"          # NVLink multicast stays off whatever the caller set
    assert env["CUCO_KEEP_ME"] == "yes"
    no_gpu = Executor.run_command(["env"], None, timeout_s=30)
    assert "CUDA_VISIBLE_DEVICES=\n" in no_gpu.stdout


@pytest.mark.parametrize("n, world, expect", [
    (8, 2, [(0, 1), (2, 3), (4, 5), (6, 7)]),
    (8, 4, [(0, 1, 2, 3), (4, 5, 6, 7)]),
    (8, 8, [tuple(range(8))]),
    (3, 2, [(0, 1)]),
    (1, 2, []),
    (0, 1, []),
    (2, 1, [(0,), (1,)]),
])
def test_partition_into_groups(n, world, expect):
    groups = partition([str(i) for i in range(n)], world)
    assert [g.devices for g in groups] == expect
    assert [g.index for g in groups] == list(range(len(expect)))


def test_partition_keeps_the_callers_device_names():
    groups = partition(["4", "5", "GPU-ab", "GPU-cd"], 2)
    assert [g.visible for g in groups] == [("4", "5"), ("GPU-ab", "GPU-cd")]
    assert [g.devices for g in groups] == [(0, 1), (2, 3)]
    with pytest.raises(ValueError):
        partition(["0"], 0)


@pytest.mark.parametrize("value, expect", [
    ("2,3", ("2", "3")), ("", ()), ("-1", ()), ("0,1,-1,2", ("0", "1")), (" 1 , 0 ", ("1", "0")),
    ("GPU-1234,GPU-5678", ("GPU-1234", "GPU-5678")),
])
def test_visible_gpus_follows_cuda_visible_devices(value, expect):
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": value, "PATH": os.environ.get("PATH", "")}) == expect


def test_no_gpu_is_reported_clearly():
    ex = Executor(world=2, devices=[])
    assert not ex.has_gpu and ex.groups == ()
    assert "no GPU" in ex.describe()
    with pytest.raises(NoGPUError, match="no GPU visible.*at least 2 NVIDIA GPUs"):
        ex.map([lambda g: g])
    one = Executor(world=2, devices=["0"])
    assert not one.has_gpu and "world size 2 needs 2" in one.describe()


def test_asking_for_more_gpus_than_visible_is_an_error():
    with pytest.raises(NoGPUError, match="requested"):
        Executor(gpus=len(visible_gpus()) + 1, world=1)


def _tracker():
    lock = threading.Lock()
    state = {"running": 0, "peak": 0, "in_use": set(), "clash": False}

    def job(group: DeviceGroup):
        with lock:
            state["running"] += 1
            state["peak"] = max(state["peak"], state["running"])
            state["clash"] |= bool(set(group.devices) & state["in_use"])
            state["in_use"] |= set(group.devices)
        time.sleep(0.2)
        with lock:
            state["running"] -= 1
            state["in_use"] -= set(group.devices)
        return group.devices

    return state, job


def test_map_runs_one_job_per_group_at_a_time():
    ex = Executor(world=2, devices=["0", "1", "2", "3"])
    assert len(ex.groups) == 2
    state, job = _tracker()
    results = ex.map([job] * 6)
    assert len(results) == 6 and set(results) == {(0, 1), (2, 3)}
    assert state["peak"] == 2 and not state["clash"]


def test_exclusive_jobs_have_the_host_to_themselves():
    ex = Executor(world=2, devices=["0", "1", "2", "3"])
    state, job = _tracker()
    results = ex.map([job] * 3, exclusive=True)
    assert results == [(0, 1)] * 3 and state["peak"] == 1
    # An exclusive job waits for concurrent ones to hand back every group.
    seen: list[int] = []
    plain = threading.Thread(target=lambda: ex.map([job, job]))
    plain.start()
    time.sleep(0.05)
    ex.run(lambda g: seen.append(state["running"]), exclusive=True)
    plain.join()
    assert seen == [0]


SECRETS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
           "AWS_SESSION_TOKEN", "AZURE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN", "LITELLM_MASTER_KEY",
           "deepseek_api_key", "GITHUB_TOKEN")
KEPT = ("PATH", "HOME", "CUDA_HOME", "NCCL_DEBUG", "NCCL_HOME", "CUCO_CACHE_DIR", "LD_LIBRARY_PATH", "PYTHONPATH")
names = st.one_of(st.sampled_from(SECRETS + KEPT + tuple(SAFE_GPU_ENV)),
                  st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ_abc", min_size=1, max_size=24))


@settings(max_examples=200, deadline=None)
@given(base=st.dictionaries(names, st.text(max_size=8)), extra=st.dictionaries(names, st.text(max_size=8)))
def test_scrubbed_env_drops_every_secret_keeps_the_rest_and_forces_multicast_off(base, extra):
    env = scrubbed_env(base, extra)
    merged = {**{k: v for k, v in base.items() if is_allowed(k)}, **extra}
    assert not any(is_secret(k) for k in env)
    assert not set(SECRETS) & set(env)
    for k, v in merged.items():
        if k in SAFE_GPU_ENV:
            assert env[k] == SAFE_GPU_ENV[k]
        elif not is_secret(k):
            assert env[k] == v
    # inherited: only allow-listed names; set by the caller on purpose: anything but a secret
    assert set(env) == {k for k in merged if not is_secret(k)} | set(SAFE_GPU_ENV)
    assert all(k in env for k in KEPT if k in merged)


def test_run_group_scrubs_even_an_environment_the_caller_built(tmp_path):
    given_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": "sk-x",
                 "AWS_SECRET_ACCESS_KEY": "y", "NCCL_NVLS_ENABLE": "1", "CUCO_KEEP_ME": "yes"}
    outcome = run_group(["env"], timeout_s=30, env=given_env, cwd=tmp_path)
    env = dict(line.split("=", 1) for line in outcome.stdout.splitlines() if "=" in line)
    assert "OPENAI_API_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env and "sk-x" not in outcome.stdout
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["CUCO_KEEP_ME"] == "yes"


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    code = ("import os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print(os.getpid(), flush=True)\ntime.sleep(100)\n")
    start = time.monotonic()
    outcome = run_group([sys.executable, "-c", code], timeout_s=1.0, grace_s=0.5, cwd=tmp_path)
    assert outcome.timed_out and outcome.returncode is None
    assert time.monotonic() - start < 8
    pid = int(outcome.stdout.split()[0])
    assert not _alive(pid)
