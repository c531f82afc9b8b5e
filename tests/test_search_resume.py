"""A search process killed with SIGKILL at random moments, resumed each time, ends with exactly the requested
candidates: none lost (everything once stored stays, with its results), none repeated, none left pending."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from cuco.db import CandidateDB
from cuco.search import api

TOTAL = 40

CHILD = textwrap.dedent(f"""
    import sys
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    from doubles import SlowEvaluator
    from test_search_workload import SHAPE, TOPOLOGY, make_workload
    from cuco.evaluate.modelled import ModelledEvaluator
    from cuco.search import api

    w = make_workload()
    ev = SlowEvaluator(ModelledEvaluator(w, SHAPE, 2), pause=0.1)
    api.run(sys.argv[1], w, ev, {TOTAL}, space=w.space(TOPOLOGY), seed=11, islands=3, batch_size=3, max_in_flight=6)
""")


def test_sigkill_at_random_points_then_resume_loses_and_repeats_nothing(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run_dir = tmp_path / "run"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                        os.environ.get("PYTHONPATH", "")]))
    rng = random.Random(1234)
    stored: dict[str, tuple] = {}
    kills = 0
    for _attempt in range(60):
        proc = subprocess.Popen([sys.executable, str(script), str(run_dir)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = proc.communicate(timeout=rng.uniform(1.0, 2.5))
            assert proc.returncode == 0, err.decode()[-2000:]
            break
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            kills += 1
        if (run_dir / api.DB_FILE).exists():
            with CandidateDB(run_dir / api.DB_FILE) as db:
                for c in db.all():
                    if c.status != "pending":
                        stored.setdefault(c.id, (c.directives.label(), c.fitness))
                    else:
                        stored.setdefault(c.id, None)
    else:
        raise AssertionError("the search never finished")
    assert kills >= 2, "the kills did not interrupt the run; lower the timeouts"
    with CandidateDB(run_dir / api.DB_FILE) as db:
        assert db.integrity_check() == "ok"
        final = db.all()
        assert len(final) == TOTAL and len({c.id for c in final}) == TOTAL
        assert db.count_by_status() == {"unmeasured": TOTAL}  # modelled: ranked, never "passed"
        by_id = {c.id: c for c in final}
        for cid, seen in stored.items():  # nothing that was ever stored disappeared or changed its result
            assert cid in by_id
            if seen is not None:
                assert (by_id[cid].directives.label(), by_id[cid].fitness) == seen
        labels = [c.directives.label() for c in final]
        assert len(set(labels)) == TOTAL  # no point evaluated twice
