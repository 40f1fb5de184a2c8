"""Checkpointing: recomputation instead of memory, at every derivative order."""

from hodiff.transforms.checkpointing.node import Checkpoint, checkpoint

__all__ = ["Checkpoint", "checkpoint"]
