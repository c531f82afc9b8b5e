"""One LLM completion (LLMReply) and the record/replay cache: every completion a run asked for, keyed by a hash of
what decides it, so that a run can be replayed offline bit for bit (`LLMConfig.cache_mode`: "record", then
"replay")."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import attrs

CACHE_MODES = ("off", "record", "replay")


@attrs.frozen
class LLMReply:
    """One completion: its text, the model that wrote it, its cost, and whether it came from the cache."""

    text: str
    model: str
    cost_usd: float
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0


def prompt_key(model: str, messages: Sequence[Mapping[str, str]], temperature: float, max_tokens: int,
               extra: str = "") -> str:
    """Stable hash of everything that decides a completion."""
    blob = json.dumps({"model": model, "messages": [dict(m) for m in messages], "temperature": temperature,
                       "max_tokens": max_tokens, "extra": extra}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


class ReplayCache:
    """prompt hash -> responses, as append-only JSONL. The n-th request of a key gets the n-th stored answer."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, list[dict[str, Any]]] = {}
        self._served: dict[str, int] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    e = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line cut short by a killed writer: the call is simply not cached
                self._entries.setdefault(e["key"], []).append(e)

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

    def next(self, key: str) -> dict[str, Any] | None:
        """The next stored answer for `key` in this process, or None."""
        with self._lock:
            n = self._served.get(key, 0)
            stored = self._entries.get(key, [])
            if n >= len(stored):
                return None
            self._served[key] = n + 1
            return stored[n]

    def put(self, key: str, reply: LLMReply) -> None:
        """Append `reply` for `key` to the file (synced to disk) and count it as served in this process."""
        entry = {"key": key, "model": reply.model, "text": reply.text, "cost_usd": reply.cost_usd,
                 "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens}
        with self._lock:
            self._entries.setdefault(key, []).append(entry)
            self._served[key] = self._served.get(key, 0) + 1
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a") as f:
                f.write(json.dumps(entry, sort_keys=True) + "\n")
                f.flush()
                os.fsync(f.fileno())
