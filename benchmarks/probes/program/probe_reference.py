"""Probe: the observed reference of a corpus program run a few times; its region samples (is NCCL warm?)."""
import os, subprocess, sys, tempfile
from pathlib import Path
from cuco.fastpath.verify import build
from cuco.program.observation import Observation
from cuco.program.workload import ProgramWorkload

name = sys.argv[1] if len(sys.argv) > 1 else "alltoallv_sendrecv"
w = ProgramWorkload.load(f"tests/fixtures/host_programs/{name}.cu")
b = build(w.seed_code(), workdir=Path(tempfile.mkdtemp()), include_dirs=[w.program.path.parent])
for i in range(3):
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, CUCO_OBSERVE_DIR=d, WORLD_SIZE="1", NCCL_RUNTIME_CONNECT="0", CUDA_MODULE_LOADING="EAGER")
        r = subprocess.run([str(b.binary)], env=env, capture_output=True, text=True)
        print(name, "run", i, "rc", r.returncode, "regions", [round(x[3], 4) for x in Observation.read(Path(d)).regions], flush=True)
