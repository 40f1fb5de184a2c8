"""``python -m bench``: pins threads first, then runs the benchmark."""

import sys

from bench.cli import parse_args, pin_threads

args = parse_args(sys.argv[1:])
pin_threads(args.threads, pin_cpu=args.pin_cpu)  # before numpy, torch or jax are imported

from bench.run import main  # noqa: E402

sys.exit(main(args))
