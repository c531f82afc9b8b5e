"""The exported op as a torch custom op (`torch.ops.cuco.exported`), so torch.compile keeps it as one opaque node
instead of breaking the graph around a ctypes call. Outputs are fresh tensors (a custom op may not return its own
reused buffers); the plain call (`ExportedOp.__call__`) returns the buffers without a copy.

The op is declared effectful (ordered): a call is a collective that writes the op's own buffers and that every
rank must make, so compilation may neither drop a call whose outputs are unused (the other ranks would hang) nor
reorder it against another call. It has no backward: asking for one is refused with the reason."""

# No `from __future__ import annotations`: torch.library reads the custom op's annotations as types.
import itertools
from typing import Any, Callable

_OPS: "dict[int, Any]" = {}
_NEXT = itertools.count(1)
_DEFINED = False


def _define() -> None:
    global _DEFINED
    if _DEFINED:
        return
    import torch

    @torch.library.custom_op("cuco::exported", mutates_args=())
    def exported(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        outs = _OPS[handle](*inputs)
        return [o.clone() for o in (outs if isinstance(outs, tuple) else (outs,))]

    @exported.register_fake
    def _(handle: int, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        op = _OPS[handle]
        return [inputs[0].new_empty(tuple(op._buffers[k].shape), dtype=op._buffers[k].dtype) for k in op.output_names]

    def backward(ctx: Any, grads: Any) -> Any:
        raise RuntimeError(NO_BACKWARD)

    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        pass

    exported.register_autograd(backward, setup_context=setup_context)
    _declare_effects(torch, exported)
    _DEFINED = True


#: Why a gradient through the op is refused, and what to do instead.
NO_BACKWARD = ("cuco's exported op (torch.ops.cuco.exported) has no backward: it is a forward kernel found and "
               "verified by the search. The gradient of GEMM+AllGather is a GEMM plus a ReduceScatter, a co-design "
               "problem of its own; compute it with torch (e.g. torch.distributed.reduce_scatter_tensor), or call "
               "the op under torch.no_grad() or on tensors that do not require grad (docs/export.md)")


def _declare_effects(torch: Any, exported: Any) -> None:
    """Mark the op ordered-effectful, which torch.compile (aot_eager and inductor) never removes or reorders."""
    try:
        from torch._library.effects import EffectType

        exported.register_effect(EffectType.ORDERED)
    except (ImportError, AttributeError):  # an older torch: the FX dead-code pass keeps it, inductor may not
        torch.fx.node.has_side_effect(torch.ops.cuco.exported.default)


def as_torch_op(op: Any) -> Callable[..., Any]:
    """`f(*inputs) -> output(s)` through torch.ops.cuco.exported for `op` (an ExportedOp)."""
    import torch

    _define()
    handle = next(_NEXT)
    _OPS[handle] = op

    def call(*inputs: Any) -> Any:
        outs = torch.ops.cuco.exported(handle, list(inputs))
        return outs[0] if len(outs) == 1 else tuple(outs)

    return call
