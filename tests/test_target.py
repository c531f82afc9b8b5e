"""What a run's target names (cuco.target): built-in workloads, workload folders, host programs, and refusals."""

from __future__ import annotations

import pytest

from cuco import workloads
from cuco.errors import CucoError
from cuco.target import PROGRAM_SUFFIXES, load_workload_folder, resolve


@pytest.mark.parametrize("name", workloads.available())
def test_a_built_in_name_is_its_registered_workload(name):
    assert resolve(name) is workloads.get(name)


def test_an_unknown_name_is_refused_with_what_would_be_taken():
    with pytest.raises(CucoError) as err:
        resolve("no_such_workload")
    text = str(err.value)
    assert "unknown workload 'no_such_workload'" in text and "gemm_allgather" in text
    assert "workload folder" in text and ".cu" in text


def test_a_launcher_is_refused_for_a_workload_and_named_as_what_to_drop():
    with pytest.raises(CucoError, match="--launcher torchrun applies to a host program .*drop it"):
        resolve("moe", launcher="torchrun")


@pytest.mark.parametrize("suffix", PROGRAM_SUFFIXES)
def test_a_program_suffix_goes_to_the_program_loader_even_when_the_file_is_missing(tmp_path, suffix):
    # the loader, not the name lookup, says what is wrong: a missing program is never "unknown workload"
    with pytest.raises(Exception) as err:
        resolve(str(tmp_path / f"absent{suffix}"))
    assert "unknown workload" not in str(err.value)


def test_a_workload_folder_outside_the_package_is_resolved_by_path(tmp_path):
    folder = tmp_path / "my_workload"
    folder.mkdir()
    (folder / "__init__.py").write_text("from cuco.workloads.gemm_allgather import WORKLOAD as _W\n"
                                        "import attrs\nWORKLOAD = attrs.evolve(_W, name='my_ag')\n")
    assert resolve(str(folder)).name == "my_ag"


def test_a_folder_needs_an_init_defining_workload(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CucoError, match="__init__.py defining WORKLOAD"):
        load_workload_folder(tmp_path / "empty")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "__init__.py").write_text("X = 1\n")
    with pytest.raises(CucoError, match="defines no WORKLOAD; set WORKLOAD = cuco.workload.Workload"):
        resolve(str(tmp_path / "bare"))


def test_a_folder_whose_import_fails_says_what_it_raised_and_leaves_no_module_behind(tmp_path):
    import sys

    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "__init__.py").write_text("raise ValueError('bad shape table')\n")
    with pytest.raises(CucoError, match="importing the workload failed: ValueError: bad shape table"):
        resolve(str(tmp_path / "broken"))
    assert "cuco_user_workload_broken" not in sys.modules
