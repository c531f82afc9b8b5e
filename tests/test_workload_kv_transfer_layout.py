"""Index arithmetic of the KV-transfer workload (kv_layout.cuh) on the CPU, for W = 1, 2, 4, 8: roles and pairs, paged
cache and staging offsets, token chunks, flag words and seeded block tables. The header is compiled by g++ into a
shared object and driven through ctypes, so the tests check the code candidates compile, not a Python copy."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuco.toolchain import csrc_dir

HERE = Path(__file__).parent
SOURCE = HERE / "fixtures" / "kv_transfer" / "layout_capi.cpp"
WORKLOAD = HERE.parent / "src" / "cuco" / "workloads" / "kv_transfer"
I64 = ctypes.c_int64


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on PATH")
    so = tmp_path_factory.mktemp("kvlayout") / "libkvlayout.so"
    subprocess.run([cxx, "-std=c++17", "-O1", "-shared", "-fPIC", f"-I{WORKLOAD}", f"-I{csrc_dir() / 'include'}",
                    str(SOURCE), "-o", str(so)], check=True, capture_output=True, text=True, timeout=300)
    lib = ctypes.CDLL(str(so))
    for name in ("kv_page_elem", "kv_stage_layer_elem", "kv_dtab_word", "kv_flags"):
        getattr(lib, name).restype = I64
    lib.kv_page_elem.argtypes = [I64, I64, I64, I64, ctypes.c_int, I64]
    lib.kv_stage_layer_elem.argtypes = [I64, I64, I64, I64]
    lib.kv_dtab_word.argtypes = [I64, I64]
    lib.kv_geo.argtypes = [I64, I64, I64, ctypes.POINTER(I64)]
    lib.kv_chunks.argtypes = [I64, I64, I64, ctypes.POINTER(I64), ctypes.POINTER(I64), ctypes.POINTER(I64)]
    lib.kv_chunk_blocks.argtypes = [I64, I64, I64, ctypes.POINTER(I64), ctypes.POINTER(I64)]
    lib.kv_flags.argtypes = [I64, ctypes.c_int, ctypes.POINTER(I64)]
    lib.kv_make_table.argtypes = [I64, ctypes.c_uint64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int32),
                                  ctypes.POINTER(ctypes.c_int32)]
    return lib


def geo(lib, s, d, layers):
    out = (I64 * 4)()
    lib.kv_geo(s, d, layers, out)
    return list(out)


def table(lib, s, seed, rank, which):
    nblk, pool = s // 16, s // 16 + (s // 16 + 7) // 8
    t, scratch = (ctypes.c_int32 * nblk)(), (ctypes.c_int32 * pool)()
    lib.kv_make_table(s, seed, rank, which, t, scratch)
    return list(t)


@pytest.mark.parametrize("world", [1, 2, 4, 8])
def test_every_decode_rank_has_one_prefill_rank(lib, world):
    roles = [lib.kv_role_of(r, world) for r in range(world)]
    assert lib.kv_world_ok(world)
    if world == 1:
        assert roles == [3] and lib.kv_pair_peer(0, 1) == 0 and lib.kv_prefill_of(0, 1) == 0
        return
    assert roles == [1, 2] * (world // 2)
    for r in range(world):
        peer = lib.kv_pair_peer(r, world)
        assert lib.kv_pair_peer(peer, world) == r and peer != r and peer // 2 == r // 2
        if roles[r] == 2:
            assert lib.kv_prefill_of(r, world) == peer and roles[peer] == 1


@pytest.mark.parametrize("world", [3, 5, 7, 0, -2])
def test_odd_worlds_cannot_pair(lib, world):
    assert not lib.kv_world_ok(world)


shapes = st.tuples(st.integers(1, 24).map(lambda k: 16 * k), st.sampled_from([128, 256, 512, 768, 1024]),
                   st.integers(1, 4))


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**63), rank=st.integers(0, 7))
def test_pages_under_a_table_never_overlap_and_fit_the_cache(lib, shape, seed, rank):
    s, d, layers = shape
    nblk, pool, cache, _stage = geo(lib, s, d, layers)
    assert nblk == s // 16 and nblk <= pool < nblk + nblk // 8 + 2
    tab = table(lib, s, seed, rank, 1)
    starts = sorted(lib.kv_page_elem(s, d, layers, l, kv, p) for l in range(layers) for kv in (0, 1) for p in tab)
    assert starts[0] >= 0 and starts[-1] + 16 * d <= cache
    assert all(b - a >= 16 * d for a, b in zip(starts, starts[1:]))  # disjoint pages


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**63), rank=st.integers(0, 7))
def test_tables_are_distinct_pages_and_differ_between_sides(lib, shape, seed, rank):
    s = shape[0]
    nblk, pool = s // 16, s // 16 + (s // 16 + 7) // 8
    ptab, dtab = table(lib, s, seed, rank, 0), table(lib, s, seed, rank, 1)
    for t in (ptab, dtab):
        assert len(set(t)) == nblk and all(0 <= p < pool for p in t)
    assert table(lib, s, seed, rank, 1) == dtab  # seeded: the plugin's check regenerates it
    if nblk >= 8:
        assert ptab != dtab and dtab != table(lib, s, seed, rank + 1, 1)
    assert lib.kv_dtab_word(s, 0) == nblk  # the decode table follows the prefill table


@settings(max_examples=40, deadline=None)
@given(shape=shapes)
def test_staging_layers_are_contiguous_token_order(lib, shape):
    s, d, layers = shape
    *_rest, stage = geo(lib, s, d, layers)
    assert [lib.kv_stage_layer_elem(s, d, layers, l) for l in range(layers)] == [2 * s * d * l for l in range(layers)]
    assert stage == 2 * s * d * layers


@settings(max_examples=60, deadline=None)
@given(shape=shapes, chunk=st.sampled_from([0, 1 << 10, 1 << 14, 1 << 18, 1 << 20, 4 << 20]))
def test_chunks_are_whole_blocks_covering_every_token_once(lib, shape, chunk):
    s, d, _layers = shape
    out, begins, lens = (I64 * 2)(), (I64 * (s // 16))(), (I64 * (s // 16))()
    lib.kv_chunks(s, d, chunk, out, begins, lens)
    rows, n = out
    assert n >= 1 and rows % 16 == 0
    covered = [t for c in range(n) for t in range(begins[c], begins[c] + lens[c])]
    assert covered == list(range(s))
    assert all(begins[c] % 16 == 0 and lens[c] % 16 == 0 for c in range(n))
    if chunk == 0:
        assert n == 1
    first, end = (I64 * (s // 16))(), (I64 * (s // 16))()
    lib.kv_chunk_blocks(s, d, chunk, first, end)
    assert [(first[c], end[c]) for c in range(n)] == [(begins[c] // 16, (begins[c] + lens[c]) // 16) for c in range(n)]


@settings(max_examples=40, deadline=None)
@given(layers=st.integers(1, 40), nchunks=st.integers(1, 64))
def test_flag_words_are_distinct(lib, layers, nchunks):
    out = (I64 * (layers * nchunks + 1))()
    words = lib.kv_flags(layers, nchunks, out)
    assert sorted(out) == list(range(words))
