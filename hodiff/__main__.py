"""``python -m hodiff demo``, ``python -m hodiff check`` and ``python -m hodiff docs``."""

from __future__ import annotations

import argparse
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
    sub.add_parser("docs", help="regenerate docs/functions.md from the specs and docstrings")
    args = parser.parse_args(argv)
    if args.command == "docs":
        print(f"{PATH}: {'updated' if write_function_reference() else 'up to date'}")
        return 0
    if args.command == "demo":
        return run_demo()
    if args.list:
        print(list_functions())
        return 0
    if args.mutate:
        return run_mutate(order=args.order, functions=args.functions)
    return run_check(order=args.order, functions=args.functions)


if __name__ == "__main__":
    sys.exit(main())
