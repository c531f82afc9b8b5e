"""Every built-in workload's host seed goes through the rule-based fast path: no LLM, no host collective left,
EVOLVE-BLOCKs in place, and the conservative point named (the compile and GPU checks are elsewhere)."""

import pytest

from cuco import workloads
from cuco.fastpath import annotate
from cuco.fastpath.analyze import analyze
from cuco.fastpath.rules import CONSERVATIVE, applicable
from cuco.fastpath.transform import transform


@pytest.mark.parametrize("name", workloads.available())
def test_host_seed_transforms_with_rules_only(name):
    code = workloads.get(name).seed_code()
    analysis = analyze(code, f"{name}/seed")
    assert analysis.collectives, f"{name}: the host seed has no NCCL call for the fast path to replace"
    rules, problems = applicable(analysis)
    assert not problems, [p.message for p in problems]
    out = transform(analysis, code)
    assert out.rules_applied == tuple(rules) and out.rules_applied
    assert analyze(out.code).collectives == ()
    assert annotate.check_markers(out.code) >= 1
    assert CONSERVATIVE.label() == "lsa/deferred/world/cta/whole"
