"""End to end, offline: a program the rules refuse (a communicated buffer in managed memory) goes to the LLM
loop with the refusal quoted; the replies are first recorded through litellm's mock_response into the
project's replay cache, then the same run is replayed from that cache alone."""

from pathlib import Path

import pytest

from cuco.fastpath.agent import FastPathAgent
from cuco.fastpath.analyze import analyze
from cuco.fastpath.model import FastPathError
from cuco.fastpath.transform import transform

pytest.importorskip("litellm")
from cuco.llm import LLMClient, LLMConfig  # noqa: E402

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
MODEL = "openai/gpt-4o-mini"


def _fenced(code: str) -> str:
    return f"The buffer must be symmetric memory, so it cannot be managed.\n```cuda\n{code}```\n"


class MockResponsesForTests:
    """Passes the next prepared reply to litellm as mock_response (litellm answers offline), records prompts."""

    def __init__(self, client: LLMClient, replies: list[str]):
        self.client, self.replies, self.prompts = client, list(replies), []

    def complete(self, messages, temperature=None):
        self.prompts.append(messages[-1]["content"])
        return self.client.complete(messages, temperature, mock_response=self.replies.pop(0))


def test_a_refusal_goes_to_the_llm_and_recorded_replies_fix_it(tmp_path):
    fixed = (CORPUS / "kv_cache_transfer.cu").read_text()
    seed = tmp_path / "kv_managed.cu"
    seed.write_text(fixed.replace("cudaMalloc(&kv,", "cudaMallocManaged(&kv,"))
    agent = dict(run_on_gpu=False, include_dirs=(CORPUS,), workdir=tmp_path / "work")

    refusal = r"line 31: `kv` \(send buffer of ncclSend at line 40\) is allocated with cudaMallocManaged"
    with pytest.raises(FastPathError, match=refusal):
        FastPathAgent(**agent).run(seed)          # no model: the refusal, with its line and construct

    # stage A: the program with symmetric-capable memory, host collectives kept; stage B: device-initiated
    replies = [_fenced(fixed), _fenced(transform(analyze(fixed), fixed).code)]
    cache = tmp_path / "replies.jsonl"
    recorder = MockResponsesForTests(LLMClient(LLMConfig(models=MODEL, cache_mode="record", cache_path=str(cache))),
                                     replies)
    recorded = FastPathAgent(llm=recorder, **agent).run(seed)
    assert "The rule-based rewrite refused this program" in recorder.prompts[0]
    assert "cudaMallocManaged" in recorder.prompts[0] and "Stage A" in recorder.prompts[0]

    replay = LLMClient(LLMConfig(models=MODEL, cache_mode="replay", cache_path=str(cache)))
    replayed = FastPathAgent(llm=replay, **agent).run(seed)
    assert replayed.code == recorded.code and replayed.llm_calls == 2 and replayed.rules_applied == ()
    assert analyze(replayed.code).collectives == () and "cudaMallocManaged" not in replayed.code
    assert replayed.verified_how == "compiled only (no GPU)"
