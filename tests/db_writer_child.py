"""Writes candidates to a CandidateDB until killed; prints each id once its transaction has committed.

Usage: db_writer_child.py DB_PATH PREFIX. Each candidate is first added (pending), then upserted with all levels
passed and a fitness; after each commit the child prints "added <id>" or "passed <id> <fitness>" and flushes.
Used by tests/test_db.py, which SIGKILLs this process at random moments.
"""

from __future__ import annotations

import random
import sys

from cuco.candidate import LEVELS, Candidate, LevelResult
from cuco.db import CandidateDB


def main(path: str, prefix: str) -> None:
    rng = random.Random(prefix)
    with CandidateDB(path) as db:
        print("open", flush=True)
        for i in range(10**9):
            # 1-40 KB of code: transactions span many pages, so WAL checkpoints run while we may be killed.
            code = "".join(rng.choice("abcdefgh;\n") for _ in range(rng.randint(1_000, 40_000)))
            c = Candidate(code=code, workload="w", id=f"{prefix}-{i}", island=i % 4, generation=i)
            db.add(c)
            print(f"added {c.id}", flush=True)
            fitness = rng.random()
            for level in LEVELS:
                c = c.with_result(LevelResult(level, True, seconds=0.01))
            db.upsert(c.evolve(fitness=fitness))
            print(f"passed {c.id} {fitness!r}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
