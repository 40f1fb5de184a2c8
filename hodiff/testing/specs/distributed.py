"""Specs of hodiff/functions/distributed.py.

On one process ``all_reduce`` is the identity, which is what the table checks
here (the protocol: every order, static graphs, accumulate); its values and
derivatives over several ranks are checked under ``mpiexec`` by
tests/test_distributed.py.
"""

import hodiff.functions as F
from hodiff.testing.spec import Spec
from hodiff.training.distributed import Communicator

ONE = Communicator.single_process()

SPECS = [
    Spec(F.all_reduce, ((2, 3),), lambda x, comm: x, kwargs={"comm": ONE}, linear=True),
    Spec(F.all_reduce, ((),), lambda x, comm: x, kwargs={"comm": ONE}, linear=True, id="0d"),
]
