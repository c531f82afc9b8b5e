"""How the program runner runs a binary once, observed: the ProgramLauncher interface and this machine's."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Mapping, Protocol

import attrs

from cuco.evaluate.executor import DeviceGroup, Executor
from cuco.program.observation import Observation


class ProgramLauncher(Protocol):
    """Runs a program binary once on a GPU group with `env` and reads its observation; tests give the program
    runner a fake one."""

    def run(self, binary: Path, group: DeviceGroup, env: Mapping[str, str], timeout_s: float,
            work_dir: Path) -> tuple[Observation | None, str]:
        """(observation, '') or (None, why the run failed)."""


#: Starts W copies of a program, as torchrun would (standard library only: run by path, isolated).
RANK_LAUNCH = Path(__file__).with_name("rank_launch.py")


@attrs.frozen
class LocalLauncher:
    """The launcher of this machine: the binary as a process on `group`, observed into a folder of `work_dir`; or,
    with `ranks` > 1, `ranks` copies of it with torchrun's environment, for a program a launcher starts."""

    ranks: int = attrs.field(default=1, validator=attrs.validators.ge(1))

    def argv(self, binary: Path) -> list[str]:
        """The command that runs `binary` once: itself, or rank_launch.py starting its `ranks` copies."""
        if self.ranks == 1:
            return [str(binary)]
        return [sys.executable, "-I", "-S", str(RANK_LAUNCH), "--world", str(self.ranks), "--", str(binary)]

    def run(self, binary: Path, group: DeviceGroup, env: Mapping[str, str], timeout_s: float,
            work_dir: Path) -> tuple[Observation | None, str]:
        """Run once, observed; (observation, '') or (None, why it failed)."""
        with tempfile.TemporaryDirectory(prefix="obs-", dir=work_dir) as obs:
            res = Executor.run_command(self.argv(binary), group, timeout_s, extra_env={**env, "CUCO_OBSERVE_DIR": obs},
                                       cwd=str(binary.parent))
            if res.timed_out:
                return None, f"hang: killed after {timeout_s:g} s"
            if res.returncode != 0:
                tail = (res.stdout + res.stderr).strip()[-1500:]
                return None, f"exited with status {res.returncode}:\n{tail}"
            return Observation.read(Path(obs)), ""
