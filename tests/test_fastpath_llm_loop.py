"""The two-stage LLM loop, offline: a scripted test double (bad first answer, good second), the judge
prompt that quotes and locates errors, the iteration bound, and litellm's mock_response when available."""

import importlib.util
from pathlib import Path

import attrs
import pytest

from cuco.fastpath.agent import FastPathAgent
from cuco.fastpath.analyze import analyze, analyze_file
from cuco.fastpath.llm_loop import CheckOutcome, LLMLoop, extract_code, judge_prompt, locate
from cuco.fastpath.model import FastPathError
from cuco.fastpath.transform import transform

FIX = Path(__file__).parent / "fixtures" / "fastpath"


@attrs.frozen
class _Reply:
    text: str


class ScriptedLLMForTests:
    """Test double: answers from a script, records every prompt it gets."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.prompts = []

    def complete(self, messages, temperature=None):
        self.prompts.append([dict(m) for m in messages])
        return _Reply(self.answers.pop(0))


def _fenced(code):
    return f"Here it is.\n```cuda\n{code}```\n"


def test_agent_llm_path_recovers_from_a_bad_first_answer():
    seed = (FIX / "bad_unknown_collective.cu").read_text()
    broken = seed.replace("float *a, *b;", "float *a, *b")            # stage A, first try: does not compile
    device_like = seed.replace("  ncclGather(a, b, 256, ncclFloat, 0, comm, 0);\n", "")
    stage_b = transform(analyze(device_like), device_like).code      # a correct device-initiated program
    llm = ScriptedLLMForTests([_fenced(broken), _fenced(seed), _fenced(stage_b)])
    result = FastPathAgent(llm=llm, run_on_gpu=False).run(FIX / "bad_unknown_collective.cu")
    assert result.llm_calls == 3 and result.rules_applied == ()
    assert result.verified_how == "compiled only (no GPU)"
    assert analyze(result.code).collectives == ()
    judge = llm.prompts[1][-1]["content"]                              # the judge prompt after the bad answer
    assert "failed its check" in judge and "error at line 7" in judge
    assert ">     7 |   cudaMalloc(&a, 4096);" in judge
    assert "Stage B" in llm.prompts[2][1]["content"]


def _loop(answers, outcomes, iters=3):
    llm = ScriptedLLMForTests(answers)
    seq = iter(outcomes)
    return llm, LLMLoop(llm, lambda stage, code: next(seq), max_iterations=iters)


def test_loop_is_bounded_per_stage():
    a = analyze_file(FIX / "ag_two_streams.cu")
    bad = CheckOutcome(False, "nvcc failed", ((3, "expected a ;"),))
    llm, loop = _loop([_fenced("int x\n")] * 2, [bad, bad], iters=2)
    res = loop.run("int main() {}\n", a)
    assert not res.ok and res.llm_calls == 2 and [x.stage for x in res.attempts] == ["A", "A"]


def test_reply_without_code_is_a_failure_not_a_crash():
    a = analyze_file(FIX / "ag_two_streams.cu")
    ok = CheckOutcome(True, "")
    llm, loop = _loop(["I cannot do that.", _fenced("int a;\n"), _fenced("int b;\n")], [ok, ok])
    res = loop.run("int main() {}\n", a)
    assert res.ok and res.llm_calls == 3 and res.code == "int b;\n"
    assert "no ```cuda code block" in res.attempts[0].message


def test_locate_and_extract():
    code = "a\nb\nc\nd\n"
    text = locate(code, [(3, "boom")], context=1)
    assert text.splitlines() == ["error at line 3: boom", "      2 | b", ">     3 | c", "      4 | d"]
    assert extract_code("x\n```cpp\nshort\n```\n```cuda\nlonger one\n```") == "longer one\n"
    assert "no line" not in judge_prompt("A", code, CheckOutcome(False, "nvcc failed", ((2, "bad"),)))


def test_llm_object_needs_complete():
    with pytest.raises(FastPathError, match="complete"):
        LLMLoop(object(), lambda s, c: CheckOutcome(True, ""))


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm is not installed")
def test_loop_with_litellm_mock_response(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    answers = iter(["no code here", _fenced("int ok_a;\n"), _fenced("int ok_b;\n")])

    class LitellmMock:
        def complete(self, messages, temperature=None):
            r = litellm.completion(model="gpt-4o-mini", messages=messages, temperature=temperature,
                                   mock_response=next(answers))
            return _Reply(r.choices[0].message.content)

    a = analyze_file(FIX / "ag_two_streams.cu")
    res = LLMLoop(LitellmMock(), lambda s, c: CheckOutcome(True, "")).run("int main() {}\n", a)
    assert res.ok and res.llm_calls == 3 and res.code == "int ok_b;\n"
