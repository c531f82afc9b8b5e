"""A run's best verified candidate as an op on torch tensors inside a distributed job (docs/export.md)."""

from cuco.export.op import ExportedOp
from cuco.export.source import ExportError, ExportSource
from cuco.export.torch_op import as_torch_op

__all__ = ["ExportError", "ExportSource", "ExportedOp", "as_torch_op"]
