"""Design points of a user's program compile (nvcc, sm_90): a covering sample of sp_mlp_ag_rs's space (every
value of every directive), and a signal point and a copy-engine point of programs with other movement
collectives and launch models. Every path of the runtime is compiled in every build (the point's macros pick
among them with constants), so these builds check each macro setting once."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from cuco.design_space import Directives, Topology
from cuco.fastpath import verify
from cuco.kit.sample import covering_points
from cuco.program.workload import ProgramWorkload

CORPUS = Path(__file__).parent / "fixtures" / "host_programs"
OTHERS = {
    "moe_alltoall_pool": "lsa/stream_overlap/signal/cta/whole/comm_ctas=8",        # AlltoAll, single process
    "bcast_weights_async": "lsa/deferred/signal/copy_engine/1MiB/comm_ctas=32",    # Broadcast, process per GPU
}


def test_a_covering_sample_of_points_compiles():
    mlp = ProgramWorkload.load(CORPUS / "sp_mlp_ag_rs.cu")
    space = mlp.space(Topology(world=1))
    fast = space.conservative()   # the defaults: compiled with every corpus program by test_fastpath_corpus
    sample = [p for p in covering_points(space) if p != fast]
    assert {(n, p.get(n)) for p in [fast, *sample] for n in space.names} == \
        {(n, v) for n in space.names for v in space.values(n)}
    jobs = [(mlp, p) for p in sample]
    for name, label in OTHERS.items():
        w = ProgramWorkload.load(CORPUS / f"{name}.cu")
        point = Directives.from_label(label)
        assert w.space(Topology(world=1)).is_legal(point), label
        jobs.append((w, point))
    work = Path(os.environ.get("TMPDIR", "/tmp")) / "cuco-program-points"

    def build(job):
        w, point = job
        out = verify.build(w.render(point), workdir=work / w.name / point.label().replace("/", "_"),
                           include_dirs=[CORPUS], name="program")
        return f"{w.name} {point.label()}", out

    with ThreadPoolExecutor(2) as pool:
        failed = {k: out.summary() + "\n" + out.log[-2000:] for k, out in pool.map(build, jobs) if not out.ok}
    assert failed == {}
