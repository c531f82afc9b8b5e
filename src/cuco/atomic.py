"""Atomic file writes: a reader sees the old file or the new one, never half of one.

Every write goes to a temp file in the same folder as the target (``os.replace`` is atomic only within one file
system) and is then renamed onto it. The temp name is ``.<name>.<token>.<pid>.tmp``: hidden, unique per call (two
threads of one process may write the same target), and carrying the writer's pid second from the end, where
`cuco.evaluate.compile.sweep_cache` reads it to tell a live writer's file from one a killed process left.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import Mapping

__all__ = ["publish", "temp_path", "write_bytes", "write_dir", "write_text"]


def temp_path(final: Path) -> Path:
    """A fresh temp path next to `final`, for a file that another process (nvcc, cp) writes before `publish`."""
    return final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.{os.getpid()}.tmp")


def publish(tmp: Path, final: Path, *, fsync: bool = False) -> None:
    """Rename the finished file `tmp` onto `final` atomically; `fsync` first flushes it to disk, so a power loss
    leaves the old file or the whole new one. On failure `tmp` is removed and the error raised."""
    try:
        if fsync:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes, *, fsync: bool = False) -> None:
    """Write `data` to `path` atomically (the folder must exist); a failure leaves no temp file behind."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    publish(tmp, path, fsync=fsync)


def write_text(path: Path, text: str, *, fsync: bool = False) -> None:
    """Write `text` (UTF-8) to `path` atomically (the folder must exist); a failure leaves no temp file behind."""
    write_bytes(path, text.encode(), fsync=fsync)


def write_dir(final: Path, files: Mapping[str, str]) -> None:
    """Make `final` a folder holding exactly `files` (name: UTF-8 text), replacing any folder there whole. A
    folder cannot be renamed onto a non-empty one, so the old one moves aside first: a reader sees the old folder,
    none for an instant, or the new one, never a mix. A failure leaves the old folder and no temp folder."""
    final = Path(final)
    tmp = temp_path(final)
    tmp.mkdir()
    try:
        for name, text in files.items():
            (tmp / name).write_bytes(text.encode())
        old = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.{os.getpid()}.old")
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
