"""cuco.atomic: a reader sees the old file or the new one, and a failed write leaves nothing behind."""

from __future__ import annotations

import threading
import time

import pytest

from cuco import atomic


def test_a_reader_never_sees_a_half_written_file(tmp_path):
    path = tmp_path / "state.json"
    versions = [bytes([ord("a") + i]) * (1 << 20) for i in range(4)]   # 1 MiB each: a plain write is seen mid-way
    atomic.write_bytes(path, versions[0])
    stop = threading.Event()
    seen: list[bytes] = []

    def read() -> None:
        while not stop.is_set():
            seen.append(path.read_bytes())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        deadline = time.monotonic() + 0.5
        i = 0
        while time.monotonic() < deadline:
            i += 1
            atomic.write_bytes(path, versions[i % len(versions)])
    finally:
        stop.set()
        reader.join()
    assert seen and all(s in versions for s in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.parametrize("fault", ["write", "rename"])
def test_a_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, fault):
    target = tmp_path / "out.txt"
    if fault == "rename":
        target.mkdir()                      # a folder with a file in it: os.replace onto it fails
        (target / "keep").write_text("old")
        with pytest.raises(OSError):
            atomic.write_text(target, "new")
        assert (target / "keep").read_text() == "old"
    else:
        target.write_text("old")
        with pytest.raises(TypeError):
            atomic.write_bytes(target, "not bytes")  # type: ignore[arg-type]
        assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_threads_of_one_process_writing_one_file_do_not_share_a_temp_file(tmp_path):
    path = tmp_path / "entry.txt"
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(200):
                atomic.write_text(path, str(n) * 1000)
        except BaseException as e:  # a shared temp name: one thread renames the other's file away
            errors.append(e)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert path.read_text() in {str(n) * 1000 for n in range(4)}
    assert [p.name for p in tmp_path.iterdir()] == ["entry.txt"]


def test_publish_moves_another_process_output_in_place_and_fsyncs(tmp_path):
    final = tmp_path / "lib.so"
    tmp = atomic.temp_path(final)
    assert tmp.parent == final.parent and tmp.name.startswith(".lib.so.")
    tmp.write_bytes(b"elf")
    atomic.publish(tmp, final, fsync=True)
    assert final.read_bytes() == b"elf" and not tmp.exists()


def test_a_cache_sweep_keeps_a_live_writers_temp_file(tmp_path):
    from cuco.evaluate.compile import sweep_cache

    entry = tmp_path / "key"
    entry.mkdir()
    live = atomic.temp_path(entry / "full_log.txt")   # the sweep reads the writer's pid from this name
    live.write_bytes(b"x" * 100)
    sweep_cache(tmp_path, max_bytes=0)
    assert live.exists()                               # this process is alive and writing: entry kept


def test_write_dir_replaces_a_folder_whole(tmp_path):
    final = tmp_path / "best"
    final.mkdir()
    (final / "old.txt").write_text("old")
    atomic.write_dir(final, {"kernel.cu": "new", "best.json": "{}"})
    assert sorted(p.name for p in final.iterdir()) == ["best.json", "kernel.cu"]
    assert (final / "kernel.cu").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]


def test_a_failed_write_dir_leaves_the_old_folder_and_no_temp_folder(tmp_path):
    final = tmp_path / "best"
    final.mkdir()
    (final / "kernel.cu").write_text("old")
    with pytest.raises(AttributeError):
        atomic.write_dir(final, {"kernel.cu": "new", "best.json": None})  # type: ignore[dict-item]
    assert [p.name for p in final.iterdir()] == ["kernel.cu"] and (final / "kernel.cu").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best"]
