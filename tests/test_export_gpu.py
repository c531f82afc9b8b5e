"""The exported op on a GPU (W = 1): a verified gemm_allgather candidate called on torch tensors matches torch,
checks what it is given, replays in a CUDA graph, and runs under torch.compile as one custom op."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

SHAPE = "1024,512,256"


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    from cuco.export import ExportedOp
    from cuco.run import RunOptions, run_workload

    run = tmp_path_factory.mktemp("export") / "run"
    s = run_workload(RunOptions("gemm_allgather", world=1, shape=SHAPE, evaluations=1, run_dir=str(run),
                                progress=False), on_event=lambda _m: None)
    assert s.best is not None, s.text()
    with ExportedOp.open(run) as o:
        yield o


def _inputs(op):
    import torch

    M, K, N = op.source.shape.dims
    return (torch.randn(M, K, device="cuda", dtype=torch.bfloat16), torch.randn(K, N, device="cuda", dtype=torch.bfloat16))


def _close(x, ref) -> bool:
    return ((x.float() - ref).norm() / ref.norm()).item() < 2e-2


def test_the_op_matches_torch_with_and_without_a_copy(op):
    a, b = _inputs(op)
    assert _close(op(a, b), a.float() @ b.float())
    bufs = op.inputs()
    bufs["A_local"].copy_(a)
    bufs["B"].copy_(b)
    assert _close(op(bufs["A_local"], bufs["B"]), a.float() @ b.float())


def test_wrong_shapes_and_dtypes_are_refused_naming_what_was_built(op):
    from cuco.export import ExportError

    a, b = _inputs(op)
    with pytest.raises(ExportError, match=r"input A_local: expected \(1024, 512\) torch.bfloat16"):
        op(a.float(), b)
    with pytest.raises(ExportError, match="takes 2 inputs"):
        op(a)


def test_the_op_replays_in_a_cuda_graph(op):
    import torch

    a, b = _inputs(op)
    bufs = op.inputs()
    bufs["B"].copy_(b)
    graph, out = op.capture(bufs["A_local"], bufs["B"])
    for _ in range(2):
        a = torch.randn_like(a)
        bufs["A_local"].copy_(a)
        graph.replay()
        torch.cuda.synchronize()
        assert _close(out, a.float() @ b.float())


def test_torch_compile_keeps_the_custom_op_in_one_graph(op):
    import torch

    from cuco.export import as_torch_op

    f = as_torch_op(op)
    compiled = torch.compile(lambda x, y: f(x, y) + 1.0, fullgraph=True)
    a, b = _inputs(op)
    assert _close(compiled(a, b) - 1.0, a.float() @ b.float())
