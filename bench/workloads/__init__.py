"""The benchmark workloads (W1-W7), grouped by shared inputs.

Each group is a :class:`~bench.workloads.common.Workload`: one input maker and,
per library, a builder that returns one zero-argument callable per task (the
thing that is timed). Every library gets the same numpy inputs.
"""

from __future__ import annotations

from bench.workloads import chain, checkpoint, cnn, critic, hessian, mlp, per_example, taylor
from bench.workloads.common import Task, Workload, to_numpy

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        mlp.WORKLOAD,
        critic.WORKLOAD,
        chain.WORKLOAD,
        hessian.WORKLOAD,
        cnn.WORKLOAD,
        per_example.WORKLOAD,
        checkpoint.WORKLOAD,
        taylor.WORKLOAD,
    )
}

__all__ = ["WORKLOADS", "Task", "Workload", "to_numpy"]
