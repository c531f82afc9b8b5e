"""The torch ring-attention anchor (benchmarks/torch_ring_attention.py) computes attention over the whole sequence:
run on the CPU with gloo at W = 2 and 4, causal (zigzag) and full, GQA, against single-process attention."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, cases: list, errors) -> None:
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(BENCH))
    import torch_ring_attention as ring

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for dims in cases:
            errors.put((dims, ring.check(torch, dist, dims, torch.device("cpu"), torch.float32, "auto")))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4], ids=["w2", "w4"])
def test_ring_matches_whole_sequence_attention(world):
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    cases = [(2 * world * 16, 4, 2, 32, 1), (world * 24, 4, 4, 16, 0)]   # causal GQA zigzag; full MHA
    errors = mp.Queue()
    port = _free_port()
    procs = [mp.Process(target=_rank, args=(r, world, port, cases, errors))
             for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    got = [errors.get(timeout=5) for _ in range(world * len(cases))]
    assert len(got) == world * len(cases)
    assert max(e for _, e in got) < 1e-5, got

