"""Never slower than the reference: when no verified candidate beat the program a run is measured against (a
user's program, a workload's host seed), that program itself is the run's best (mutation 'original')."""

from __future__ import annotations

import attrs

from cuco.candidate import Candidate, LevelResult


def best_of(fastest: Candidate, reference_code: str, workload: str, what: str) -> Candidate:
    """`fastest` (the fastest verified candidate) where it beat the reference: in fresh rounds where it was
    re-timed (`record_faster`, Problem.confirm), else in its own timed rounds; otherwise the reference itself
    (`reference`). `what` names the reference in the best's feedback ('Your program')."""
    m = fastest.metrics
    if "record_faster" in m:
        return fastest if m["record_faster"] else reference(fastest, reference_code, workload, what)
    if m.get("host_ms") is None or m.get("speedup", 0.0) > 1.0:   # no reference time: nothing to fall back on
        return fastest
    return reference(fastest, reference_code, workload, what)


def reference(fastest: Candidate, code: str, workload: str, what: str) -> Candidate:
    """The reference as the run's best: its time is the host time measured in the same timed rounds as `fastest`,
    so its speedup is exactly 1.0; its first (cold) region likewise where the rounds timed one."""
    bench = fastest.results["bench"]
    m = fastest.metrics
    rounds = "record_host_ms" in m   # re-timed in fresh rounds: those rounds' figures
    host_ms = m["record_host_ms"] if rounds else m["host_ms"]
    metrics = {"time_ms": host_ms, "host_ms": host_ms, "speedup": 1.0,
               "fastest_rewrite_ms": m["record_best_ms"] if rounds else m["time_ms"],
               "fastest_rewrite_speedup": m.get("record_speedup" if rounds else "speedup")}
    for key in ("compute_ms", "comm_ms", "bound_ms"):   # the parts are the problem's, not the rewrite's
        if key in fastest.metrics:
            metrics[key] = fastest.metrics[key]
    if "record_faster" in m:   # the verdict of the fresh rounds that kept the reference
        metrics.update(record_faster=0.0, record_repeats=m.get("record_repeats", 0.0))
    cold = "record_cold_ms" if rounds else "cold_ms"
    if cold in m:   # the reference's own first region, from the same rounds
        metrics["cold_ms"] = metrics["cold_time_ms"] = m[cold]
    point = fastest.directives.label() if fastest.directives else fastest.mutation
    data = {**bench.data, "runs_ms": bench.data.get("host_runs_ms", []), "fastest_rewrite": fastest.id,
            "fastest_rewrite_point": point}
    itself = {"how": "the reference itself (the rounds time it beside every rewrite)"}
    results = {level: LevelResult(level, True, "", 0.0, itself) for level in ("static", "compile", "verify")}
    results["bench"] = attrs.evolve(bench, data=data)
    if "record_faster" in m and not rounds:   # its fresh rounds failed (Problem.confirm said why)
        why = f"the fastest rewrite, {point}, failed when re-timed against it: {not_offered_reason(fastest)}"
    else:
        why = (f"no verified rewrite was faster (the fastest, {point}, took {metrics['fastest_rewrite_ms']:.3f} ms "
               f"against {host_ms:.3f} ms in the same "
               + (f"{int(m.get('record_repeats', 0))} fresh rounds)" if rounds else "rounds)"))
    return Candidate(code=code, workload=workload, mutation="original", metrics=metrics, fitness=1.0,
                     results=results, feedback=f"{what} as it is: {why}.")


#: How Problem.confirm ends the feedback of a rewrite whose fresh rounds failed.
NOT_OFFERED = "Not offered: "


def not_offered_reason(c: Candidate) -> str:
    """Why a rewrite was not offered, from the last line of its feedback (Problem.confirm wrote it)."""
    return c.feedback.splitlines()[-1].removeprefix(NOT_OFFERED) if c.feedback else ""
