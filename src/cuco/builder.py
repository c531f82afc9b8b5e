"""One builder behind every compile: a content key, a lock per key, an atomic publish.

An artefact lives at ``<cache>/<kind>/<key>/<name>``. The key follows one recipe (`build_key`): the kind, the
toolchain's fingerprint and base flags, every source's name and text, the extra flags, the libraries with the
flags that find them (include and library folders, rpath) and the identity of every include folder (its path and
the text of its headers). Whatever can change the artefact is in the key, so a hit is safe to reuse and two
different inputs never share a key. `build` compiles a missing artefact once across threads and processes (a
file lock per key); `Toolchain.compile` writes nvcc's output to a temp file and publishes it whole
(`cuco.atomic`). `failure_text` trims a failed build's log for a person or an LLM.
"""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Callable, Iterator, Sequence

from cuco.errors import CucoError
from cuco.toolchain import CompileResult, Toolchain, content_hash

__all__ = ["CACHED_LOG", "HEADER_SUFFIXES", "LOCK_NAME", "build", "build_key", "failure_text", "file_lock",
           "include_identity", "is_cached"]

#: The lock file of a key, in the key's folder.
LOCK_NAME = ".lock"
#: The log of a result `build` found in the cache (nothing was run).
CACHED_LOG = "cached"

#: Files of an include folder that a compile can read, and so that its identity covers.
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hh", ".hxx", ".inl")


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created) held for the with-block, across threads and processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def include_identity(directory: Path, *, recursive: bool = False) -> str:
    """The identity of an include folder: its path and the relative name and bytes of every header in it, or
    under it with `recursive` (for cuco's own headers, `#include <cuco/gen.cuh>`; a user's folder may be as large
    as /usr/include, so only its top level is read)."""
    directory = Path(directory)
    found = directory.rglob("*") if recursive else directory.glob("*")
    files = sorted(p for p in found if p.suffix in HEADER_SUFFIXES and p.is_file())
    return content_hash(str(directory), *(p.relative_to(directory).as_posix().encode() + b"\0" + p.read_bytes()
                                          for p in files))


def build_key(kind: str, toolchain: Toolchain, sources: Sequence[tuple[str, str | bytes]], *,
              flags: Sequence[str] = (), libraries: Sequence[str] = (), includes: Sequence[str] = ()) -> str:
    """The cache key of one build. `sources` are (name, text) pairs; `includes` the `include_identity` of each
    include folder, in order (a caller may compute one once for many builds)."""
    parts: list[str | bytes] = [kind, toolchain.fingerprint(), " ".join(toolchain.base_flags()),
                                str(len(sources))]
    for name, text in sources:
        parts += [name, text]
    # each list counted and delimited: moving an item from one list to the next changes the key
    parts += [str(len(flags)), *flags, str(len(libraries)), *libraries, _link_identity(toolchain, libraries),
              str(len(includes)), *includes]
    return content_hash(*parts)


def _link_identity(toolchain: Toolchain, libraries: Sequence[str]) -> str:
    # the installs compiled and linked against (NCCL's and each library's folders, rpath); a missing library
    # fails its build, which is then keyed by the name alone
    try:
        return " ".join(toolchain.link_flags(libraries))
    except CucoError:
        return "unresolved"


def build(out_dir: Path, name: str, make: Callable[[Path], CompileResult]) -> CompileResult:
    """`out_dir/name`, cached, or made by `make(output)` under the key's lock, so parallel callers build once.
    A failed build publishes nothing and is tried again next time."""
    output = out_dir / name
    if output.exists():
        return CompileResult(True, output, CACHED_LOG, 0.0, ())
    # the lock lives in the key's folder, so a cache sweep that removes the folder leaves no lock file behind
    with file_lock(out_dir / LOCK_NAME):
        if output.exists():  # another caller built it while this one waited
            return CompileResult(True, output, CACHED_LOG, 0.0, ())
        return make(output)


def is_cached(result: CompileResult) -> bool:
    """Whether `build` found this result in the cache rather than compiling it."""
    return result.ok and result.log == CACHED_LOG and not result.command


def failure_text(result: CompileResult, source: Path | None = None, code: str = "") -> str:
    """A failed build's log as a person or an LLM reads it: the first errors, each with the line of `source`
    (whose text is `code`) it names, paths shortened (`cuco.compile_log.trim_log`)."""
    from cuco.compile_log import trim_log

    return trim_log(result.log, code, source_path=source)
