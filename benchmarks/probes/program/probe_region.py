"""Probe: what the program harness times in a rewritten program (region samples, delayed arrival)."""
import os, subprocess, sys, tempfile, time
from pathlib import Path
from cuco.design_space import Directives, Topology
from cuco.fastpath.verify import build
from cuco.program.observation import Observation
from cuco.program.workload import ProgramWorkload

name = sys.argv[1] if len(sys.argv) > 1 else "sp_mlp_ag_rs"
w = ProgramWorkload.load(f"tests/fixtures/host_programs/{name}.cu")
inc = [w.program.path.parent]
fast = w.fast_path(Topology(world=1)).code
ov = w.render(Directives.from_label("lsa/stream_overlap/world/cta/whole/comm_ctas=16"))
variants = {"reference": w.seed_code(), "fast": fast, "overlap": ov, "never_waits": ov.replace("cucoJoin();", "")}
for label, code in variants.items():
    b = build(code, workdir=Path(tempfile.mkdtemp()), include_dirs=inc)
    for delay in ("0", "2000"):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, CUCOFP_TRACE="1", CUCO_OBSERVE_DIR=d, WORLD_SIZE="1", NCCL_RUNTIME_CONNECT="0",
                       CUDA_MODULE_LOADING=os.environ.get("LOADING", "EAGER"), CUCO_DELAY_COMM_US=delay)
            t0 = time.time()
            r = subprocess.run([str(b.binary)], env=env, capture_output=True, text=True)
            o = Observation.read(Path(d))
            import hashlib
            h = [hashlib.sha1(v).hexdigest()[:8] for v in o.readbacks.values()]
            print(f"{label:12s} delay_us={delay:7s} rc={r.returncode} wall={time.time()-t0:.2f}s regions={[round(x[3],4) for x in o.regions]} readbacks={h} {r.stdout.strip()[-80:]} \n{r.stderr.strip()[-1500:]}", flush=True)
