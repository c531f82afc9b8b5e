"""Ring attention's waiting FMHA (cuco_attn_suffix_wait_bf16) case by case, each in a process of its own under a
timeout, so one that hangs names itself and the rest still run. One GPU.

    PYTHONPATH=src python3 benchmarks/probes/fmha_arrival/waiting_call.py [--d 64] [--timeout 60]

Cases: the plain suffix call; the waiting call without flags (all SMs, then capped); with its flags already up;
with its keys landing late from another stream, that stream's work enqueued before the call or after it; and the
control (late keys, no flags: must differ). Each prints one JSON line: rc, whether O and the LSE are the plain
call's bit for bit, whether O is finite; or the error (a hang is a timeout).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path

CASES = ("plain", "no_flags_all_sms", "no_flags_capped", "flags_up", "late_side_first", "late_call_first",
         "late_no_flags")


# the compute library's loader and its arrival struct: the gather probe's (benchmarks/attention_gather_compute.py)
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from attention_gather_compute import COMM_CTAS, Arrival, load_library  # noqa: E402  (a benchmark script)


def run_case(case: str, d: int) -> str:
    import torch

    lib = load_library()
    half, hq, hkv = 256, 8, 2
    torch.manual_seed(d)
    q = torch.randn(half, hq, d, device="cuda").bfloat16()
    k, v = (torch.randn(4 * half, hkv, d, device="cuda").bfloat16() for _ in range(2))
    sms = torch.cuda.get_device_properties(0).multi_processor_count - COMM_CTAS
    epoch = torch.tensor([7], device="cuda", dtype=torch.int32)
    flags = torch.zeros(2, device="cuda", dtype=torch.int32)

    def call(kk, vv, arrival, sm_count, wait=True):
        o = torch.full(q.shape, float("nan"), device="cuda", dtype=torch.bfloat16)
        lse = torch.full((hq, half), float("nan"), device="cuda")
        args = (q.data_ptr(), kk.data_ptr(), vv.data_ptr(), o.data_ptr(), lse.data_ptr(), half, kk.shape[0], hq, hkv,
                d, half)
        s = torch.cuda.current_stream().cuda_stream
        rc = (lib.cuco_attn_suffix_bf16(*args, s) if not wait else
              lib.cuco_attn_suffix_wait_bf16(*args, ctypes.byref(arrival) if arrival else None, sm_count, s))
        return rc, o, lse

    rc, want_o, want_lse = call(k, v, None, 0, wait=False)
    torch.cuda.synchronize()
    if case == "plain":
        return json.dumps({"rc": rc, "same": True, "finite": bool(torch.isfinite(want_o.float()).all())})
    arrival = Arrival(flags.data_ptr(), epoch.data_ptr(), 1, half, 0, 2, 1)
    same = lambda o, lse: torch.equal(o.view(torch.int16), want_o.view(torch.int16)) and torch.equal(lse, want_lse)
    if case in ("no_flags_all_sms", "no_flags_capped", "flags_up"):
        flags.fill_(7 if case == "flags_up" else 0)
        rc, o, lse = call(k, v, arrival if case == "flags_up" else None, 0 if case == "no_flags_all_sms" else sms)
        torch.cuda.synchronize()
        return json.dumps({"rc": rc, "same": same(o, lse), "finite": bool(torch.isfinite(o.float()).all())})
    kl, vl = torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
    side = torch.cuda.Stream()

    def land(cycles):
        with torch.cuda.stream(side):
            for src, chunks in {0: (0, 3), 1: (1, 2)}.items():
                torch.cuda._sleep(cycles)
                for c in chunks:
                    rows = slice(c * half, (c + 1) * half)
                    kl[rows].copy_(k[rows]), vl[rows].copy_(v[rows])
                flags[src:src + 1].fill_(7)

    # Load every kernel before the timed order (CUDA loads a kernel at its first launch, and a load waits for the
    # work in flight: the waiting call's first launch after the side work would wait for the keys to land, and the
    # side kernels' first launch behind a waiting call would hang): the waiting call once with its flags up, the
    # side stream's work once.
    flags.fill_(7)
    call(k, v, arrival, sms)
    land(1000)
    torch.cuda.synchronize()
    kl.fill_(float("nan")), vl.fill_(float("nan")), flags.zero_()
    torch.cuda.synchronize()
    given = None if case == "late_no_flags" else arrival
    if case in ("late_call_first", "late_no_flags"):  # the control reads the keys at once: NaN while side sleeps
        rc, o, lse = call(kl, vl, given, sms)
        land(20_000_000)
    else:
        land(20_000_000)
        rc, o, lse = call(kl, vl, given, sms)
    torch.cuda.synchronize()
    return json.dumps({"rc": rc, "same": same(o, lse), "finite": bool(torch.isfinite(o.float()).all())})


def run_isolated(case: str, d: int, timeout: float) -> dict:
    """One case in a process of its own: its result, or {"error": ...} for a failure or a timeout (a hang)."""
    try:
        out = subprocess.run([sys.executable, __file__, "--case", case, "--d", str(d)], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer in {timeout} s (a hang)"}
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        return {"error": f"exit {out.returncode}: {' | '.join(out.stderr.strip().splitlines()[-2:])}"}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated, of " + ", ".join(CASES))
    ap.add_argument("--case", choices=CASES, help="run this case here (the driver runs each in a subprocess)")
    a = ap.parse_args()
    if a.case:
        print(run_case(a.case, a.d), flush=True)
        return
    load_library()  # build once, outside the cases' timeouts
    for case in a.cases.split(","):
        print(json.dumps({"d": a.d, "case": case, **run_isolated(case, a.d, a.timeout)}), flush=True)


if __name__ == "__main__":
    main()
