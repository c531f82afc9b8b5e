"""`python -m cuco`: the same as the `cuco` command."""

from cuco.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
