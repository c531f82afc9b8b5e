"""The exported op as a torch custom op, on the CPU: torch.compile keeps a call whose output is unused (a collective
dropped on one rank hangs the others) and runs it once per call; a backward is refused with the reason.

These are unit tests: a CPU stand-in takes the place of an ExportedOp (which needs GPUs), offering what
as_torch_op reads of it (its call, its buffers, its output names)."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the CPU build of torch runs this (README, Test)")

from cuco.export.torch_op import NO_BACKWARD, as_torch_op  # noqa: E402

DOCS = Path(__file__).resolve().parents[1] / "docs" / "export.md"


class CpuStandInForUnitTests:
    """C = A @ B into its own buffer, as an ExportedOp of GEMM+AllGather at W = 1 writes C; counts its calls."""

    output_names = ("C",)

    def __init__(self) -> None:
        self._buffers = {"C": torch.zeros(4, 4)}
        self.calls = 0

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self._buffers["C"].copy_(a @ b)
        return self._buffers["C"]


def _names(graph: torch.fx.Graph) -> list[str]:
    """Every target and argument of the graph's calls, as text (an effectful op sits inside with_effects)."""
    return [f"{n.target} {n.args}" for n in graph.nodes if n.op == "call_function"]


def test_unit_a_call_whose_output_is_unused_survives_in_the_aot_eager_graph_and_runs_each_time():
    from torch._dynamo.backends.common import aot_autograd

    op = CpuStandInForUnitTests()
    f = as_torch_op(op)
    graphs: list[torch.fx.Graph] = []

    def keep(gm: torch.fx.GraphModule, _inputs: list) -> object:
        graphs.append(gm.graph)
        return gm.forward

    def step(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        f(a, b)  # called for its effect only: e.g. every rank must take part in the collective
        return a + 1

    torch._dynamo.reset()
    compiled = torch.compile(step, backend=aot_autograd(fw_compiler=keep), fullgraph=True)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    compiled(a, b)
    compiled(a, b)
    assert graphs and any("cuco.exported" in text for text in _names(graphs[0])), _names(graphs[0])
    assert op.calls == 2
    assert torch.allclose(op._buffers["C"], a @ b)


def test_unit_inductor_keeps_the_call_too():
    import torch._inductor.config as inductor_config

    op = CpuStandInForUnitTests()
    f = as_torch_op(op)

    def step(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        f(a, b)
        return a * 2

    torch._dynamo.reset()
    # a cached graph from before the op was declared effectful would be reused as it was: compile afresh
    with inductor_config.patch(force_disable_caches=True):
        compiled = torch.compile(step, backend="inductor", fullgraph=True)
        compiled(torch.randn(4, 4), torch.randn(4, 4))
        compiled(torch.randn(4, 4), torch.randn(4, 4))
    assert op.calls == 2


def test_unit_a_backward_through_the_op_is_refused_with_the_reason():
    f = as_torch_op(CpuStandInForUnitTests())
    a = torch.randn(4, 4, requires_grad=True)
    c = f(a, torch.randn(4, 4))
    with pytest.raises(RuntimeError, match="has no backward") as refused:
        c.sum().backward()
    assert "ReduceScatter" in str(refused.value) and "docs/export.md" in str(refused.value)
    with torch.no_grad():
        f(a, torch.randn(4, 4))  # the forward alone is fine


def test_the_export_doc_says_the_op_has_no_backward_and_is_never_dropped():
    text = " ".join(DOCS.read_text().lower().split())
    assert "no backward" in text and "effectful" in text
    assert "docs/export.md" in NO_BACKWARD
