"""The torch MoE-layer anchor (benchmarks/torch_moe_layer.py) computes the layer: run on the CPU with gloo at
W = 2 and 4 with cuco's skewed routing, every token's output against the gated sum of its experts' FFNs."""

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
    import torch_moe_layer as moe

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for dims in cases:
            errors.put((dims, moe.check(torch, dist, dims, torch.device("cpu"), torch.float32)))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4], ids=["w2", "w4"])
def test_layer_matches_the_gated_sum_of_expert_ffns(world):
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    cases = [(32, 16, 8, 2 * world, 2, 3), (24, 16, 8, world, 1, 2)]   # T, H, I, E, top-K, skew
    errors = mp.Queue()
    port = _free_port()
    procs = [mp.Process(target=_rank, args=(r, world, port, cases, errors)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    got = [errors.get(timeout=5) for _ in range(world * len(cases))]
    assert max(e for _, e in got) < 1e-5, got
