"""Named test doubles of evaluators and runners, shared by tests and the child processes they start."""

from __future__ import annotations

import time

from cuco.candidate import LevelResult
from cuco.evaluate.executor import Executor
from cuco.evaluate.levels import Cascade


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


class ScriptedCascade(Cascade):
    """A runner of the cascade (cuco.evaluate.levels.Cascade) that runs nothing: a candidate whose code contains
    'fail:<level>' fails that level, any other passes. Each level takes its survivors in reverse order (as a runner
    that splits or reorders them would) and records the candidate's own code in its result; L3 sets the fitness
    to len(code), so every record says whose it is."""

    def __init__(self, has_gpu: bool = True):
        self.world = 1
        self.executor = Executor(world=1, devices=["0"] if has_gpu else [])

    def static_level(self, c):
        return self._result("static", c)

    def compile_level(self, batch, alive):
        self._tell(batch, alive, "compile")
        passed = self._level("compile", batch, alive)
        self._tell(batch, set(alive) - set(passed) if self.has_gpu else alive, "done")  # as the runners do
        return passed

    def verify_level(self, batch, alive):
        return self._level("verify", batch, alive)

    def bench_level(self, batch, alive):
        for cid in self._level("bench", batch, alive):
            batch.measure(cid, {"time_ms": 1.0 / len(batch[cid].code)}, float(len(batch[cid].code)))

    def _level(self, level, batch, alive):
        passed = []
        for cid in reversed(alive):
            result = self._result(level, batch[cid])
            batch.record(cid, result)
            if result.passed:
                passed.append(cid)
        return passed

    @staticmethod
    def _result(level, c):
        ok = f"fail:{level}" not in c.code
        return LevelResult(level, ok, "" if ok else f"scripted failure of {c.code}", 0.0, {"code": c.code})
