"""CUDA-event timing of one call, shared by the torch-side benchmark scripts: each call timed alone after the
previous one has finished (record, call, record, synchronise), after `warmup` untimed calls."""

from __future__ import annotations


def event_times_ms(fn, iters: int, warmup: int, before=None) -> list[float]:
    """The milliseconds of `iters` calls of `fn` on the current stream; `before()`, if given, runs ahead of each
    timed call outside its events (e.g. a rendezvous of the ranks)."""
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        if before is not None:
            before()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times
