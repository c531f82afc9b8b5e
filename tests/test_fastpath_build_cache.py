"""The fast path's compile cache: a second build of the same code and headers is reused; a changed header
beside the program is a new build."""

from cuco.fastpath import verify


def test_build_is_cached_by_code_and_headers(tmp_path, monkeypatch):
    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "value.h").write_text("#define VALUE 1\n")
    code = '#include "value.h"\nint main() { return VALUE - 1; }\n'
    first = verify.build(code, workdir=tmp_path / "a", include_dirs=[inc], name="p")
    again = verify.build(code, workdir=tmp_path / "b", include_dirs=[inc], name="q")
    assert first.ok and again.ok and again.log == "(cached)" and again.binary == first.binary
    (inc / "value.h").write_text("#define VALUE 2\n")
    changed = verify.build(code, workdir=tmp_path / "c", include_dirs=[inc], name="p")
    assert changed.ok and changed.log != "(cached)" and changed.binary != first.binary


def test_the_same_code_built_by_several_threads_at_once_is_compiled_once(tmp_path, monkeypatch):
    """Two candidates of one batch may hold the same code (an LLM that changed nothing): their parallel builds share
    one cache entry, and neither fails on the other's temporary file."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("CUCO_CACHE_DIR", str(tmp_path / "cache"))
    code = "int main() { return 0; }\n"
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda i: verify.build(code, workdir=tmp_path / f"w{i}", name="p"), range(4)))
    assert all(o.ok for o in outs), [o.log[-500:] for o in outs]
    assert len({o.binary for o in outs}) == 1 and sum(o.log != "(cached)" for o in outs) == 1
