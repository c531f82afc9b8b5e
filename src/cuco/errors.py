"""The one exception family of cuco: every message names the problem and the fix."""


class CucoError(Exception):
    """Base class of errors that cuco reports to users (CLI prints the message, no traceback)."""
