"""NNabla's own per-function tests run on hodiff through a shim (a benchmark tool, not CI)."""
