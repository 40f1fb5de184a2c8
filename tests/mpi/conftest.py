"""The scripts here run under mpiexec (driven by tests/test_distributed.py), never inside pytest."""

collect_ignore_glob = ["*.py"]
