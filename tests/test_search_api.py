"""The Python API around a run: a workload's own validity rules survive a resume; islands with their own
backend, seed point and prompt note (an LSA island beside a GIN island); a mutator set given to start() survives a
resume; a wrong setting is refused before anything is written."""

from __future__ import annotations

import os
import random

import attrs
import pytest
from test_search_workload import ISSUERS, SHAPE, TOPOLOGY, make_workload, render

from cuco.candidate import Candidate
from cuco.db import CandidateDB
from cuco.design_space import DEFAULT_RULES, DesignSpace, Directives, Rule, Topology
from cuco.evaluate.modelled import ModelledEvaluator
from cuco.search import api
from cuco.search.config import SearchConfig, SearchConfigError
from cuco.search.island import IslandError, IslandSpec
from cuco.llm import LLMConfig
from cuco.search.loop import Mutators, Search
from cuco.search.mutators.directive import DirectiveMutator
from cuco.search.mutators.llm import LLMMutator


def _no_thread_issuer(d, _s):
    return "this toy workload has no thread issuer" if d.issuer == "thread" else None


RULE = Rule("toy-no-thread-issuer", _no_thread_issuer)


def _space(topology: Topology) -> DesignSpace:
    return DesignSpace(topology=topology, rules=(*DEFAULT_RULES, RULE)).restrict(issuers=ISSUERS)


W = attrs.evolve(make_workload("toy_with_rules"), space=_space)
EV = ModelledEvaluator(W, SHAPE, 2)


def test_resume_keeps_the_workloads_own_rules(tmp_path):
    first = api.start(tmp_path / "run", W, EV, topology=TOPOLOGY, seed=2, islands=2).run(8)
    assert first.evaluated == 8
    search = api.resume(tmp_path / "run", W, EV)
    assert "toy-no-thread-issuer" in [r.name for r in search.space.rules]
    assert search.run(16).evaluated == 16
    with CandidateDB(tmp_path / "run" / api.DB_FILE) as db:
        points = [c.directives for c in db.all()]
    assert len(points) == 16 and all(p.issuer != "thread" for p in points)


GIN_TOPOLOGY = Topology(world=2, nodes=1, gin_available=True, nvshmem_available=False)
TWO = (IslandSpec(backend="lsa", prompt="stay on NVLink load/store"),
       IslandSpec(backend="gin", seed_point="gin/deferred/world/warp/whole", prompt="use GIN puts with signals"))


def test_island_specs_keep_each_island_on_its_backend_and_survive_resume(tmp_path):
    space = W.space(GIN_TOPOLOGY)
    search = api.start(tmp_path / "run", W, EV, space=space, seed=3, islands=2, island_specs=TWO)
    search.run(12)
    search = api.resume(tmp_path / "run", W, EV)
    assert search.config.island_specs == TWO
    search.run(24)
    with CandidateDB(tmp_path / "run" / api.DB_FILE) as db:
        cands = db.all()
    assert len(cands) == 24 and {c.directives.backend for c in cands} == {"lsa", "gin"}
    for c in cands:
        assert c.directives.backend == ("lsa", "gin")[c.island], (c.island, c.directives.label())
    seeds = {c.island: c.directives.label() for c in cands if c.mutation == "seed"}
    assert seeds == {0: space.conservative().label(), 1: "gin/deferred/world/warp/whole"}


def test_island_specs_are_checked_against_the_space_and_the_island_count():
    with pytest.raises(SearchConfigError, match="2 entries for 3 islands"):
        SearchConfig(islands=3, island_specs=TWO)
    assert "island_specs" not in SearchConfig().to_dict()  # runs stored before island specs still resume
    cfg = SearchConfig(islands=2, island_specs=TWO)
    assert SearchConfig.from_dict(cfg.to_dict()) == cfg
    lsa_only = W.space(TOPOLOGY)
    with pytest.raises(IslandError, match="island 1: backend 'gin' has no legal point"):
        Search(W, lsa_only, EV, None, config=cfg)
    bad_seed = IslandSpec(backend="lsa", seed_point=Directives("lsa", "fused", "world", "thread", 0))
    with pytest.raises(IslandError, match="island 0: seed point .* is not legal"):
        bad_seed.check(0, lsa_only)


def test_the_island_note_and_space_reach_the_llm_prompt():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = pytest.importorskip("litellm")
    from cuco.llm import LLMClient, LLMConfig
    from cuco.search.mutators.base import MutationContext, MutationError
    from cuco.search.mutators.llm import LLMMutator

    space = TWO[1].space(W.space(GIN_TOPOLOGY))
    point = space.conservative()
    seen = []

    def fn(**kw):
        seen.append(kw["messages"])
        return litellm.completion(mock_response="DIRECTIVES: " + point.replace(backend="lsa").to_json(), **kw)

    m = LLMMutator(LLMClient(LLMConfig(models="openai/gpt-4o-mini", backoff_s=0), completion_fn=fn), fix_attempts=1)
    parent = Candidate(code=render(point), workload=W.name, directives=point, fitness=1.0)
    ctx = MutationContext(W, space, island=1, key="k", island_note=TWO[1].prompt)
    with pytest.raises(MutationError, match="illegal point"):  # the island's space refuses another backend
        m.full(parent, ctx, random.Random(0))
    user = seen[0][1]["content"]
    assert "## Focus of this island\nuse GIN puts with signals" in user


def test_start_takes_a_mutator_set_and_resume_keeps_it(tmp_path):
    mine = Mutators(directive=DirectiveMutator(far_steps=5, greed=0.2))
    search = api.start(tmp_path / "run", W, EV, topology=TOPOLOGY, seed=1, islands=2, mutators=mine)
    assert search.mutators == mine
    assert search.run(4).evaluated == 4
    again = api.resume(tmp_path / "run", W, EV)
    assert again.mutators.directive == mine.directive
    assert again.run(8).evaluated == 8


def test_start_refuses_a_mutator_set_with_an_llm_and_an_llm_argument(tmp_path):
    client = object()
    with pytest.raises(SearchConfigError, match="llm"):
        api.start(tmp_path / "run", W, EV, llm=LLMConfig(models="openai/gpt-4o-mini"),
                  mutators=Mutators(llm=LLMMutator(client)))  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("settings, named", [({"islnds": 2}, "islands"), ({"islands": 0}, "islands"),
                                             ({"batch_size": 8, "max_in_flight": 2}, "max_in_flight")])
def test_a_wrong_setting_is_refused_before_anything_is_written(tmp_path, settings, named):
    with pytest.raises(SearchConfigError, match=named):
        api.start(tmp_path / "run", W, EV, topology=TOPOLOGY, **settings)
    assert not (tmp_path / "run").exists()  # no directory, database or lock: a retry starts clean
