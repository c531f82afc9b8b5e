"""The torch anchors of the multi-GPU benchmarks compute what they claim: run on the CPU with gloo at W = 2 and 4
(one set of processes per W, every anchor in it):
- ring attention (benchmarks/torch_ring_attention.py), causal zigzag GQA and full MHA, against whole-sequence
  attention;
- the MoE layer (benchmarks/torch_moe_layer.py) with cuco's skewed routing, against each token's gated sum of its
  experts' FFNs;
- KV transfer (benchmarks/torch_kv_transfer.py), both schedules: every decode rank's paged cache holds, page by page
  through its block table, the K/V its prefill rank computed."""

from __future__ import annotations

import os
import socket
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
KV_DIMS, KV_HIDDEN, KV_MLP = (64, 256, 3), 64, 96   # S, KV (2 KV heads), L; a small stack


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kv_errors(torch, dist, kvt) -> list[tuple[str, float]]:
    out = []
    for schedule in ("layered", "after"):
        fn, held = kvt.run_pair(torch, dist, KV_DIMS, torch.device("cpu"), torch.float32, schedule, KV_HIDDEN, KV_MLP)
        fn()
        if dist.get_rank() % 2:
            cache, table = held
            s, kv, layers = KV_DIMS
            hq = 32 // (kv // kvt.HEAD_DIM) * (kv // kvt.HEAD_DIM)
            stack = kvt.Stack(torch, s, kv, layers, KV_HIDDEN, KV_MLP, hq, torch.device("cpu"), torch.float32)
            x, err = stack.x0, 0.0
            for layer in range(layers):
                x, want = stack.layer(x)
                err = max(err, float((cache[layer][:, table].reshape(2, s, kv) - want).abs().max()))
            out.append((f"kv {schedule}", err))
    return out


def _rank(rank: int, world: int, port: int, out) -> None:
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(BENCH))
    import torch_kv_transfer as kvt
    import torch_moe_layer as moe
    import torch_ring_attention as ring

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    cpu, f32 = torch.device("cpu"), torch.float32
    try:
        for dims in [(2 * world * 16, 4, 2, 32, 1), (world * 24, 4, 4, 16, 0)]:   # S, HQ, HKV, D, CAUSAL
            out.put((rank, f"ring {dims}", ring.check(torch, dist, dims, cpu, f32, "auto")))
        # the breakdown's two chains: the compute one keeps the local block (its output differs from the ring's,
        # its shape does not); the communication one attends nothing and passes every block round
        dims = (2 * world * 16, 4, 2, 32, 1)
        _, (q, k, v) = ring.local_inputs(torch, dims, rank, world, cpu, f32)
        o, _ = ring.ring_attention(torch, dist, q, (k, v), True, send=False)
        full, _ = ring.ring_attention(torch, dist, q, (k, v), True)
        passed = ring.ring_attention(torch, dist, q, (k, v), True, attend_blocks=False)
        shape_ok = o.shape == full.shape and passed == (None, None)
        out.put((rank, "ring breakdown", 0.0 if shape_ok and (world == 1 or not torch.equal(o, full)) else 1.0))
        for dims in [(32, 16, 8, 2 * world, 2, 3), (24, 16, 8, world, 1, 2)]:   # T, H, I, E, top-K, skew
            out.put((rank, f"moe {dims}", moe.check(torch, dist, dims, cpu, f32)))
        # the breakdown's two chains: without the FFN every token gets back its own rows, gated; the FFN alone
        # is what the layer ran on the rows it received
        layer, x, (ex, gates) = moe.make(torch, dist, (32, 16, 8, 2 * world, 2, 3), cpu, f32)
        passed = layer(x, ffn=False)
        want = x * torch.from_numpy(gates).sum(1, keepdim=True).float()
        full = layer(x)
        recv, perm, per_expert = layer.received
        ffn = layer.ffn_alone()
        same = ffn.shape == (recv.shape[0], x.shape[1]) and full.shape == passed.shape
        out.put((rank, "moe breakdown", float((passed - want).abs().max()) if same else 1.0))
        for name, err in _kv_errors(torch, dist, kvt):
            out.put((rank, name, err))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 4], ids=["w2", "w4"])
def test_every_anchor_computes_what_it_claims(world):
    torch = pytest.importorskip("torch")
    mp = torch.multiprocessing.get_context("spawn")
    out = mp.Queue()
    port = _free_port()
    procs = [mp.Process(target=_rank, args=(r, world, port, out)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    got = [out.get(timeout=5) for _ in range(world * 6 + world // 2 * 2)]
    names = {n for _, n, _ in got}
    assert {n.split()[0] for n in names} == {"ring", "moe", "kv"} and {"kv layered", "kv after"} <= names
    assert max(e for _, n, e in got if not n.startswith("kv")) < 1e-5, got
    assert max(e for _, n, e in got if n.startswith("kv")) == 0.0, got   # the cache moves bit for bit


def test_kv_anchor_attention_is_causal_gqa_on_a_fused_kernel():
    """The KV anchor's attention (heads repeated, math backend excluded) equals causal GQA written out."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(BENCH))
    import torch_kv_transfer as kvt

    gen = torch.Generator().manual_seed(3)
    hq, hkv, s, d = 8, 2, 64, 32
    q, k, v = (torch.randn(h, s, d, generator=gen) for h in (hq, hkv, hkv))
    stack = kvt.Stack.__new__(kvt.Stack)
    stack.torch = torch
    got = stack.attention(q, k, v)
    kr, vr = k.repeat_interleave(hq // hkv, 0), v.repeat_interleave(hq // hkv, 0)
    scores = (q @ kr.transpose(1, 2)) / d ** 0.5
    scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    want = torch.softmax(scores, -1) @ vr
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)


def test_kv_anchor_layered_schedule_sends_each_layers_kv_before_that_layers_attention():
    """Layer-pipelined as the issue asks: layer l's K/V goes out right after its projection, so its transfer runs
    under layer l's own attention and MLP; `after` sends nothing until the whole prefill is done."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(BENCH))
    import torch_kv_transfer as kvt

    events: list[str] = []

    class RecordingDist:  # a unit-test stand-in for torch.distributed: records when each send is posted
        @staticmethod
        def isend(t, peer):
            events.append("send")
            return type("Req", (), {"wait": staticmethod(lambda: None)})()

    stack = kvt.Stack(torch, s=32, kv=256, layers=3, hidden=256, mlp=512, hq=4, device="cpu", dtype=torch.float32)
    stack.attention = lambda q, k, v: (events.append("attention"), q)[1]
    for schedule, want in (("layered", ["send", "attention"] * 3), ("after", ["attention"] * 3 + ["send"] * 3)):
        events.clear()
        sent = kvt.prefill(torch, RecordingDist, stack, peer=1, schedule=schedule)
        assert events == want and len(sent) == 3 and sent[0].shape == (2, 32, 256)


def _combine():
    from bench_scripts import bench_module

    return bench_module("torch_shapes_run").combine


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=7))
def test_a_rows_times_are_the_medians_of_its_repeats_and_its_spread_their_range(times):
    combine = _combine()
    row = combine([{"shape": "s", "torch_ms": t, "torch_ms_q": 2 * t, "note": i} for i, t in enumerate(times)])
    assert row["torch_ms"] == statistics.median(times) and row["repeats"] == len(times)
    assert row["repeats_ms"]["torch_ms"] == times and row["note"] == len(times) - 1
    if len(times) == 1:
        assert row["spread"] is None
    else:
        assert row["spread"] == pytest.approx((max(times) - min(times)) / statistics.median(times))


def test_a_repeat_that_failed_makes_the_row_that_failure():
    combine = _combine()
    row = combine([{"shape": "s", "torch_ms": 1.0}, {"shape": "s", "error": "RuntimeError: out of memory"}])
    assert row == {"shape": "s", "error": "RuntimeError: out of memory"}


def test_a_check_holds_for_a_row_only_if_it_held_in_every_repeat():
    combine = _combine()
    row = combine([{"torch_ms": 1.0, "matches": True}, {"torch_ms": 1.1, "matches": False},
                   {"torch_ms": 1.0, "matches": True}])
    assert row["matches"] is False and row["torch_ms"] == 1.0
