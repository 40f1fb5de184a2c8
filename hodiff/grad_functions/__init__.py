"""Gradient-only functions: what the backward rules of ``hodiff.functions`` need.

Each module here holds the gradient-only primitives of one family of
``hodiff.functions`` (the scatter-adds that transpose indexing, a convolution's
filter gradient, ...). Their own backward rules call the forward functions again
(the transpose of a scatter is a gather), so a family and its gradient-only module
import each other at module level: each imports the other as a module
(``from hodiff.functions import indexing as _indexing``) and looks its names up
when a rule runs, which works whichever of the two is imported first.
"""
