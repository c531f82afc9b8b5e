"""Ring attention's waiting FMHA (cuco_attn_suffix_wait_bf16) case by case, each in a process of its own under a
timeout, so one that hangs names itself and the rest still run. One GPU.

    PYTHONPATH=src python3 benchmarks/probes/fmha_arrival/waiting_call.py [--d 64] [--timeout 60]

Cases: the plain suffix call; the waiting call without flags (all SMs, then capped); with its flags already up;
with its keys landing late from another stream, that stream's work enqueued before the call or after it; and the
control (late keys, no flags: must differ). Each prints one line: the case, ok/FAIL/TIMEOUT and why.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys

CASES = ("plain", "no_flags_all_sms", "no_flags_capped", "flags_up", "late_side_first", "late_call_first",
         "late_no_flags")


class Arrival(ctypes.Structure):
    """cuco_attn_arrival (attention_cp.h)."""
    _fields_ = [("flag0", ctypes.c_void_p), ("epoch_at", ctypes.c_void_p), ("src_stride", ctypes.c_int64),
                ("chunk_rows", ctypes.c_int64), ("row0", ctypes.c_int64), ("world", ctypes.c_int),
                ("zigzag", ctypes.c_int)]


def _lib():
    from cuco import workloads
    from cuco.kit.compute import build_compute
    from cuco.toolchain import default_toolchain

    lib = ctypes.CDLL(str(build_compute(workloads.get("attention_cp"), default_toolchain()).library))
    head = [ctypes.c_void_p] * 5 + [ctypes.c_int64] * 2 + [ctypes.c_int] * 3 + [ctypes.c_int64]
    lib.cuco_attn_suffix_bf16.argtypes = head + [ctypes.c_void_p]
    lib.cuco_attn_suffix_wait_bf16.argtypes = head + [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    return lib


def run_case(case: str, d: int) -> str:
    import torch

    lib = _lib()
    half, hq, hkv = 256, 8, 2
    torch.manual_seed(d)
    q = torch.randn(half, hq, d, device="cuda").bfloat16()
    k, v = (torch.randn(4 * half, hkv, d, device="cuda").bfloat16() for _ in range(2))
    sms = torch.cuda.get_device_properties(0).multi_processor_count - 16
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
        return f"rc {rc}, finite {bool(torch.isfinite(want_o.float()).all())}"
    arrival = Arrival(flags.data_ptr(), epoch.data_ptr(), 1, half, 0, 2, 1)
    same = lambda o, lse: torch.equal(o.view(torch.int16), want_o.view(torch.int16)) and torch.equal(lse, want_lse)
    if case in ("no_flags_all_sms", "no_flags_capped", "flags_up"):
        flags.fill_(7 if case == "flags_up" else 0)
        rc, o, lse = call(k, v, arrival if case == "flags_up" else None, 0 if case == "no_flags_all_sms" else sms)
        torch.cuda.synchronize()
        return f"rc {rc}, same as plain {same(o, lse)}"
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

    land(1000)  # load the side kernels (lazy loading) before any call waits
    torch.cuda.synchronize()
    kl.fill_(float("nan")), vl.fill_(float("nan")), flags.zero_()
    torch.cuda.synchronize()
    given = None if case == "late_no_flags" else arrival
    if case == "late_call_first":
        rc, o, lse = call(kl, vl, given, sms)
        land(20_000_000)
    else:
        land(20_000_000)
        rc, o, lse = call(kl, vl, given, sms)
    torch.cuda.synchronize()
    return f"rc {rc}, same as plain {same(o, lse)}, finite {bool(torch.isfinite(o.float()).all())}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--case", choices=CASES, help="run this case here (the driver runs each in a subprocess)")
    a = ap.parse_args()
    if a.case:
        print(run_case(a.case, a.d), flush=True)
        return
    _lib()  # build once, outside the cases' timeouts
    for case in CASES:
        try:
            out = subprocess.run([sys.executable, __file__, "--case", case, "--d", str(a.d)], capture_output=True,
                                 text=True, timeout=a.timeout)
            line = (out.stdout.strip().splitlines() or ["(no output)"])[-1] if out.returncode == 0 else (
                f"FAIL exit {out.returncode}: {out.stderr.strip().splitlines()[-1:] }")
        except subprocess.TimeoutExpired:
            line = f"TIMEOUT after {a.timeout} s"
        print(f"d={a.d} {case}: {line}", flush=True)


if __name__ == "__main__":
    main()
