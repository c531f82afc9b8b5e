"""How much a GEMM slows down while copy engines pull the other ranks' rows into its A: the interference behind
GEMM+AllGather's overlap efficiency, measured apart from any cuco candidate.

    python3 benchmarks/gemm_under_copy.py --world 4 --json OUT.json [--shapes "M,K,N;..."]

One process drives W GPUs. On every GPU d at once: the full GEMM C = A_full . B (torch.matmul, cuBLASLt), the
copies of every other GPU's M/W rows into A_full (device-to-device copies over NVLink, copy engines, on a side
stream), and both together (the GEMM's own CUDA events, and the pair's wall time). Figures are medians over --reps
rounds, max over GPUs, in ms; where NVML answers, each GPU's SM clock and power are sampled during the rounds.
`slowdown` = GEMM beside the copies / GEMM alone: 1.0 means the copy engines cost the GEMM nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading

SHAPES = "8192,8192,8192;16384,8192,3584;32768,8192,8192;12288,5120,5120;2048,8192,28672"


def summarize(per_gpu: list[list[float]]) -> dict[str, float]:
    """The median of each GPU's rounds, then the slowest GPU's; `spread` is that GPU's (max - min) / median."""
    medians = [statistics.median(xs) for xs in per_gpu]
    worst = max(range(len(medians)), key=lambda i: medians[i])
    xs = per_gpu[worst]
    return {"ms": medians[worst], "spread": (max(xs) - min(xs)) / medians[worst] if medians[worst] else 0.0}


class Sampler:
    """SM clock (MHz) and power (W) of the GPUs, sampled every 10 ms while active; empty where NVML is missing."""

    def __init__(self, devices: list[int]):
        self.samples: dict[int, list[tuple[int, float]]] = {d: [] for d in devices}
        self._stop = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handles = pynvml, {d: pynvml.nvmlDeviceGetHandleByIndex(d) for d in devices}
        except Exception:  # no NVML binding here: the figures stand without clocks
            self._nvml, self._handles = None, {}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        n = self._nvml
        while not self._stop.wait(0.01):
            for d, h in self._handles.items():
                self.samples[d].append((n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),
                                        n.nvmlDeviceGetPowerUsage(h) / 1000.0))

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float] | None:
        every = [s for xs in self.samples.values() for s in xs]
        if not every:
            return None
        return {"sm_mhz_median": statistics.median(c for c, _ in every), "sm_mhz_min": min(c for c, _ in every),
                "power_w_median": statistics.median(p for _, p in every), "power_w_max": max(p for _, p in every)}


def measure(torch, world: int, m: int, k: int, n: int, reps: int) -> dict[str, object]:
    devs = list(range(world))
    rows = m // world
    a_full = [torch.randn(m, k, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    b = [torch.randn(k, n, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    c = [torch.empty(m, n, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    shard = [torch.randn(rows, k, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    main = [torch.cuda.Stream(device=d) for d in devs]
    side = [torch.cuda.Stream(device=d) for d in devs]

    def round_(gemm: bool, copy: bool) -> tuple[list[float], list[float]]:
        ev = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in devs]
        for d in devs:
            torch.cuda.synchronize(d)
        for d in devs:
            with torch.cuda.device(d):
                ev[d][0].record(main[d])
                side[d].wait_event(ev[d][0])
                if copy:
                    with torch.cuda.stream(side[d]):
                        for i in range(1, world):  # each GPU pulls from the next ones on: no peer read by all
                            p = (d + i) % world
                            a_full[d][p * rows:(p + 1) * rows].copy_(shard[p], non_blocking=True)
                if gemm:
                    with torch.cuda.stream(main[d]):
                        torch.matmul(a_full[d], b[d], out=c[d])
                ev[d][1].record(main[d])
                ev[d][2].record(side[d])
                main[d].wait_event(ev[d][2])
                ev[d][3].record(main[d])
        for d in devs:
            torch.cuda.synchronize(d)
        return [ev[d][0].elapsed_time(ev[d][1]) for d in devs], [ev[d][0].elapsed_time(ev[d][3]) for d in devs]

    out: dict[str, object] = {"M": m, "K": k, "N": n, "world": world,
                              "copy_bytes_per_gpu": (world - 1) * rows * k * 2}
    for name, gemm, copy in (("gemm_alone", True, False), ("copy_alone", False, True), ("gemm_with_copy", True, True)):
        for _ in range(3):
            round_(gemm, copy)  # warm-up: cuBLASLt's heuristic, peer mappings, clocks
        own, both = [[] for _ in devs], [[] for _ in devs]
        with Sampler(devs) as sampler:
            for _ in range(reps):
                g, t = round_(gemm, copy)
                for d in devs:
                    own[d].append(g[d])
                    both[d].append(t[d])
        out[name] = {"gemm_ms": summarize(own) if gemm else None, "total": summarize(both), "nvml": sampler.summary()}
    alone, beside = out["gemm_alone"]["gemm_ms"]["ms"], out["gemm_with_copy"]["gemm_ms"]["ms"]
    out["slowdown"] = beside / alone
    copy_ms = out["copy_alone"]["total"]["ms"]
    out["copy_gbps_per_gpu"] = out["copy_bytes_per_gpu"] / (copy_ms * 1e6) if copy_ms else None
    return out


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for s in (x for x in text.split(";") if x.strip()):
        dims = tuple(int(v) for v in s.split(","))
        if len(dims) != 3 or min(dims) <= 0:
            raise SystemExit(f"--shapes takes 'M,K,N;...' with positive sizes, got {s!r}")
        shapes.append(dims)
    return shapes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--shapes", default=SHAPES, help="';'-separated M,K,N list (M a multiple of --world)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes)
    bad = [s for s in shapes if s[0] % args.world]
    if bad:
        raise SystemExit(f"M must be a multiple of --world {args.world}: {bad}")
    import torch

    if torch.cuda.device_count() < args.world:
        raise SystemExit(f"--world {args.world} needs {args.world} GPUs; this machine has {torch.cuda.device_count()}")
    rows = []
    for m, k, n in shapes:
        rows.append(measure(torch, args.world, m, k, n, args.reps))
        r = rows[-1]
        print(f"{m},{k},{n} W={args.world}: GEMM {r['gemm_alone']['gemm_ms']['ms']:.3f} ms alone, "
              f"{r['gemm_with_copy']['gemm_ms']['ms']:.3f} beside the copies (x{r['slowdown']:.3f}); copies alone "
              f"{r['copy_alone']['total']['ms']:.3f} ms ({r['copy_gbps_per_gpu']:.0f} GB/s into each GPU)", flush=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "rows": rows}
    with open(args.json, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
