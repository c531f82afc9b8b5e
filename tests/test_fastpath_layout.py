"""Index arithmetic of the fast path's design-point paths (cuco/fastpath/cuda/lsa_layout.cuh), compiled with g++
and queried with hypothesis: copy-engine chunks tile a transfer and spread over the copy streams, signal flags
are distinct and inside their area, and who reads whom agrees from both ends; and the kernels' byte copy
(lsa_copy_bytes.cuh), run thread by thread: every byte copied once, by the thread that owns its chunk."""

from __future__ import annotations

import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

DRIVER = Path(__file__).parent / "fixtures" / "fastpath" / "layout_cli.cpp"
MiB = 1 << 20


class Layout:
    """The compiled driver, kept running: one query per line."""

    def __init__(self, exe: Path):
        self.proc = subprocess.Popen([str(exe)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, *words: object) -> list[int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(map(str, words)) + "\n")
        self.proc.stdin.flush()
        return [int(x) for x in self.proc.stdout.readline().split()]


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler (g++) on PATH")
    exe = tmp_path_factory.mktemp("layout") / "layout_cli"
    headers = resources.files("cuco.fastpath").joinpath("cuda")
    subprocess.run([cxx, "-std=c++17", "-O1", f"-I{headers}", str(DRIVER), "-o", str(exe)], check=True,
                   capture_output=True, text=True, timeout=300)
    lay = Layout(exe)
    yield lay
    lay.proc.kill()
    lay.proc.wait()


@settings(max_examples=300, deadline=None)
@given(bytes_=st.integers(0, 64 * MiB + 7), chunk=st.sampled_from([0, 4096, 1 * MiB, 4 * MiB]),
       streams=st.integers(1, 4), transfer=st.integers(0, 63))
def test_chunks_tile_the_transfer_and_spread_over_the_streams(layout, bytes_, chunk, streams, transfer):
    got = layout.ask("chunks", bytes_, chunk, streams, transfer)
    triples = [got[i:i + 3] for i in range(0, len(got), 3)]
    if bytes_ == 0:
        assert triples == []
        return
    assert len(triples) == (1 if chunk == 0 else -(-bytes_ // chunk))
    nxt = 0
    for k, (off, length, stream) in enumerate(triples):
        assert off == nxt and 0 < length <= (chunk or bytes_)          # in order, no gap, no overlap
        assert 0 <= stream < streams and stream == (transfer + k) % streams
        nxt = off + length
    assert nxt == bytes_
    used = [s for _o, _l, s in triples]                                  # consecutive chunks: other streams
    assert all(a != b for a, b in zip(used, used[1:])) or streams == 1


@settings(max_examples=200, deadline=None)
@given(nranks=st.integers(1, 64), rooted=st.booleans(), data=st.data())
def test_a_source_of_a_rank_counts_that_rank_as_its_reader(layout, nranks, rooted, data):
    root = data.draw(st.integers(0, nranks - 1))
    masks = {me: layout.ask("masks", int(rooted), nranks, me, root) for me in range(nranks)}
    for a in range(nranks):
        sources, readers = masks[a]
        assert sources >> nranks == 0 and readers >> nranks == 0
        for b in range(nranks):
            assert bool(sources >> b & 1) == bool(masks[b][1] >> a & 1)   # a reads b <=> b is read by a
    if rooted:   # the root reads nobody and is read by every other rank
        assert masks[root] == [0, ((1 << nranks) - 1) & ~(1 << root)]
    else:
        assert all(m == [(1 << nranks) - 1] * 2 for m in masks.values())


@settings(max_examples=60, deadline=None)
@given(nranks=st.integers(1, 64), ctas=st.sampled_from([1, 8, 16, 32, 64, 128]))
def test_signal_flags_are_distinct_aligned_and_inside_their_area(layout, nranks, ctas):
    total, *offsets = layout.ask("flags", nranks, ctas)
    assert len(offsets) == 2 * nranks * ctas == len(set(offsets))
    assert all(o % 4 == 0 and 0 <= o <= total - 4 for o in offsets)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**31 - 1))
def test_a_sequence_number_is_reached_by_itself_and_later_ones_across_wrap_around(layout, seq, later):
    assert layout.ask("seq", (seq + later) % 2**32, seq) == [1]
    if later:
        assert layout.ask("seq", seq, (seq + later) % 2**32) == [0]


@settings(max_examples=60, deadline=None)
@given(nranks=st.integers(1, 64))
def test_at_every_gather_step_the_ranks_read_distinct_peers_and_each_reads_all(layout, nranks):
    got = layout.ask("stagger", nranks)
    order = {me: got[me * nranks:(me + 1) * nranks] for me in range(nranks)}
    for me, peers in order.items():
        assert peers[0] == me and sorted(peers) == list(range(nranks))    # own data first, every rank once
    for step in range(nranks):                                            # no peer read by two ranks at once
        assert sorted(order[me][step] for me in range(nranks)) == list(range(nranks))


@settings(max_examples=300, deadline=None)
@given(count=st.integers(0, 1 << 40), v=st.sampled_from([1, 2, 4, 8, 16]), nranks=st.integers(1, 64))
def test_reduce_slices_tile_the_buffer_in_rank_order_on_whole_chunks(layout, count, v, nranks):
    begins = layout.ask("slices", count, v, nranks)
    assert len(begins) == nranks + 1 and begins[0] == 0 and begins[-1] == count
    assert all(a <= b for a, b in zip(begins, begins[1:]))                # in order, no overlap, no gap
    assert all(b % v == 0 or b == count for b in begins)                  # vectors from every slice's start
    units = -(-count // v)
    assert max(b - a for a, b in zip(begins, begins[1:])) <= (-(-units // nranks)) * v   # balanced


@settings(max_examples=100, deadline=None)
@given(nranks=st.integers(1, 64), data=st.data())
def test_every_reduce_slice_has_one_owner_and_from_three_ranks_the_root_owns_none(layout, nranks, data):
    root = data.draw(st.integers(0, nranks - 1))
    parts, *owner = layout.ask("owners", nranks, root)
    assert sorted(k for k in owner if k >= 0) == list(range(parts))       # each slice reduced by exactly one rank
    if nranks > 2:
        assert parts == nranks - 1 and owner[root] == -1                 # the root's inbound links take one buffer
        assert owner[(root + 1) % nranks] == 0                           # from the rank after the root, in turn
    else:
        assert parts == nranks and owner == list(range(nranks))


@settings(max_examples=60, deadline=None)
@given(nranks=st.integers(1, 64), ctas=st.integers(1, 128))
def test_push_flags_and_staged_buffers_are_distinct_aligned_and_inside_their_areas(layout, nranks, ctas):
    got = layout.ask("push", nranks, ctas)
    max_bytes, flag_bytes, staging_bytes = got[:3]
    flags, staged = got[3:3 + 2 * nranks * ctas], got[3 + 2 * nranks * ctas:]
    assert len(staged) == 2 * nranks
    assert max_bytes % 256 == 0 and 0 < max_bytes * nranks <= 4 * MiB   # both slots hold 8 MiB whatever W
    assert len(set(flags)) == len(flags) and all(f % 4 == 0 and 0 <= f < flag_bytes for f in flags)
    # each staged buffer is max_bytes long, 256-byte aligned, and none overlaps another
    assert sorted(staged) == [k * max_bytes for k in range(2 * nranks)] and staging_bytes == 2 * nranks * max_bytes


@settings(max_examples=200, deadline=None)
@given(from_=st.integers(0, 1 << 40), nth=st.integers(1, 600))
def test_a_loop_tail_starts_at_the_first_chunk_each_thread_owns(layout, from_, nth):
    # chunk c belongs to thread c mod nth: the tail after the vector groups starts, per thread, at its first chunk
    # at or after the groups' end, so every chunk from there on is handled once and by its owner
    starts = layout.ask("owned", from_, nth)
    assert len(starts) == nth
    for tid, c in enumerate(starts):
        assert from_ <= c < from_ + nth and c % nth == tid


@settings(max_examples=150, deadline=None)
@given(blocks=st.integers(1, 3), threads=st.sampled_from([1, 4, 32]), ndst=st.integers(1, 3),
       shifts=st.sampled_from([(0, 0), (0, 8), (4, 4), (12, 0)]), data=st.data())
def test_the_byte_copy_writes_every_byte_once_from_the_thread_that_owns_its_chunk(layout, blocks, threads, ndst,
                                                                                  shifts, data):
    # sizes across whole groups of 8 chunks per thread, a last partial group and a ragged end; aligned buffers take
    # the vector groups, misaligned ones the byte loop: either way chunk c is thread c mod the grid's threads
    nth = blocks * threads
    bytes_ = data.draw(st.integers(0, 16 * nth * 8 * 2 + 40))
    proc = layout.proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"copy {bytes_} {ndst} {blocks} {threads} {shifts[0]} {shifts[1]}\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"
