"""The Python API for scripts and notebooks: start a run in a directory, resume it after a kill, run it.

    from cuco.search import api
    search = api.start("runs/ag1", workload, evaluator, space=workload.space(topology), seed=0)
    result = search.run(60)          # evaluate until the run holds 60 candidates
    # ... killed? later:
    search = api.resume("runs/ag1", workload, evaluator)
    result = search.run(60)          # finishes the same 60, nothing lost or repeated
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from cuco import runlock
from cuco.db import CandidateDB
from cuco.design_space import DesignSpace, Topology
from cuco.errors import CucoError
from cuco.evaluate.base import CandidateEvaluator
from cuco.llm import LLMClient, LLMConfig
from cuco.spend import LEDGER_FILE, SpendLedger
from cuco.search.config import SearchConfig, SearchConfigError
from cuco.search.loop import Mutators, Search, SearchResult
from cuco.search.mutators.directive import DirectiveMutator
from cuco.search.mutators.llm import LLMMutator
from cuco.search.run_state import PREFIX, RunMismatchError, stored_identity
from cuco.problem import Problem

DB_FILE = "candidates.db"
LLM_CACHE_FILE = "llm_cache.jsonl"


class RunDirError(CucoError):
    """A run directory is missing, empty, or not a cuco search run."""


def holds_search(run_dir: str | Path) -> bool:
    """True when run_dir's database holds a search run (read-only look: nothing is written)."""
    path = Path(run_dir) / DB_FILE
    if not path.is_file() or path.stat().st_size == 0:
        return False
    try:
        with CandidateDB(path, readonly=True) as db:
            return _holds_search(db)
    except CucoError:
        return False  # no tables yet: a start killed before its first write


def _holds_search(db: CandidateDB) -> bool:
    return stored_identity(db)["workload"] is not None


def llm_client(llm: LLMConfig, run_dir: Path) -> LLMClient:
    """The run's client for `llm`: its spend in the run's ledger (the cap holds across resumes) and, unless
    caching is off, its replay cache in the run directory. Building it writes nothing."""
    if llm.cache_mode != "off" and not llm.cache_path:
        llm = attrs.evolve(llm, cache_path=str(run_dir / LLM_CACHE_FILE))
    return LLMClient(llm, ledger=SpendLedger(run_dir / LEDGER_FILE))


def _mutators(llm: LLMConfig | LLMClient | None, run_dir: Path, given: Mutators | None = None,
              fix_attempts: int | None = None) -> Mutators:
    """The mutator set `given` (default: the directive mutator), plus an LLM mutator when `llm` is given (its
    replay cache defaults into run_dir). Every LLM client is checked here, before anything is written: a model
    that cannot work leaves no half-made run behind."""
    _check_one_llm(llm, given)
    base = given or Mutators()
    if llm is None:
        check = getattr(base.llm.client, "check", None) if base.llm is not None else None
        if check is not None:
            check()
        return base
    client = llm if isinstance(llm, LLMClient) else llm_client(llm, run_dir)
    client.check()  # once per client: a client the caller checked already is not checked again
    extra = {} if fix_attempts is None else {"fix_attempts": fix_attempts}
    return attrs.evolve(base, llm=LLMMutator(client, **extra))


def _check_one_llm(llm: LLMConfig | LLMClient | None, mutators: Mutators | None) -> None:
    if llm is not None and mutators is not None and mutators.llm is not None:
        raise SearchConfigError("the LLM is given twice (llm= and mutators=Mutators(llm=...)); pass one of them")


def _store_mutators(db: CandidateDB, mutators: Mutators) -> None:
    """What resume needs to rebuild the same set: the directive mutator's settings, the LLM's config and retries.
    An LLM mutator's completion_kwargs are not stored (they may hold keys): pass `mutators=` to resume for them."""
    db.meta_set(PREFIX + "mutators", {"directive": attrs.asdict(mutators.directive),
                                     "llm_fix_attempts": mutators.llm.fix_attempts if mutators.llm else None})
    client = mutators.llm.client if mutators.llm is not None else None
    if isinstance(client, LLMClient):
        db.meta_set(PREFIX + "llm", client.config.to_dict())


def _stored_mutators(db: CandidateDB) -> tuple[Mutators | None, int | None]:
    """The directive mutator and LLM retries stored by _store_mutators (None, None for a run from before)."""
    data = db.meta_get(PREFIX + "mutators")
    if not data:
        return None, None
    try:
        return Mutators(directive=DirectiveMutator(**data["directive"])), data.get("llm_fix_attempts")
    except (KeyError, TypeError, ValueError) as exc:
        raise RunMismatchError(f"the stored mutator set does not load ({exc}); resume with mutators=") from None


def _stored_space(data: dict, workload: Problem) -> DesignSpace:
    """The run's stored space, with the workload's own validity rules (stored by name) resolved again."""
    try:
        extra = workload.space(Topology(**data.get("topology", {}))).rules
    except (CucoError, TypeError):
        extra = ()
    try:
        return DesignSpace.from_dict(data, extra_rules=extra)
    except CucoError as exc:
        raise RunMismatchError(f"the stored design space does not load with workload {workload.name!r}: {exc}; "
                               "resume with the cuco version that started the run, or start a new run") from None


def start(run_dir: str | Path, workload: Problem, evaluator: CandidateEvaluator, *, space: DesignSpace | None = None,
          topology: Topology | None = None, llm: LLMConfig | LLMClient | None = None,
          mutators: Mutators | None = None, config: SearchConfig | None = None, progress: Any = None,
          **settings: Any) -> Search:
    """A new run in `run_dir` (created). `settings` override SearchConfig fields (islands=, seed=, ...);
    `mutators` is the operator set (default: the directive mutator), `llm` adds an LLM mutator to it."""
    run_dir = Path(run_dir)
    search_kwargs = {k: settings.pop(k) for k in ("novelty", "meta") if k in settings}  # Search's, not stored
    # every setting is checked before the directory, its lock or its database exist: a typo leaves nothing behind
    config = (config or SearchConfig()).with_settings(**settings)
    space = space or workload.space(topology or Topology(world=workload.default_world))
    config.check_space(space)
    _check_one_llm(llm, mutators)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.held(run_dir):  # the look at the directory and the first writes are one writer's
        mutators = _mutators(llm, run_dir, mutators)  # before the database exists: a bad model leaves nothing
        db = CandidateDB(run_dir / DB_FILE)
        try:
            return _start(db, run_dir, workload, evaluator, space, mutators, config, progress, search_kwargs)
        except BaseException:
            db.close()
            raise


def _start(db: CandidateDB, run_dir: Path, workload: Problem, evaluator: CandidateEvaluator, space: DesignSpace,
           mutators: Mutators, config: SearchConfig, progress: Any, search_kwargs: dict[str, Any],
           take_lock: bool = True) -> Search:
    """A new search in `db`, the open database of `run_dir`, whose lock the caller holds."""
    if _holds_search(db) or len(db):
        raise RunDirError(f"{run_dir} already holds a run; resume it (cuco.search.api.resume) or pick a new directory")
    _store_mutators(db, mutators)
    return Search(workload, space, evaluator, db, config=config, mutators=mutators, progress=progress,
                  take_lock=take_lock, **search_kwargs)


def resume(run_dir: str | Path, workload: Problem, evaluator: CandidateEvaluator, *, llm: LLMConfig | LLMClient | None = None,
           mutators: Mutators | None = None, progress: Any = None) -> Search:
    """The run stored in `run_dir`, with its stored space, config and mutator set. The workload must be the run's.

    llm: the client to continue with; None reuses the stored LLMConfig (if the run had one).
    mutators: the operator set to continue with; None rebuilds the stored one.
    """
    run_dir = Path(run_dir)
    path = run_dir / DB_FILE
    if not path.exists():
        raise RunDirError(f"{run_dir} has no {DB_FILE}; it is not a cuco search run (start one with api.start)")
    with runlock.held(run_dir):  # a writer mid-start is refused here, not read half-written
        db = CandidateDB(path)
        try:
            return _resume(db, run_dir, workload, evaluator, llm=llm, mutators=mutators, progress=progress)
        except BaseException:  # a run that cannot resume leaves the database closed and untouched
            db.close()
            raise


def _resume(db: CandidateDB, run_dir: Path, workload: Problem, evaluator: CandidateEvaluator, *,
            llm: LLMConfig | LLMClient | None, mutators: Mutators | None, progress: Any,
            take_lock: bool = True) -> Search:
    """The search stored in `db`, the open database of `run_dir`, whose lock the caller holds."""
    ident = stored_identity(db)
    if ident["workload"] is None or ident["config"] is None or ident["space"] is None:
        raise RunDirError(f"{run_dir} holds no search run metadata; start a run there with api.start")
    if ident["workload"] != workload.name:
        raise RunMismatchError(f"{run_dir} is a run of workload {ident['workload']!r}, not {workload.name!r}; "
                               f"resume it with workload {ident['workload']!r} or start a new run directory")
    space = _stored_space(ident["space"], workload)
    config = SearchConfig.from_dict(ident["config"])
    fix_attempts = None
    if mutators is None:
        mutators, fix_attempts = _stored_mutators(db)
        if llm is None and db.meta_get(PREFIX + "llm") is not None:
            llm = LLMConfig.from_dict(db.meta_get(PREFIX + "llm"))
    mutators = _mutators(llm, run_dir, mutators, fix_attempts)
    return Search(workload, space, evaluator, db, config=config, mutators=mutators, progress=progress,
                  take_lock=take_lock)


def open_search(db: CandidateDB, workload: Problem, evaluator: CandidateEvaluator, *, space: DesignSpace,
                llm: LLMConfig | LLMClient | None = None, progress: Any = None, **settings: Any) -> Search:
    """The search stored in `db` resumed, else a new one started there with `settings` (SearchConfig fields),
    for a caller that holds the run directory's lock for the search's whole life and owns `db` (cuco.run.Run):
    neither is taken again, and `db` stays open on an error."""
    run_dir = db.path.parent
    if _holds_search(db):
        return _resume(db, run_dir, workload, evaluator, llm=llm, mutators=None, progress=progress, take_lock=False)
    search_kwargs = {k: settings.pop(k) for k in ("novelty", "meta") if k in settings}
    config = SearchConfig().with_settings(**settings)
    config.check_space(space)
    mutators = _mutators(llm, run_dir, None)
    return _start(db, run_dir, workload, evaluator, space, mutators, config, progress, search_kwargs,
                  take_lock=False)


def run(run_dir: str | Path, workload: Problem, evaluator: CandidateEvaluator, n_evaluations: int, **kwargs: Any) -> SearchResult:
    """Start the run in `run_dir`, or resume it if one is there, and evaluate up to `n_evaluations`."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with runlock.held(run_dir):  # one writer from the first look to the last write
        return _run(run_dir, workload, evaluator, n_evaluations, **kwargs)


def _run(run_dir: Path, workload: Problem, evaluator: CandidateEvaluator, n_evaluations: int,
         **kwargs: Any) -> SearchResult:
    if holds_search(run_dir):
        return resume(run_dir, workload, evaluator, llm=kwargs.get("llm"), mutators=kwargs.get("mutators"),
                      progress=kwargs.get("progress")).run(n_evaluations)
    return start(run_dir, workload, evaluator, **kwargs).run(n_evaluations)
