"""Measured peer-to-peer copy bandwidth between the GPUs of this host (copy engines, torch's device-to-device
copies over NVLink/PCIe), recorded beside every W >= 2 result: one peer at a time, and all peers at once.

    python3 benchmarks/p2p_bandwidth.py --world 4 --json OUT.json

Figures are GB/s (1e9 bytes/s) of bytes landed at the destination, median of --reps timed copies after warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _timed(torch, copies, reps: int) -> float:
    """Median seconds of one round of `copies` [(dst, src)], all issued at once, each on its source's stream; the
    repeats' spread ((max - min) / median) is kept in SPREADS under the round's order of call."""
    streams = {src.device.index: torch.cuda.Stream(device=src.device) for _, src in copies}
    times = []
    for i in range(reps + 3):
        for d in {t.device.index for pair in copies for t in pair}:
            torch.cuda.synchronize(d)
        t0 = time.perf_counter()
        for dst, src in copies:
            with torch.cuda.stream(streams[src.device.index]):
                dst.copy_(src, non_blocking=True)
        for d in {t.device.index for pair in copies for t in pair}:
            torch.cuda.synchronize(d)
        if i >= 3:
            times.append(time.perf_counter() - t0)
    SPREADS.append((max(times) - min(times)) / statistics.median(times))
    return statistics.median(times)


SPREADS: list[float] = []


def measure(world: int, mib: int = 256, reps: int = 10) -> dict:
    import torch

    SPREADS.clear()
    n = mib << 20
    bufs = [torch.empty(n, dtype=torch.uint8, device=f"cuda:{d}") for d in range(world)]
    dsts = [[torch.empty(n, dtype=torch.uint8, device=f"cuda:{d}") for _ in range(world)] for d in range(world)]
    one = {}
    for a in range(world):
        for b in range(world):
            if a != b:
                one[f"{a}->{b}"] = n / _timed(torch, [(dsts[b][a], bufs[a])], reps) / 1e9
    ring = [(dsts[(a + 1) % world][a], bufs[a]) for a in range(world)]
    every = [(dsts[b][a], bufs[a]) for a in range(world) for b in range(world) if a != b]
    into0 = [(dsts[0][a], bufs[a]) for a in range(1, world)]
    out = {"device": torch.cuda.get_device_name(0), "gpus": world, "torch": torch.__version__, "bytes_per_copy": n,
           "reps": reps, "one_peer_gbps": one}
    if world > 1:
        t = _timed(torch, ring, reps)
        out["ring_all_at_once_gbps_per_rank"] = n / t / 1e9
        t = _timed(torch, every, reps)
        out["all_pairs_at_once_gbps_per_rank_in"] = (world - 1) * n / t / 1e9
        t = _timed(torch, into0, reps)
        out["all_peers_into_gpu0_gbps"] = (world - 1) * n / t / 1e9
        out["one_peer_median_gbps"] = statistics.median(one.values())
    out["spread"] = max(SPREADS) if SPREADS else None   # the widest of every timed round's repeats
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    res = measure(args.world, args.mib)
    with open(args.json, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps({k: v for k, v in res.items() if k != "one_peer_gbps"}, indent=1))


if __name__ == "__main__":
    main()
