"""``python -m hodiff demo``, ``python -m hodiff check`` and ``python -m hodiff docs``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hodiff", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="gradient, HVP and third derivative of a small model")
    check = sub.add_parser("check", help="verify every function against finite differences")
    check.add_argument("--order", type=int, default=3, help="highest order to check (default 3)")
    check.add_argument("--functions", nargs="*", metavar="NAME", help="only these functions")
    sub.add_parser("docs", help="regenerate docs/functions.md from the specs and docstrings")
    args = parser.parse_args(argv)
    if args.command == "docs":
        from hodiff.docgen import PATH, write_function_reference

        print(f"{PATH}: {'updated' if write_function_reference() else 'up to date'}")
        return 0
    if args.command == "demo":
        from hodiff.demo import run_demo

        return run_demo()
    from hodiff.cli_check import run_check

    return run_check(order=args.order, functions=args.functions)


if __name__ == "__main__":
    sys.exit(main())
