"""Symbolic backpropagation (paper §5.1): gradients of recurrent tensors, built as more recurrent tensors.

``y.backward()`` differentiates "the sum of every element of ``y`` at every point where it is evaluable".
Every forward node that both carries a dependence on a ``requires_grad`` tensor and feeds ``y`` gets a
gradient node over its own domain: a ``grad_accumulate`` whose inputs are the contributions of its
consumers. For a consumer ``c`` reading ``x`` through the index ``f`` (written in ``c``'s dimensions), the
contribution is ``V = vjp_c(grad_c)`` (the op's registered ``grad`` rule, an RT over ``c``'s domain) read
through the *inverse* of ``f`` (`timerl.rt.inversion.invert_read`), masked by ``c``: points of ``c`` that cannot be
evaluated contribute nothing. Gradient nodes are created for every relevant node before any contribution
is added, so recurrences (a merge reading itself at an earlier point) give gradients that are recurrences
running the other way, through finite graphs.

A merge's chain rule is a merge with the same branch conditions: branch ``k`` of ``c`` passes on
``grad_c`` where its condition holds and zeros elsewhere.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from timerl.errors import ShapeError, TimeRLError, user_location
from timerl.ops.registry import ACCUMULATE, MERGE, OPS, Unsupported, is_float, same_dim
from timerl.pdg.graph import Attrs, Edge, IndexItem, Point, Range, TensorType
from timerl.rt import functional as F
from timerl.rt.context import Context, NodeDraft
from timerl.symbolic import (
    FALSE,
    TRUE,
    Cond,
    Symbol,
    conjunction,
    negation,
    same_all,
)
from timerl.rt.inversion import invert_read
from timerl.rt.view import TensorView

RT = TensorView


@dataclass
class BackwardPass:
    """One ``backward()`` call: the gradient node of every forward node it reaches, by forward node id."""

    objective: int
    grads: dict[int, NodeDraft]


# ---- the user API ------------------------------------------------------------------------------------------


def backward(y: RT) -> None:
    ctx = y.ctx
    location = user_location()
    if not is_float(y.dtype):
        raise TimeRLError(f"{location}: backward() needs a floating-point tensor, got {y.dtype}")
    with _recording(ctx):
        if not y.is_plain():
            y = F.apply("identity", y)
        relevant = _relevant(ctx, y.node)
        if y.node.id not in relevant:
            raise TimeRLError(f"{location}: backward() of a tensor that depends on no tensor with "
                              "requires_grad=True (through non-detached operations)")
        grads = {node_id: _gradient_node(ctx, ctx.nodes[node_id]) for node_id in sorted(relevant)}
        _seed(ctx, y, grads[y.node.id])
        for node_id in sorted(relevant, reverse=True):
            _contribute(ctx, ctx.nodes[node_id], grads, relevant)
    ctx.objectives.append(BackwardPass(y.node.id, grads))


def gradient_of(x: RT) -> RT:
    """``x.grad``: the sum over every ``backward()`` so far, read through ``x``'s own view."""
    ctx = x.ctx
    passes = [p for p in ctx.objectives if isinstance(p, BackwardPass)]
    if not passes:
        raise TimeRLError(f"{user_location()}: x.grad is defined by y.backward(); call it first")
    nodes = [p.grads[x.node.id] for p in passes if x.node.id in p.grads]
    with _recording(ctx):
        if not nodes:
            produced = x.node.outputs[x.output]
            total = F.constant(ctx, np.zeros(_static(produced.shape, x.node)), produced.dtype, x.node.domain)
        else:
            total = ctx.view(nodes[0])
            for node in nodes[1:]:
                total = F.apply("add", total, ctx.view(node))
    return ctx.view(total.node, 0, x.index)


@contextlib.contextmanager
def _recording(ctx: Context) -> Iterator[None]:
    """Gradient nodes belong to no `when` block: they must exist wherever the forward points they serve do."""
    saved, ctx._when = ctx._when, []
    try:
        with ctx:
            yield
    finally:
        ctx._when = saved


# ---- which nodes get a gradient ----------------------------------------------------------------------------


def _relevant(ctx: Context, root: NodeDraft) -> set[int]:
    """Nodes that feed ``root`` and depend, through differentiable reads, on a ``requires_grad`` tensor.
    The walk up from ``root`` stops at what passes no gradient (a detach, an earlier backward's gradients
    behind it): what lies beyond cannot carry one to ``root``."""
    ancestors: set[int] = set()
    stack = [root.id]
    while stack:
        node_id = stack.pop()
        if node_id not in ancestors:
            ancestors.add(node_id)
            node = ctx.nodes[node_id]
            if node_id == root.id or node.category is ACCUMULATE or _passes_gradient(node):
                stack.extend(e.producer for e in node.inputs)
    consumers: dict[int, list[int]] = {}
    for node_id in ancestors:
        for edge in ctx.nodes[node_id].inputs:
            consumers.setdefault(edge.producer, []).append(node_id)
    carrying: set[int] = set()
    work = [n for n in ancestors if ctx.nodes[n].requires_grad and _differentiable_output(ctx.nodes[n])]
    while work:
        node_id = work.pop()
        if node_id in carrying:
            continue
        carrying.add(node_id)
        for consumer_id in consumers.get(node_id, ()):
            consumer = ctx.nodes[consumer_id]
            if consumer_id not in carrying and _passes_gradient(consumer):
                work.append(consumer_id)
    return carrying


def _differentiable_output(node: NodeDraft) -> bool:
    return len(node.outputs) == 1 and is_float(node.outputs[0].dtype)


def _passes_gradient(node: NodeDraft) -> bool:
    if node.category is ACCUMULATE:
        raise TimeRLError(f"{node.location}: differentiating a gradient (second-order gradients) is not "
                          "supported; detach() it first")
    if not _differentiable_output(node):
        return False
    return node.category is MERGE or not isinstance(OPS[node.op].grad, Unsupported)


# ---- building the gradient graph ---------------------------------------------------------------------------


def _gradient_node(ctx: Context, node: NodeDraft) -> NodeDraft:
    produced = node.outputs[0]
    attrs = Attrs.of(shape=tuple(produced.shape), dtype=produced.dtype, windows=())
    grad = ctx.add_node("grad_accumulate", attrs, node.domain, [], (TensorType(produced.shape, produced.dtype),),
                        user_location(), condition=TRUE)
    grad.gradient_of = node.id
    return grad


def _add_input(grad: NodeDraft, edge: Edge, window: tuple) -> None:
    grad.inputs.append(edge)
    attrs = grad.attrs.as_dict()
    attrs["windows"] = attrs["windows"] + (window,)
    grad.attrs = Attrs.of(**attrs)


def _seed(ctx: Context, y: RT, grad: NodeDraft) -> None:
    """d(sum of y)/dy = 1 at every point where y is evaluable."""
    start = len(ctx.nodes)
    if all(isinstance(d, int) for d in y.shape):
        ones = F.constant(ctx, np.ones(tuple(y.shape)), y.dtype, domain=y.node.domain)
    else:  # a window's length changes from point to point: broadcast a one to it there
        one = F.constant(ctx, np.ones((1,) * len(y.shape)), y.dtype, domain=y.node.domain)
        ones = F.apply("expand", one, shape=tuple(y.shape))
    _add_input(grad, Edge(ones.node.id, 0, ones.index, TRUE, masked_by=y.node.id), ())
    _mark(ctx, start, y.node.id)


def _contribute(ctx: Context, consumer: NodeDraft, grads: dict[int, NodeDraft], relevant: set[int]) -> None:
    """Add ``consumer``'s contribution to the gradient of each relevant node it reads."""
    if not any(e.producer in relevant for e in consumer.inputs):
        return
    start = len(ctx.nodes)
    grad_out = ctx.view(grads[consumer.id])
    if consumer.category is MERGE:
        vjps = [grad_out] * len(consumer.inputs)
    else:
        ins = [ctx.view(ctx.nodes[e.producer], e.output, e.index) for e in consumer.inputs]
        outs = [ctx.view(consumer, k) for k in range(len(consumer.outputs))]
        try:
            vjps = list(OPS[consumer.op].grad(F, ins, outs, [grad_out], consumer.attrs))
        except ShapeError as error:
            raise ShapeError(f"{consumer.location}: the gradient of {consumer.op} failed: {error}") from None
    for edge, vjp in zip(consumer.inputs, vjps):
        if edge.producer in relevant and vjp is not None:
            _accumulate(ctx, grads[edge.producer], consumer, edge, vjp)
    _mark(ctx, start, consumer.id)


def _mark(ctx: Context, start: int, forward_id: int) -> None:
    for node in ctx.nodes[start:]:
        if node.gradient_of is None:
            node.gradient_of = forward_id


def _accumulate(ctx: Context, grad: NodeDraft, consumer: NodeDraft, edge: Edge, vjp: RT) -> None:
    producer = ctx.nodes[edge.producer]
    produced = producer.outputs[edge.output]
    lengths = tuple(item.length() for item in edge.index if isinstance(item, Range))
    read_shape = lengths + tuple(produced.shape)
    if len(vjp.shape) != len(read_shape) or not all(same_dim(a, b) for a, b in zip(vjp.shape, read_shape)):
        raise ShapeError(f"{consumer.location}: the gradient rule of {consumer.op} gave shape "
                         f"{tuple(vjp.shape)} for an input read with shape {read_shape}")
    if vjp.dtype != produced.dtype:
        vjp = F.astype(vjp, produced.dtype)
    bounds = {d: ctx.bound_of(d) for d in set(producer.domain) | set(consumer.domain)}
    alternatives = invert_read(edge, consumer, producer, bounds)
    branch = edge.condition
    if branch is not TRUE and all(_branch_at(branch, consumer.domain, index) is not None
                                  for _, index in alternatives):
        # every consumer point q reading p is a function of p: the branch condition becomes one on p
        alternatives = [(conjunction(condition, _branch_at(branch, consumer.domain, index)), index)
                        for condition, index in alternatives]
        vjp = _only_where(ctx, branch, vjp, consumer.domain, zeros_elsewhere=False)
    elif branch is not TRUE:
        vjp = _only_where(ctx, branch, vjp, consumer.domain)
    vjp = _over_domain(ctx, vjp, consumer.domain)
    window = tuple((dim, item.start, item.step, consumer.domain)
                   for dim, item in zip(producer.domain, edge.index) if isinstance(item, Range))
    for condition, index in alternatives:
        if condition is not FALSE:
            _add_input(grad, Edge(vjp.node.id, vjp.output, index, condition, masked_by=consumer.id), window)


def _branch_at(branch: Cond, domain: tuple[Symbol, ...], index: tuple[IndexItem, ...]) -> Cond | None:
    """``branch(q)`` written in the producer's point, when the inverted index pins each dim it mentions."""
    mapping = {}
    for dim, item in zip(domain, index):
        if dim in branch.symbols():
            if not isinstance(item, Point):
                return None
            mapping[dim] = item.expr
    return branch.substitute(mapping)


def _only_where(ctx: Context, condition: Cond, vjp: RT, domain: tuple[Symbol, ...],
                zeros_elsewhere: bool = True) -> RT:
    """The chain rule of a merge branch, a merge with the branch's condition: ``vjp`` where it holds (and
    zeros elsewhere, unless the reads of the result already keep to where it holds). Keeping a merge here
    also keeps every cycle of the gradient graph (a recurrence run backwards) through a merge."""
    branches = [Edge(vjp.node.id, vjp.output, vjp.index, condition)]
    if zeros_elsewhere:
        if all(isinstance(d, int) for d in vjp.shape):
            zero = F.constant(ctx, np.zeros(tuple(vjp.shape)), vjp.dtype)
        else:
            zero = F.apply("mul", vjp, 0.0)
        branches.append(Edge(zero.node.id, zero.output, zero.index, negation(condition)))
    node = ctx.add_node("merge", Attrs.of(shape=tuple(vjp.shape), dtype=vjp.dtype), domain, branches,
                        (TensorType(tuple(vjp.shape), vjp.dtype),), user_location(), condition=TRUE)
    return ctx.view(node)


def _over_domain(ctx: Context, vjp: RT, domain: tuple[Symbol, ...]) -> RT:
    """A plain view over exactly ``domain``: masked reads pick points of the consumer's domain."""
    if vjp.is_plain() and same_all(vjp.node.domain, domain):
        return vjp
    zero = F.constant(ctx, 0, vjp.dtype, domain=domain)
    return F.apply("add", vjp, zero)


def _static(shape, node: NodeDraft) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in shape):
        raise ShapeError(f"{node.location}: gradients of tensors with a dynamic shape {tuple(shape)} are not "
                         "supported here")
    return tuple(shape)

