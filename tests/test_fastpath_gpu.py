"""On the GPUs present (one is enough: world size 1): every rule-based standalone transform runs and prints
the same checksums as the original host-driven program (integer-valued data, so every summation order gives the
same bits)."""

from pathlib import Path

import pytest

from cuco.fastpath import verify
from cuco.fastpath.agent import FastPathAgent

FIX = Path(__file__).parent / "fixtures" / "fastpath"
STANDALONE = ("ag_two_streams", "alltoall_reduce", "ring_threads", "alltoallv_p2p")


@pytest.mark.gpu
@pytest.mark.parametrize("name", STANDALONE)
def test_transform_matches_original_on_gpus(name, gpus, tmp_path):
    result = FastPathAgent(workdir=tmp_path).run(FIX / f"{name}.cu")
    assert result.verified_how == f"verified on {verify.gpu_count()} GPUs", result.verified_how


@pytest.mark.gpu
def test_candidate_abi_transform_compiles_on_gpu_machine(tmp_path):
    result = FastPathAgent(workdir=tmp_path).run(FIX / "abi_allgather_seed.cu")
    assert result.verified_how.startswith("compiled only (candidate ABI")
