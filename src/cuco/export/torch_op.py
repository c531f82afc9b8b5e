"""The exported op as a torch custom op (`torch.ops.cuco.exported`), so torch.compile keeps it as one opaque node
instead of breaking the graph around a ctypes call. Outputs are fresh tensors (a custom op may not return its own
reused buffers); the plain call (`ExportedOp.__call__`) returns the buffers without a copy."""

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

    _DEFINED = True


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
