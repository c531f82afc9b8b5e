"""Named test doubles of evaluators and runners, shared by tests and the child processes they start."""

from __future__ import annotations

import time


class SlowEvaluator:
    """A modelled evaluator that pauses `pause` seconds per candidate, so that kills land inside evaluations too
    (the model itself takes microseconds)."""

    kind = "modelled"
    on_stage = None

    def __init__(self, inner, pause: float):
        self.inner, self.pause = inner, pause

    def evaluate(self, cands):
        time.sleep(self.pause * len(cands))
        return self.inner.evaluate(cands)


class ScriptedLauncher:
    """A program launcher (cuco.program.launcher.ProgramLauncher) that runs nothing: each binary gives the
    observation `by_binary` names for it; `runs` records the binaries in the order they were run."""

    def __init__(self, by_binary):
        self.by_binary, self.runs = by_binary, []

    def run(self, binary, group, env, timeout_s, work_dir):
        self.runs.append(binary)
        return self.by_binary[binary], ""
