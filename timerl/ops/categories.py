"""Op categories: what every pass and executor needs to know of an op without naming it (STYLE.md, example 3).

Each op in the registry has one category; code above the ops dispatches on the category (``node.category is
MERGE``, ``category.root``) instead of testing op names. The fields answer the questions the passes ask:

- ``kernel``: evaluated by the op's array kernel (its registry ``impl``); otherwise the executor evaluates it
  itself, one way per category (`timerl.runtime.evaluate`): a constant's value, a counter-based draw, a user's
  source, sink or UDF function, the branch a merge selects, the sum of gradient contributions;
- ``root``: demanded on its whole definition domain whether or not anything reads it (sinks, and UDFs such as
  environments: side effects run at every point of their domain);
- ``checked``: the verifier recomputes its output types from the op's shape and dtype rules (a merge, a UDF, a
  gradient accumulation and a sink declare theirs);
- ``pure``: equal inputs give equal outputs and nothing else happens, so common subexpression elimination may
  merge repeats (a draw is keyed by its stream, a user's function may have effects, a merge is a recurrence);
- ``calls_user``: runs a user's Python function, on the host, point by point;
- ``batched``: how a vectorized statement (`timerl.runtime.batch`) computes it at many points at once:
  ``"rule"`` (the op's ``vectorize`` rule, or the array library's vmap of its kernel), ``"shared"`` (the same
  value at every point: a constant), ``"summed"`` (each point's contributions summed, stacked where they can
  be), ``"points"`` (called point by point once the batch is computed: sinks), ``"selected"`` (each point's
  active input, gathered in runs of points that select the same one: merges), ``"evaluated"`` (a value of the
  point alone, computed on the host for every point of the batch and stacked: an integer expression as a tensor),
  ``"never"`` (a statement holding it runs point by point: sources, draws, UDFs).

An ``index`` op is an integer expression of the point and the bounds as a scalar tensor (``T - t``): the
executor evaluates the expression at each point, with the bounds of the run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Category:
    name: str
    kernel: bool
    root: bool = False
    checked: bool = True
    pure: bool = True
    calls_user: bool = False
    batched: str = "rule"

    def __repr__(self) -> str:
        return self.name


ELEMENTWISE = Category("elementwise", kernel=True)
REDUCTION = Category("reduction", kernel=True)
SCAN = Category("scan", kernel=True)  # along one axis, keeping its length: cumsum, softmax, discounted sums
MOVEMENT = Category("movement", kernel=True)  # layout and indexing: reshape, permute, gather, scatter, ...
CONTRACTION = Category("contraction", kernel=True)  # matmul
CONST = Category("const", kernel=False, batched="shared")
SOURCE = Category("source", kernel=False, pure=False, calls_user=True, batched="never")
DRAW = Category("draw", kernel=False, pure=False, batched="never")
INDEX = Category("index", kernel=False, batched="evaluated")
SINK = Category("sink", kernel=False, root=True, checked=False, pure=False, calls_user=True, batched="points")
MERGE = Category("merge", kernel=False, checked=False, pure=False, batched="selected")
UDF = Category("udf", kernel=False, root=True, checked=False, pure=False, calls_user=True, batched="never")
ACCUMULATE = Category("accumulate", kernel=False, checked=False, pure=False, batched="summed")

CATEGORIES = (ELEMENTWISE, REDUCTION, SCAN, MOVEMENT, CONTRACTION, CONST, SOURCE, DRAW, INDEX, SINK, MERGE, UDF, ACCUMULATE)
