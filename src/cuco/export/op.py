"""An exported candidate as an op on torch tensors (and cupy arrays through DLPack) inside a distributed job.

    op = cuco.export.ExportedOp.open("runs/ag1", rank=rank, world=world, process_group=dist.group.WORLD)
    a_local = op.inputs()["A_local"]      # symmetric memory: fill it in place and no copy is made
    c = op(a_local, b)                    # on the current stream; c is the op's output buffer (reused per call)
    op.close()

The op joins the job's ranks with its own NCCL communicator (the unique id comes from the process group, or is
given), owns its symmetric windows, device communicator and side stream, runs on the caller's current stream and
joins its side stream back into it. Inputs that are not the op's own buffers are copied into them first, inside
the call. Outputs are views of the op's buffers: the next call overwrites them (`out=` copies instead).
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from cuco.export.source import ExportError, ExportSource
from cuco.graph_safety import host_epoch_problems

_ROLES = {0: "input", 1: "output", 2: "scratch"}
_ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "int8": 1, "uint8": 1, "int32": 4, "float8_e4m3fn": 1}


class _Cuda:
    """`__cuda_array_interface__` over raw device memory (as integers of the item size; viewed as the dtype)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], itemsize: int):
        typestr = {1: "|u1", 2: "<i2", 4: "<i4", 8: "<i8"}[itemsize]
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None}


def _lib(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    lib.cuco_op_error.restype = ctypes.c_char_p
    lib.cuco_op_open.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_int,
                                 ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)]
    lib.cuco_op_buffer.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_int),
                                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_char_p)]
    lib.cuco_op_nbuffers.argtypes = [ctypes.c_void_p]
    lib.cuco_op_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.cuco_op_close.argtypes = [ctypes.c_void_p]
    lib.cuco_op_unique_id.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.cuco_op_fill_inputs.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p]
    return lib


def unique_id(lib_path: Path) -> str:
    """A fresh NCCL unique id (hex) from the export library's NCCL."""
    lib = _lib(lib_path)
    buf = ctypes.create_string_buffer(300)
    if lib.cuco_op_unique_id(buf, len(buf)) != 0:
        raise ExportError(f"ncclGetUniqueId failed: {lib.cuco_op_error().decode()}")
    return buf.value.decode()


def check_tensor(what: str, x: Any, want: Any, built: str) -> None:
    """ExportError naming the fix unless tensor `x` has `want`'s shape, dtype and device and is contiguous (the op
    copies or writes whole buffers; a strided view would be read as if it were dense)."""
    if tuple(x.shape) != tuple(want.shape) or x.dtype != want.dtype:
        raise ExportError(f"{what}: expected {tuple(want.shape)} {want.dtype} (what {built} was built for), got "
                          f"{tuple(x.shape)} {x.dtype}; export a candidate of a run at this shape and dtype")
    if x.device != want.device:
        other = f" or open the op with device={x.device.index}" if x.device.type == "cuda" else ""
        raise ExportError(f"{what} is on {x.device}, the op on {want.device}: move it with .to('{want.device}')"
                          f"{other}")
    if not x.is_contiguous():
        raise ExportError(f"{what} is not contiguous (strides {tuple(x.stride())}); pass {what.split()[-1]}"
                          ".contiguous()")


def capture_refusal(world: int, graph_safe: bool, capturing: bool, candidate_id: str,
                    why_unsafe: str = "") -> str | None:
    """Why a call must not be captured into a CUDA graph, or None. A candidate whose flag epochs come from the host
    (`cuco.graph_safety`: the fast path's runtime counts collectives on the host) replays wrong at world > 1: a
    consumer finds its flag already set by the previous replay and reads a peer's data before it lands (measured:
    KV transfer's fast path, benchmarks/results/w2/graph_kv_transfer_w2.log). Kit candidates keep the epoch on the
    device and replay cleanly (the best point of every workload, same directory)."""
    if not capturing or world == 1 or graph_safe:
        return None
    return (f"candidate {candidate_id} is being captured into a CUDA graph at world {world}, and a replay would read "
            f"a peer's data before it lands ({why_unsafe or 'its flag epochs come from the host'}; a graph freezes "
            "them). Call it outside graph capture, or export a candidate of the design space (a kit point keeps its "
            f"epochs on the device); if benchmarks/graph_replay.py --world {world} --points <its point> replays "
            "this one cleanly, open it with ExportedOp.open(..., graph_safe=True)")


class ExportedOp:
    """One rank's instance of an exported candidate (see the module docstring). Use `open`, call, `close`."""

    def __init__(self, source: ExportSource, lib_path: Path, plugin: Path, candidate: Path, *, rank: int,
                 world: int, uid: str, device: int, graph_safe: bool | None = None):
        import torch

        if world != source.world:
            raise ExportError(f"candidate {source.candidate_id} was built and verified for world {source.world}; "
                              f"this job has {world} ranks. Export a candidate of a run at --world {world}")
        self.source, self.rank, self.world, self.device = source, rank, world, device
        problems = host_epoch_problems(source.code)
        self.graph_safe = not problems if graph_safe is None else graph_safe
        self._why_unsafe = problems[0] if problems else ""
        self._lib = _lib(lib_path)
        self._handle = ctypes.c_void_p()
        dims = (ctypes.c_int64 * len(source.shape.dims))(*source.shape.dims)
        rc = self._lib.cuco_op_open(str(plugin).encode(), str(candidate).encode(), dims, len(source.shape.dims), rank,
                                    world, uid.encode(), device, ctypes.byref(self._handle))
        if rc != 0:
            why = self._lib.cuco_op_error().decode()
            self._lib.cuco_op_close(self._handle)
            self._handle = ctypes.c_void_p()
            raise ExportError(f"rank {rank}: setting up candidate {source.candidate_id} failed: {why}")
        self._buffers: dict[str, Any] = {}
        self._roles: dict[str, str] = {}
        try:
            self._view_buffers(torch)
        except BaseException:  # a buffer that does not match its description: free what was set up, then say so
            self._buffers.clear()
            self._lib.cuco_op_close(self._handle)
            self._handle = ctypes.c_void_p()
            raise
        self.input_names = tuple(k for k, r in self._roles.items() if r == "input")
        self.output_names = tuple(k for k, r in self._roles.items() if r == "output")

    def _view_buffers(self, torch: Any) -> None:
        """Torch views of the op's buffers, checked against the workload's description of them."""
        source, world, device = self.source, self.world, self.device
        specs = source.workload.tensors(source.shape, world)
        for i in range(self._lib.cuco_op_nbuffers(self._handle)):
            ptr, nbytes, role, sym, name = (ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int(), ctypes.c_int(),
                                            ctypes.c_char_p())
            self._lib.cuco_op_buffer(self._handle, i, ctypes.byref(ptr), ctypes.byref(nbytes), ctypes.byref(role),
                                     ctypes.byref(sym), ctypes.byref(name))
            key = name.value.decode()
            if key not in specs:
                raise ExportError(f"the plugin's buffer {key!r} is not in the workload's tensors() ({', '.join(specs)}); "
                                  "fix Workload.tensors")
            shape, dtype = specs[key]
            size = math.prod(shape) * _ITEMSIZE[dtype]
            if size != nbytes.value:
                raise ExportError(f"buffer {key}: the workload's tensors() says {shape} {dtype} ({size} bytes), the "
                                  f"plugin allocated {nbytes.value}; fix Workload.tensors")
            raw = torch.as_tensor(_Cuda(ptr.value or 0, tuple(shape), _ITEMSIZE[dtype]), device=f"cuda:{device}")
            self._buffers[key] = raw.view(getattr(torch, dtype))
            self._roles[key] = _ROLES.get(role.value, "scratch")

    # -- opening ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, run: str | Path, *, rank: int = 0, world: int = 1, candidate_id: str | None = None,
             process_group: Any = None, unique_id_hex: str | None = None, device: int | None = None,
             graph_safe: bool | None = None) -> "ExportedOp":
        """Build (cached) and set up `run`'s best candidate, or `candidate_id`, as rank `rank` of `world`. The NCCL
        unique id comes from `process_group` (torch.distributed: rank 0 makes it and broadcasts it), or is given as
        `unique_id_hex` (the same on every rank); at world 1 it is made here. Collective: every rank calls it.
        graph_safe: whether a call may be captured into a CUDA graph at world > 1; None (default): when the
        candidate keeps its flag epochs on the device (`cuco.graph_safety`), else refused (`capture_refusal`)."""
        import torch

        source = ExportSource.from_run(run, candidate_id)
        lib, plugin, candidate = source.build()
        if unique_id_hex is None:
            if process_group is not None:
                import torch.distributed as dist

                box = [unique_id(lib) if rank == 0 else None]
                dist.broadcast_object_list(box, src=dist.get_global_rank(process_group, 0), group=process_group)
                unique_id_hex = box[0]
            elif world == 1:
                unique_id_hex = unique_id(lib)
            else:
                raise ExportError("at world > 1 pass process_group= (torch.distributed) or unique_id_hex=")
        dev = torch.cuda.current_device() if device is None else device
        return cls(source, lib, plugin, candidate, rank=rank, world=world, uid=unique_id_hex, device=dev,
                   graph_safe=graph_safe)

    # -- use ---------------------------------------------------------------------------------------------
    def inputs(self) -> Mapping[str, Any]:
        """The op's own input buffers (symmetric memory where the candidate reads peers): write into these and the
        call makes no copy."""
        return {k: self._buffers[k] for k in self.input_names}

    def fill_inputs_like_harness(self, seed: int = 1) -> None:
        """Fill the op's input buffers with the harness's seeded inputs (on the current stream), e.g. to compare the
        op's time with the harness's on the same data."""
        import torch

        stream = torch.cuda.current_stream(self.device).cuda_stream
        if self._lib.cuco_op_fill_inputs(self._handle, seed, ctypes.c_void_p(stream)) != 0:
            raise ExportError(f"fill: {self._lib.cuco_op_error().decode()}")

    def _check(self, name: str, x: Any, what: str = "input") -> None:
        check_tensor(f"{what} {name}", x, self._buffers[name], f"candidate {self.source.candidate_id}")

    def __call__(self, *inputs: Any, out: Sequence[Any] | None = None) -> Any:
        """Run once on the current stream; inputs in the order of `input_names` (torch tensors, or anything
        torch.from_dlpack takes). Returns the output (or a tuple of outputs)."""
        import torch

        if self._handle.value is None:
            raise ExportError("the op is closed")
        why = capture_refusal(self.world, self.graph_safe, torch.cuda.is_current_stream_capturing(),
                              self.source.candidate_id, self._why_unsafe)
        if why:
            raise ExportError(why)
        if len(inputs) != len(self.input_names):
            raise ExportError(f"the op takes {len(self.input_names)} inputs ({', '.join(self.input_names)}), "
                              f"got {len(inputs)}")
        for name, x in zip(self.input_names, inputs):
            if not isinstance(x, torch.Tensor):
                x = torch.from_dlpack(x)
            self._check(name, x)
            buf = self._buffers[name]
            if x.data_ptr() != buf.data_ptr():
                buf.copy_(x)
        stream = torch.cuda.current_stream(self.device).cuda_stream
        if self._lib.cuco_op_launch(self._handle, ctypes.c_void_p(stream)) != 0:
            raise ExportError(f"launch failed: {self._lib.cuco_op_error().decode()}")
        outs = [self._buffers[k] for k in self.output_names]
        if out is not None:
            if len(out) != len(outs):
                raise ExportError(f"out= takes {len(outs)} tensors ({', '.join(self.output_names)}), got {len(out)}")
            for name, dst, src in zip(self.output_names, out, outs):
                self._check(name, dst, "out")
                dst.copy_(src)
            outs = list(out)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def capture(self, *inputs: Any) -> tuple[Any, Any]:
        """(graph, output): one call on `inputs` captured into a torch.cuda.CUDAGraph, after one warm-up call on a
        side stream (as torch's capture asks). Write new values into `op.inputs()` and `graph.replay()`; the output
        (a view of the op's buffer) then holds that replay's result. At world > 1, every rank captures and replays
        together, and the candidate must keep its flag epochs on the device (`capture_refusal`)."""
        import torch

        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self(*inputs)
            torch.cuda.synchronize(self.device)
            with torch.cuda.graph(graph, stream=side):
                out = self(*inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return graph, out

    def close(self) -> None:
        """Free everything (collective: every rank calls it). Views returned by the op become invalid."""
        if self._handle.value is not None:
            import torch

            torch.cuda.synchronize(self.device)
            self._buffers.clear()
            rc = self._lib.cuco_op_close(self._handle)
            self._handle = ctypes.c_void_p()
            if rc != 0:
                raise ExportError(f"close: {self._lib.cuco_op_error().decode()}")

    def __enter__(self) -> "ExportedOp":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
