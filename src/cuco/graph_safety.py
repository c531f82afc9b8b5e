"""Whether a candidate's launch can be captured into a CUDA graph and replayed: its flag epochs must live on the
device.

A graph freezes every host-side value of the captured launch. An epoch computed on the host (from ctx->iteration,
or the fast path's per-communicator sequence counter) and passed to a kernel by value, or to cuStreamWaitValue32 /
cuStreamWriteValue32, is the same on every replay: from the second replay on, a consumer finds its flag already at
that epoch and reads a peer's data before it lands. The kit's skeleton keeps the epoch in a device word it advances
once per launch (csrc/include/cuco/kit/stream_sync.cuh). The text check here is conservative; the GPU check is
`benchmarks/graph_replay.py` (docs/measuring.md).
"""

from __future__ import annotations

import re

#: Text that only a host-side epoch would need, each with the reason it is refused.
FORBIDDEN = {
    r"st->epoch\b(?!_at)": "a host-side epoch in the candidate's state",
    r"st->prev_epoch\b|st->prev\b": "a host-side copy of the previous launch's epoch",
    r"ctx->iteration": "an epoch derived from the host's iteration count",
    r"\bepoch_of\s*\(": "an epoch derived from the host's iteration count",
    r"cuStreamWaitValue|cuStreamWriteValue|wait_value32|write_value32": "a stream memory op with a host value",
    # the fast path's runtime (src/cuco/fastpath/cuda/lsa_runtime.cuh) numbers collectives and p2p messages on the
    # host and passes the number to its kernels (measured: KV transfer's fast path fails replay 1 at W = 2)
    r"\+\+\s*s->seq\b|\+\+\s*\(\s*p\.isSend": "a collective sequence number counted on the host (the fast path's runtime)",
}

#: A kernel parameter that carries an epoch by value (a graph would freeze it).
_KERNEL = re.compile(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s*)?(?:void\s+)?(\w+)\s*\(([^)]*)\)")
_EPOCH_BY_VALUE = re.compile(r"\b(?:u?int(?:32|64)_t|unsigned(?:\s+(?:int|long(?:\s+long)?))?)\s+\w*epoch\w*\s*$")


def strip_comments(code: str) -> str:
    """`code` without its C and C++ comments (the check reads code, not what comments name)."""
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return re.sub(r"//[^\n]*", "", code)


def host_epoch_problems(code: str) -> list[str]:
    """Why `code` (a candidate's CUDA text) would freeze its flag epoch in a CUDA graph; empty when it would not."""
    text = strip_comments(code)
    problems = [f"{why}: {m.group(0)!r}" for pattern, why in FORBIDDEN.items() for m in re.finditer(pattern, text)]
    for m in _KERNEL.finditer(text):
        for param in m.group(2).split(","):
            if _EPOCH_BY_VALUE.search(param.strip()):
                problems.append(f"kernel {m.group(1)} takes an epoch by value: {param.strip()!r}")
    return problems
