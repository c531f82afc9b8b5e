"""Every workload plugin's describe() on the CPU: it accepts the shapes the workload's Python check accepts, names
its buffers, and refuses a wrong number of dims and a shape the Python check refuses, with the reason written out."""

from __future__ import annotations

import ctypes

import pytest

from cuco import workloads
from cuco.toolchain import ToolchainError
from cuco.workload import ShapeError

NAME_LEN, MAX_BUFFERS = 32, 8   # cuco/abi.h: CUCO_NAME_LEN, CUCO_MAX_BUFFERS


class BufferSpec(ctypes.Structure):
    """cuco_buffer_spec."""

    _fields_ = [("name", ctypes.c_char * NAME_LEN), ("bytes", ctypes.c_size_t), ("symmetric", ctypes.c_int),
                ("role", ctypes.c_int)]


class WorkloadDesc(ctypes.Structure):
    """cuco_workload_desc."""

    _fields_ = [("nbuffers", ctypes.c_int), ("buffers", BufferSpec * MAX_BUFFERS), ("error", ctypes.c_char * 256)]


def _describe(plugin: ctypes.CDLL, dims: tuple[int, ...], world: int) -> WorkloadDesc:
    desc = WorkloadDesc()
    arr = (ctypes.c_int64 * len(dims))(*dims)
    rc = plugin.cuco_workload_describe(arr, len(dims), world, ctypes.byref(desc))
    assert (rc != 0) == bool(desc.error), (rc, desc.error)
    return desc


@pytest.fixture(scope="module", params=workloads.available())
def loaded(request):
    from cuco.evaluate.cascade import CascadeError, Evaluator

    wl = workloads.get(request.param)
    try:
        so = Evaluator(wl, world=wl.default_world).plugin()
    except (ToolchainError, CascadeError) as exc:
        pytest.skip(f"no CUDA toolchain to build {wl.name}'s plugin: {exc}")
    return wl, ctypes.CDLL(str(so))


def test_the_verify_shapes_are_described_with_named_buffers(loaded):
    wl, plugin = loaded
    for shape in wl.shapes_for(wl.default_world, "verify"):
        desc = _describe(plugin, shape.dims, wl.default_world)
        assert not desc.error, f"{wl.name} {shape}: {desc.error.decode()}"
        names = [desc.buffers[i].name.decode() for i in range(desc.nbuffers)]
        assert 0 < desc.nbuffers <= MAX_BUFFERS and all(names) and len(set(names)) == len(names)
        assert all(desc.buffers[i].bytes > 0 for i in range(desc.nbuffers))


def test_a_wrong_number_of_dims_is_refused_naming_them(loaded):
    wl, plugin = loaded
    dims = wl.shapes_for(wl.default_world, "verify")[0].dims
    desc = _describe(plugin, dims + (1,), wl.default_world)
    assert f"takes {len(dims)} dims" in desc.error.decode() and f"got {len(dims) + 1}" in desc.error.decode()


def test_a_shape_the_python_check_refuses_is_refused_by_the_plugin_too(loaded):
    wl, plugin = loaded
    base = wl.shapes_for(wl.default_world, "verify")[0].dims
    refused = 0
    for i in range(len(base)):   # each dim made odd by one: some of these break a divisibility rule
        dims = tuple(d + 1 if j == i else d for j, d in enumerate(base))
        try:
            wl.check_shape(wl.parse_shape(",".join(map(str, dims))), wl.default_world)
        except ShapeError:
            refused += 1
            assert _describe(plugin, dims, wl.default_world).error, f"{wl.name}: the plugin accepts {dims}"
    assert refused, f"{wl.name}: no dim of {base} made odd breaks a rule; pick another probe"
    zero = (0,) + base[1:]
    assert _describe(plugin, zero, wl.default_world).error, f"{wl.name}: the plugin accepts {zero}"


class Part(ctypes.Structure):
    """cuco_part."""

    _fields_ = [("name", ctypes.c_char * NAME_LEN), ("is_comm", ctypes.c_int), ("launch", ctypes.c_void_p)]


def test_the_kit_entry_points_check_their_arguments(loaded):
    """cuco/kit/plugin.cuh: null pointers are refused (2), a ctx without workload state is refused by fill and
    check (3) and by setup when its dims are not the workload's (1), teardown of nothing is fine; no CUDA call
    is reached, so this runs on the CPU."""
    _, plugin = loaded
    null = ctypes.c_void_p()
    assert plugin.cuco_workload_describe(null, 0, 1, null) == 2
    for entry in (plugin.cuco_workload_setup, plugin.cuco_workload_teardown):
        assert entry(null) == 2
    assert plugin.cuco_workload_fill(null, ctypes.c_uint64(1)) == 2
    assert plugin.cuco_workload_check(null, ctypes.c_uint64(1), null) == 2
    assert plugin.cuco_workload_parts(null, null) == 2
    ctx = ctypes.create_string_buffer(1 << 16)   # a zeroed cuco_ctx (far larger than one): no dims, no state
    result = ctypes.create_string_buffer(1024)
    assert plugin.cuco_workload_setup(ctx) == 1
    assert plugin.cuco_workload_fill(ctx, ctypes.c_uint64(1)) == 3
    assert plugin.cuco_workload_check(ctx, ctypes.c_uint64(1), result) == 3
    assert plugin.cuco_workload_teardown(ctx) == 0


def test_the_parts_are_compute_then_comm(loaded):
    _, plugin = loaded
    parts, n = ctypes.POINTER(Part)(), ctypes.c_int(-1)
    assert plugin.cuco_workload_parts(ctypes.byref(parts), ctypes.byref(n)) == 0
    assert [(parts[i].name.decode(), parts[i].is_comm, bool(parts[i].launch)) for i in range(n.value)] == [
        ("compute", 0, True), ("comm", 1, True)]
