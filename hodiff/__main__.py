"""``python -m hodiff demo``, ``python -m hodiff check`` and ``python -m hodiff docs``."""

from __future__ import annotations

import argparse
import pathlib
import sys

from hodiff.tools.cli_check import add_parser, list_functions, run_check, run_mutate
from hodiff.tools.demo import run_demo
from hodiff.tools.docgen import PATH, write_function_reference


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hodiff",
        description="hodiff command line: a demo, and checking every function's derivatives.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="gradient, HVP and third derivative of a small model")
    add_parser(sub)
    docs = sub.add_parser("docs", help="regenerate docs/functions.md from the specs and docstrings")
    docs.add_argument(
        "out",
        nargs="?",
        default=None,
        help="the file (or folder) to write: default docs/functions.md in a source checkout, "
        "./functions.md in an installed hodiff (which has no docs folder)",
    )
    args = parser.parse_args(argv)
    if args.command == "docs":
        return _docs(args.out)
    if args.command == "demo":
        return run_demo()
    if args.list:
        print(list_functions())
        return 0
    if args.mutate:
        return run_mutate(order=args.order, functions=args.functions)
    return run_check(order=args.order, functions=args.functions)


def _docs(out: str | None) -> int:
    """Writes the function reference to ``out``, or where :func:`main`'s help says."""
    if out is not None:
        path = pathlib.Path(out)
        if path.is_dir():
            path = path / PATH.name
    else:
        path = PATH if PATH.parent.is_dir() else pathlib.Path.cwd() / PATH.name
    if not path.parent.is_dir():
        print(f"python -m hodiff docs: the folder {path.parent} does not exist", file=sys.stderr)
        return 2
    print(f"{path}: {'updated' if write_function_reference(path) else 'up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
