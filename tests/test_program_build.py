"""Host programs build as people build them: the libraries a program includes are found and linked, and
`cuco run --include/--link/--cflags` (BuildOptions) bring the rest; a header nvcc cannot find is reported at
its #include line with the fix. The nvcc tests compile tiny host-only programs (seconds)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cuco import libraries as libs
from cuco.cli import build_options, build_parser
from cuco.fastpath import verify
from cuco.fastpath.verify import BuildOptions

_PROGRAM = '#include <cstdio>\n#include "answer.h"\nint main() { printf("answer %d\\n", answer()); return 0; }\n'


def test_included_headers_name_their_libraries():
    code = "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n  # include \"nvtx3/nvToolsExt.h\"\n#include <cudnn.h>\n"
    assert libs.libraries_for(code, ("curand",)) == ("curand", "cublas", "cublasLt", "nvtx", "cudnn")
    assert libs.libraries_for("#include <nccl.h>\n", ()) == ()
    assert libs.includes(code)[1] == (2, "cublas_v2.h")


def test_run_options_become_build_options(tmp_path):
    args = build_parser().parse_args(["run", "p.cu", "--include", str(tmp_path), "--link", "cudnn", "--link",
                                      "/opt/x/libfoo.so", "--link", "m", "--cflags", "-DX=1 -lineinfo",
                                      "--cflags=-DY"])
    opts = build_options(args)
    assert opts.include_dirs == (tmp_path.resolve(),) and opts.known_libraries() == ("cudnn",)
    assert opts.nvcc_flags() == ["/opt/x/libfoo.so", "-Xlinker=-rpath,/opt/x", "-lm", "-DX=1", "-lineinfo", "-DY"]
    assert build_options(build_parser().parse_args(["run", "p.cu"])) is None


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to make the user's library")
def test_a_header_and_a_library_of_the_users_own(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "answer.h").write_text("extern \"C\" int answer();\n")
    (tmp_path / "answer.c").write_text("int answer() { return 42; }\n")
    lib = tmp_path / "libanswer.so"
    subprocess.run(["gcc", "-shared", "-fPIC", str(tmp_path / "answer.c"), "-o", str(lib)], check=True)
    missing = verify.build(_PROGRAM, workdir=tmp_path / "a", cache=False)
    assert not missing.ok
    assert missing.errors[0][0] == 2 and "answer.h not found: pass --include DIR" in missing.errors[0][1]
    assert "answer.h not found" in missing.summary()
    opts = BuildOptions([inc], [str(lib)], ["-DUNUSED=1"])
    built = verify.build(_PROGRAM, workdir=tmp_path / "b", cache=False, options=opts)
    assert built.ok, built.summary()
    out = subprocess.run([str(built.binary)], capture_output=True, text=True, timeout=60)
    assert out.stdout == "answer 42\n"


def test_a_known_library_that_is_not_installed_names_its_install_at_the_include():
    code = "#include <cstdio>\n#include <curand.h>\nint main() { return 0; }\n"
    try:
        verify.host_toolchain().library("curand")
        pytest.skip("cuRAND is installed here")
    except libs.LibraryError:
        pass
    out = verify.build(code, workdir=verify.scratch_dir(), cache=False)
    assert not out.ok and out.errors[0][0] == 2 and "pip install nvidia-curand" in out.errors[0][1]


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to make the user's library")
def test_a_missing_library_names_the_undefined_symbol_and_link(tmp_path):
    (tmp_path / "answer.h").write_text('extern "C" int answer();\n')
    out = verify.build(_PROGRAM, workdir=tmp_path / "a", cache=False, options=BuildOptions([tmp_path]))
    assert not out.ok and "no definition of answer: pass --link LIB" in out.summary()
