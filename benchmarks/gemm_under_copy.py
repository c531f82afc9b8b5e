"""How much a GEMM slows down while copy engines move the other ranks' rows into its A: the interference behind
GEMM+AllGather's overlap efficiency, measured apart from any cuco candidate.

    python3 benchmarks/gemm_under_copy.py --world 4 --json OUT.json [--shapes "M,K,N;..."] [--phase-s 1.0]

One process drives W GPUs. On every GPU d at once: the full GEMM C = A_full . B (torch.matmul, cuBLASLt); the copies
of every other GPU's M/W rows into A_full as plain cudaMemcpyAsync calls (copy engines over NVLink, peer access on),
in each of COPY_MODES; the GEMM beside each mode's copies (the GEMM's own CUDA events, and the pair's wall time); and
the GEMM split by rank's rows, own rows first, each remote block waiting for its copy (the copy-engine stream_overlap
point in torch terms: `overlap_over_gemm` = its time / the GEMM alone, `split_cost` = the split GEMM alone / whole).
`pull` is what the workload's copy-engine points issue: the destination's side stream pulls peer after peer, the
next rank first. (torch's cross-device `copy_` runs on the source's current stream and syncs the two devices' streams,
so it measures something else: the copies here bypass it.) Each phase repeats rounds for at least --phase-s seconds,
long enough for NVML's power reading to cover it; figures are medians over rounds, max over GPUs, in ms, with each
GPU's SM clock and power sampled every 10 ms. `slowdown` = GEMM beside the copies / GEMM alone: 1.0 means the copy
engines cost the GEMM nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time

SHAPES = "8192,8192,8192;16384,8192,3584;32768,8192,8192;12288,5120,5120;2048,8192,28672"
#: pull: the destination's one side stream pulls each peer in turn (the workload's copy-engine points);
#: pull_per_peer: one stream per peer, so the pulls run at once; push: the source's side stream stores its rows into
#: every peer in turn (the workload's split_put_wait point).
COPY_MODES = ("pull", "pull_per_peer", "push")
WORKLOAD_MODE = "pull"
HOLD_CYCLES = 2_000_000  # GPU clock cycles each round's start is held back (about 1 ms at H100 clocks)


def copy_plan(mode: str, world: int) -> list[tuple[int, int, int, int]]:
    """The copies of one round as (issuing GPU, its stream index, destination GPU, block = source GPU): every GPU's
    block reaches every other GPU exactly once; each issuer starts at the next rank so that no GPU is read by all."""
    if mode not in COPY_MODES:
        raise ValueError(f"copy mode {mode!r}: one of {', '.join(COPY_MODES)}")
    plan = []
    for d in range(world):
        for s in range(1, world):
            p = (d + s) % world
            if mode == "push":
                plan.append((d, 0, p, d))
            else:
                plan.append((d, s - 1 if mode == "pull_per_peer" else 0, d, p))
    return plan


def summarize(per_gpu: list[list[float]]) -> dict[str, float]:
    """The median of each GPU's rounds, then the slowest GPU's; `spread` is that GPU's (max - min) / median."""
    medians = [statistics.median(xs) for xs in per_gpu]
    worst = max(range(len(medians)), key=lambda i: medians[i])
    xs = per_gpu[worst]
    return {"ms": medians[worst], "spread": (max(xs) - min(xs)) / medians[worst] if medians[worst] else 0.0}


class Sampler:
    """SM clock (MHz) and power (W) of the GPUs, sampled every 10 ms while active; empty where NVML is missing.
    Power is NVML's instantaneous field where the driver has it, else its averaged reading (`power_source`)."""

    def __init__(self, devices: list[int]):
        self.samples: dict[int, list[tuple[int, float]]] = {d: [] for d in devices}
        self.power_source = None
        self._stop = threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml, self._handles = pynvml, {d: pynvml.nvmlDeviceGetHandleByIndex(d) for d in devices}
            self.power_source = "instant" if self._instant(next(iter(self._handles.values()))) else "average"
        except Exception:  # no NVML binding here: the figures stand without clocks
            self._nvml, self._handles = None, {}
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _instant(self, handle) -> float | None:
        n = self._nvml
        field = getattr(n, "NVML_FI_DEV_POWER_INSTANT", None)
        if field is None:
            return None
        try:
            value = n.nvmlDeviceGetFieldValues(handle, [field])[0]
        except Exception:
            return None
        return value.value.uiVal / 1000.0 if value.nvmlReturn == 0 else None

    def _power(self, handle) -> float:
        if self.power_source == "instant":
            watts = self._instant(handle)
            if watts is not None:
                return watts
        return self._nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0

    def _loop(self) -> None:
        n = self._nvml
        while not self._stop.wait(0.01):
            for d, h in self._handles.items():
                self.samples[d].append((n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM), self._power(h)))

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, object] | None:
        every = [s for xs in self.samples.values() for s in xs]
        if not every:
            return None
        return {"samples": len(every), "power_source": self.power_source,
                "sm_mhz_median": statistics.median(c for c, _ in every), "sm_mhz_min": min(c for c, _ in every),
                "power_w_median": statistics.median(p for _, p in every), "power_w_max": max(p for _, p in every)}


def enable_peer_access(cupy, world: int) -> None:
    """Peer access between every pair, so that the copies go GPU to GPU over NVLink, not through the host."""
    rt = cupy.cuda.runtime
    for d in range(world):
        with cupy.cuda.Device(d):
            for p in range(world):
                if p != d and rt.deviceCanAccessPeer(d, p):
                    try:
                        rt.deviceEnablePeerAccess(p)
                    except rt.CUDARuntimeError as e:  # already enabled (torch may have done it)
                        if "PeerAccessAlreadyEnabled" not in str(e):
                            raise


def measure(torch, cupy, world: int, m: int, k: int, n: int, phase_s: float) -> dict[str, object]:
    devs = list(range(world))
    rows = m // world
    block = rows * k * 2
    a_full = [torch.randn(m, k, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    b = [torch.randn(k, n, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    c = [torch.empty(m, n, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    shard = [torch.randn(rows, k, device=f"cuda:{d}", dtype=torch.bfloat16) for d in devs]
    main = [torch.cuda.Stream(device=d) for d in devs]
    side = [[torch.cuda.Stream(device=d) for _ in range(max(world - 1, 1))] for d in devs]
    memcpy = cupy.cuda.runtime.memcpyAsync

    def round_(gemm: str | None, mode: str | None) -> tuple[list[float], list[float]]:
        """One round on every GPU: `gemm` None, "full" (one GEMM over A_full) or "split" (the rows of each rank in
        turn, own rows first, each remote block's GEMM waiting for its copy: the copy-engine stream_overlap point);
        `mode` the copies' COPY_MODES entry or None. Returns each GPU's GEMM-stream and whole-round ms."""
        ev = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in devs]
        done = [[torch.cuda.Event() for _ in side[d]] for d in devs]
        arrived = {}  # (destination, block) -> event after that copy, on its issuing stream
        for d in devs:
            torch.cuda.synchronize(d)
        for d in devs:  # every stream that copies starts after its GPU's start event
            with torch.cuda.device(d):
                # the start waits behind a spin of about a millisecond, so the host's enqueueing of this round's
                # copies and GEMMs on every GPU is done before it: no GPU's interval holds host issue time
                with torch.cuda.stream(main[d]):
                    torch.cuda._sleep(HOLD_CYCLES)
                ev[d][0].record(main[d])
                for s in side[d]:
                    s.wait_event(ev[d][0])
        for issuer, si, dst, src in copy_plan(mode, world) if mode else ():
            with torch.cuda.device(issuer):
                stream = side[issuer][si]
                memcpy(a_full[dst].data_ptr() + src * block, shard[src].data_ptr(), block, 3, stream.cuda_stream)
                arrived[dst, src] = torch.cuda.Event()
                arrived[dst, src].record(stream)
        for d in devs:
            with torch.cuda.device(d), torch.cuda.stream(main[d]):
                if gemm == "full":
                    torch.matmul(a_full[d], b[d], out=c[d])
                elif gemm == "split":
                    for p in ((d + s) % world for s in range(world)):
                        if (d, p) in arrived:
                            main[d].wait_event(arrived[d, p])
                        torch.matmul(a_full[d][p * rows:(p + 1) * rows], b[d], out=c[d][p * rows:(p + 1) * rows])
                ev[d][1].record(main[d])
                for s, e in zip(side[d], done[d]):
                    e.record(s)
                    main[d].wait_event(e)
                ev[d][2].record(main[d])
        for d in devs:
            torch.cuda.synchronize(d)
        return [ev[d][0].elapsed_time(ev[d][1]) for d in devs], [ev[d][0].elapsed_time(ev[d][2]) for d in devs]

    def phase(gemm: str | None, mode: str | None) -> dict[str, object]:
        for _ in range(3):
            round_(gemm, mode)  # warm-up: cuBLASLt's heuristic, peer mappings, clocks
        own, both = [[] for _ in devs], [[] for _ in devs]
        start = time.perf_counter()
        with Sampler(devs) as sampler:
            while len(own[0]) < 5 or time.perf_counter() - start < phase_s:
                g, t = round_(gemm, mode)
                for d in devs:
                    own[d].append(g[d])
                    both[d].append(t[d])
        return {"rounds": len(own[0]), "gemm_ms": summarize(own) if gemm else None, "total": summarize(both),
                "nvml": sampler.summary()}

    out: dict[str, object] = {"M": m, "K": k, "N": n, "world": world, "copy_bytes_per_gpu": (world - 1) * block,
                              "gemm_alone": phase("full", None), "split_alone": phase("split", None), "modes": {}}
    alone = out["gemm_alone"]["gemm_ms"]["ms"]
    out["split_cost"] = out["split_alone"]["gemm_ms"]["ms"] / alone
    for mode in COPY_MODES:
        copy_alone, beside, overlap = phase(None, mode), phase("full", mode), phase("split", mode)
        copy_ms = copy_alone["total"]["ms"]
        out["modes"][mode] = {"copy_alone": copy_alone, "gemm_with_copy": beside, "split_overlap": overlap,
                              "slowdown": beside["gemm_ms"]["ms"] / alone,
                              "copy_gbps_per_gpu": out["copy_bytes_per_gpu"] / (copy_ms * 1e6) if copy_ms else None,
                              # the point's time over its bound (the GEMM alone): what the overlap leaves exposed
                              "overlap_over_gemm": overlap["total"]["ms"] / alone}
    # the workload's own way, as the top-level figures
    for key in ("slowdown", "copy_gbps_per_gpu", "overlap_over_gemm"):
        out[key] = out["modes"][WORKLOAD_MODE][key]
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
    ap.add_argument("--phase-s", type=float, default=1.0, help="seconds each phase repeats its rounds at least")
    ap.add_argument("--json", required=True)
    args = ap.parse_args()
    shapes = parse_shapes(args.shapes)
    bad = [s for s in shapes if s[0] % args.world]
    if bad:
        raise SystemExit(f"M must be a multiple of --world {args.world}: {bad}")
    if args.world < 2:
        raise SystemExit(f"--world {args.world}: the copies need 2 GPUs or more")
    import cupy
    import torch

    if torch.cuda.device_count() < args.world:
        raise SystemExit(f"--world {args.world} needs {args.world} GPUs; this machine has {torch.cuda.device_count()}")
    enable_peer_access(cupy, args.world)
    rows = []
    for m, k, n in shapes:
        rows.append(measure(torch, cupy, args.world, m, k, n, args.phase_s))
        r = rows[-1]
        print(f"{m},{k},{n} W={args.world}: GEMM {r['gemm_alone']['gemm_ms']['ms']:.3f} ms alone, split by rank "
              f"x{r['split_cost']:.3f}; " + "; ".join(
            f"{mode}: copies {x['copy_alone']['total']['ms']:.3f} ms ({x['copy_gbps_per_gpu']:.0f} GB/s into each "
            f"GPU), GEMM beside them {x['gemm_with_copy']['gemm_ms']['ms']:.3f} (x{x['slowdown']:.3f}), split "
            f"GEMM waiting on them x{x['overlap_over_gemm']:.3f}"
            for mode, x in r["modes"].items()), flush=True)
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cupy": cupy.__version__, "copy_modes": list(COPY_MODES), "workload_mode": WORKLOAD_MODE,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}
    with open(args.json, "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
