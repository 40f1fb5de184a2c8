"""The engine: variables, function nodes, the clock, ordering, the passes and ``hd.grad``.

It imports nothing above it. The rooms above (rules, transforms, training, tools) use
what :mod:`hodiff.engine.api` lists.
"""
