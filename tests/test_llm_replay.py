"""The LLM's record/replay cache on its own (no litellm): keys, order of answers per key, persistence, torn lines."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.llm import LLMReply
from cuco.llm_replay import ReplayCache, prompt_key

MSG = [{"role": "user", "content": "write a kernel"}]
MODEL = "openai/gpt-4o-mini"


def _reply(text: str) -> LLMReply:
    return LLMReply(text=text, model=MODEL, cost_usd=0.001, prompt_tokens=3, completion_tokens=5)


def test_prompt_key_depends_on_everything_that_decides_the_reply():
    k = prompt_key(MODEL, MSG, 0.2, 100)
    assert k == prompt_key(MODEL, MSG, 0.2, 100)
    assert len({k, prompt_key(MODEL, MSG, 0.5, 100), prompt_key("openai/gpt-4o", MSG, 0.2, 100),
                prompt_key(MODEL, MSG, 0.2, 100, "1"), prompt_key(MODEL, MSG, 0.2, 200)}) == 5


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.text(max_size=20)), max_size=12))
def test_a_new_cache_on_the_file_serves_each_keys_answers_in_recorded_order(puts):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cache.jsonl"
        rec = ReplayCache(path)
        for key, text in puts:
            rec.put(key, _reply(text))
        assert rec.next("a") is None  # what this process recorded counts as served already
        rep = ReplayCache(path)
        assert len(rep) == len(puts)
        for key in "abc":
            want = [t for k, t in puts if k == key]
            got = []
            while (e := rep.next(key)) is not None:
                got.append(e["text"])
            assert got == want


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "c.jsonl"
    ReplayCache(path).put("k", _reply("kept"))
    with open(path, "a") as f:
        f.write('{"key": "k", "text": "cut sh')
    rep = ReplayCache(path)
    assert len(rep) == 1 and rep.next("k")["text"] == "kept" and rep.next("k") is None
