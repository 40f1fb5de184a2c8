"""Checkpointing: recomputation instead of memory, at every derivative order.

A package whose data flows one way: each module imports only those before it.

1. :mod:`.segment`: the graph one run of ``f`` makes, walked and checked (what it reaches
   of the enclosing graph, its reverse pass bounded to its own nodes);
2. :mod:`.replay`: ``f`` computed again with its first run's draws; the recorded
   gradient's function (``Vjp``);
3. :mod:`.handover`: the policy that owns the byte budget: what a recorded gradient's
   plain pass leaves to the forward checkpoint of the same segment (``Handed``);
4. :mod:`.kept`: the first graph kept without its values, recomputed by its own nodes
   (``Kept``);
5. :mod:`.jet`: the Taylor rule's parts (the checkpoint of the jet);
6. :mod:`.tracing`: ``f``'s first run, which gives a node its outputs and externals;
7. :mod:`.node`: ``checkpoint`` and the ``Checkpoint`` node, one rule per transform.
"""

from hodiff.transforms.checkpointing.node import Checkpoint, checkpoint

__all__ = ["Checkpoint", "checkpoint"]
