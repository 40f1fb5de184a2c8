"""hodiff's benchmark against PyTorch, JAX and HIPS autograd (issue 5).

Run ``python -m bench`` (``--help`` for options, ``--quick`` for a fast run).
This package imports nothing heavy on import: ``python -m bench`` pins the
thread count before numpy, torch or jax are loaded (see :mod:`bench.cli`).
"""
