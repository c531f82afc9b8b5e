"""A user's own host program, end to end: `cuco run prog.cu` (observed by csrc/include/cuco/program/observe.h)."""

from cuco.program.source import HostProgram, ProgramError

__all__ = ["HostProgram", "ProgramError"]
