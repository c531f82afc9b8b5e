"""The process-mode rendezvous (csrc/harness/star.cpp) on a CPU machine: rank 0 is neither held by a local
client that connects and says nothing, nor joined by one that does not know the rendezvous file's token; the
file is readable by its user only. tests/fixtures/harness/star_probe.cpp runs one rank of the real star."""

from __future__ import annotations

import socket
import stat
import struct
import subprocess
import time
from pathlib import Path

import pytest

from conftest import toolchain_or_skip
from cuco.toolchain import csrc_dir

PROBE = Path(__file__).parent / "fixtures" / "harness" / "star_probe.cpp"


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    tc = toolchain_or_skip()
    out = tmp_path_factory.mktemp("probe") / "star_probe"
    result = tc.compile([PROBE, csrc_dir() / "harness" / "star.cpp"], out, shared=False,
                        include_dirs=[csrc_dir() / "harness"], extra=("-std=c++17",))
    assert result.ok, result.log[-3000:]
    return out


def _rank(probe: Path, world: int, rank: int, rendezvous: Path, timeout_s: float = 20) -> subprocess.Popen:
    return subprocess.Popen([str(probe), str(world), str(rank), str(rendezvous), str(timeout_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _published(rendezvous: Path) -> list[str]:
    path = rendezvous / "rendezvous"
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, "rank 0 published no rendezvous file"
        time.sleep(0.02)
    return path.read_text().split()


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5)


def _finish(*procs: subprocess.Popen, timeout: float = 15) -> list[str]:
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
                q.communicate()
            raise AssertionError("a rank is still waiting: rank 0 was held or joined by a stranger") from None
    return outs


def _group_with_a_stranger(probe: Path, rendezvous: Path, hello: bytes) -> list[str]:
    """What ranks 0 and 1 print when a stranger connects to rank 0 first and sends `hello` (b'': nothing)."""
    zero = _rank(probe, 2, 0, rendezvous)
    stranger = _connect(int(_published(rendezvous)[0]))
    try:
        stranger.sendall(hello)
        time.sleep(0.3)                 # the stranger is there before the genuine rank
        return _finish(zero, _rank(probe, 2, 1, rendezvous))
    finally:
        stranger.close()


def test_a_silent_client_does_not_hold_rank_zero(probe, tmp_path):
    assert _group_with_a_stranger(probe, tmp_path, b"") == ["gathered r0,r1,\n", "gathered r0,r1,\n"]


@pytest.mark.parametrize("hello", [struct.pack("<i", 1),                     # a rank number alone
                                   bytes(16) + struct.pack("<i", 1)])        # a wrong token
def test_a_client_without_the_token_cannot_take_a_ranks_place(probe, tmp_path, hello):
    assert _group_with_a_stranger(probe, tmp_path, hello) == ["gathered r0,r1,\n", "gathered r0,r1,\n"]


def test_the_rendezvous_file_is_private_and_carries_a_token(probe, tmp_path):
    zero = _rank(probe, 2, 0, tmp_path, timeout_s=3)
    fields = _published(tmp_path)
    mode = stat.S_IMODE((tmp_path / "rendezvous").stat().st_mode)
    _finish(zero)
    assert mode == 0o600 and len(fields) == 3 and len(fields[2]) == 32
    assert zero.returncode == 3   # rank 1 never came: rank 0 says so at its deadline
