"""Packaging shim: ships the C++/CUDA harness sources in csrc/ inside the wheel as cuco/_csrc."""
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent.resolve()


class BuildPyWithCsrc(build_py):
    """Copy csrc/ into the built package so non-editable installs can build the harness."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "cuco" / "_csrc"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(ROOT / "csrc", target)


setup(cmdclass={"build_py": BuildPyWithCsrc})
