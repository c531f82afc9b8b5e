"""How the program runner runs a binary once, observed: the ProgramLauncher interface and this machine's."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Mapping, Protocol

from cuco.evaluate.executor import DeviceGroup, Executor
from cuco.program.observation import Observation


class ProgramLauncher(Protocol):
    """Runs a program binary once on a GPU group with `env` and reads its observation; tests give the program
    runner a fake one."""

    def run(self, binary: Path, group: DeviceGroup, env: Mapping[str, str], timeout_s: float,
            work_dir: Path) -> tuple[Observation | None, str]:
        """(observation, '') or (None, why the run failed)."""


class LocalLauncher:
    """The launcher of this machine: the binary as a process on `group`, observed into a folder of `work_dir`."""

    def run(self, binary: Path, group: DeviceGroup, env: Mapping[str, str], timeout_s: float,
            work_dir: Path) -> tuple[Observation | None, str]:
        """Run once, observed; (observation, '') or (None, why it failed)."""
        with tempfile.TemporaryDirectory(prefix="obs-", dir=work_dir) as obs:
            res = Executor.run_command([str(binary)], group, timeout_s, extra_env={**env, "CUCO_OBSERVE_DIR": obs},
                                       cwd=str(binary.parent))
            if res.timed_out:
                return None, f"hang: killed after {timeout_s:g} s"
            if res.returncode != 0:
                tail = (res.stdout + res.stderr).strip()[-1500:]
                return None, f"exited with status {res.returncode}:\n{tail}"
            return Observation.read(Path(obs)), ""
