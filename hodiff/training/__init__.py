"""Training: parameters, layers (``PF``), initializers (``I``), solvers (``S``), data-parallel."""
