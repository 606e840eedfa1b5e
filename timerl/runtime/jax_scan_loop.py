"""The analysis half of compiled loops (`timerl.runtime.jax_scan`, whose docstring says which loops qualify):
a loop's body as statements whose every read is classified (this iteration's value, the previous iteration's,
a value of before the loop read once or one point per iteration), found once when the program is lowered. The
segment runner (`jax_scan.ScannedLoop`) gets the result, a `LoopAnalysis`, explicitly, and keeps what a run at
one value of the outer counters needs as a `RunPlan`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from timerl.ops.registry import CONST, MERGE
from timerl.pdg.graph import Node, Point, identity_read
from timerl.pdg.sizes import static_bytes
from timerl.runtime.jax_plan import JaxGroupLowering
from timerl.runtime.statements import flatten, freed_parts
from timerl.runtime.walk import AstInterpreter
from timerl.sched.peel import pinned_value
from timerl.symbolic import TRUE, Symbol, compile_function
from timerl.sched import ast

LOCAL, CARRIED, INVARIANT, SLICED = "local", "carried", "invariant", "sliced"


@dataclass(frozen=True)
class Read:
    """One input of a member: a value of this iteration (``LOCAL``), of the previous one (``CARRIED``), from
    the pool, the same at every iteration (``INVARIANT``, its key a function of the outer counters), or from
    the pool, one point per iteration (``SLICED``: a value of before the loop read along the loop's dimension,
    its key a function of the outer counters and the loop's; passed to the scan as one stacked array);
    ``test`` is the index of its condition among the loop's tests, None when it always holds."""

    kind: str
    producer: int
    output: int
    test: int | None
    key: Callable | None = None


@dataclass(frozen=True)
class Statement:
    """A group run at the loop's point: its members with their reads, and those of its stored members that
    are read after the loop (stored in the pool as stacks)."""

    group: int
    members: tuple[Node, ...]
    reads: tuple[tuple[_Read, ...], ...]
    guard: Callable | None
    stored: tuple[int, ...]
    prefix: Callable  # the point's coordinates other than the loop's, and its last one at counter 0


class Unscannable(Exception):
    """The loop keeps its point-by-point program (the message says why)."""



class LoopAnalysis:
    """What a loop's body does, found once when the program is lowered (see `timerl.runtime.jax_scan`): its
    statements with the kind of each read, the conditions, the carried values, the statements hoisted before or
    after the scans, and the frees; raises `Unscannable` when the loop does not qualify."""

    def __init__(self, interpreter: Any, node: ast.Loop, scope: tuple[Symbol, ...]) -> None:
        executable = interpreter.executable
        self.executable = executable
        self.graph = graph = executable.graph
        self.backend = executable.backend
        self.seed = executable.seed
        if node.step != 1:
            raise Unscannable("a step other than 1")
        leaves = flatten(node.body)
        if not leaves or not any(isinstance(leaf, ast.Execute) for _, leaf in leaves):
            raise Unscannable("no statement in the body, or inner loops")
        self.inner = inner = scope + (node.var,)
        self.limits = compile_function((node.start, node.stop), scope)
        self.scope = scope
        self.fallback = AstInterpreter._loop(interpreter, node, scope)
        lowering = JaxGroupLowering(graph, executable.bounds, self.backend, {"SEED": self.seed}, None, True)
        self.is_pure = lowering._pure
        var = node.var
        # a statement at a point the loop does not change (isl placed it at one iteration, e.g. t == 0) runs
        # before the scans
        hoisted = [(conditions, leaf) for conditions, leaf in leaves
                   if isinstance(leaf, ast.Execute) and not any(var in e.symbols() for e in leaf.point)]
        executes = [(conditions, leaf) for conditions, leaf in leaves
                    if isinstance(leaf, ast.Execute) and (conditions, leaf) not in hoisted]
        body_groups = [leaf.node for _, leaf in executes]
        if not body_groups or len(set(body_groups)) != len(body_groups) or any(
                _executions(executable.schedule.root, leaf.node) != 1 for _, leaf in executes + hoisted):
            raise Unscannable("a group that also runs elsewhere")
        slopes = {_slope(leaf.point[-1], var) if leaf.point else None for _, leaf in executes}
        if len(slopes) != 1 or slopes & {None} or any(var in e.symbols() for _, leaf in executes
                                                      for e in leaf.point[:-1]):
            raise Unscannable("a statement whose point is not (outer point, the loop's counter +- a shift), "
                               "or statements running in opposite directions")
        self.slope = slopes.pop()  # 1, or -1: isl's loop over a backward recurrence (GAE's adv[t + 1])
        self.group_of = {m: g for g in body_groups for m in executable.groups[g].members}
        # one that reads a value of the loop (isl placed a consumer of the loop's last value at its last
        # iteration), or of such a statement, runs after the scans, from the values they stored, when nothing
        # of the loop reads it
        after, after_members, reads_loop = [], set(), set(self.group_of)
        while True:
            more = [(conditions, leaf) for conditions, leaf in hoisted if (conditions, leaf) not in after and any(
                e.producer in reads_loop for m in executable.groups[leaf.node].members for e in graph.nodes[m].inputs)]
            if not more:
                break
            after += more
            for _, leaf in more:
                after_members |= set(executable.groups[leaf.node].members)
            reads_loop |= after_members
        after = [h for h in hoisted if h in after]  # in the program's order
        hoisted = [h for h in hoisted if h not in after]
        if any(e.producer in after_members for _, leaf in executes + hoisted
               for m in executable.groups[leaf.node].members for e in graph.nodes[m].inputs):
            raise Unscannable("a statement at the outer point reads a value of the loop and is read by it")
        self.hoisted, self.after = ([(compile_function(tuple(conditions), inner) if conditions else None,
                                      executable.group_functions[leaf.node], compile_function(leaf.point, inner))
                                     for conditions, leaf in statements] for statements in (hoisted, after))
        self.hoisted_members = {m for _, leaf in hoisted for m in executable.groups[leaf.node].members}
        self.order = {g: k for k, g in enumerate(body_groups)}
        self.points = {leaf.node: leaf.point for _, leaf in executes}
        self.tests: list[Callable] = []  # conditions of the body, functions of the counters and the loop's
        self.test_conditions: list[tuple] = []  # the same, as conditions
        self.statements = [self._statement(conditions, leaf) for conditions, leaf in executes]
        self.carried = sorted({(r.producer, r.output) for s in self.statements for reads in s.reads for r in reads
                               if r.kind == CARRIED})
        self.frees = [self._free(conditions, leaf) for conditions, leaf in leaves if isinstance(leaf, ast.Deallocate)]
        self.frees = [f for f in self.frees if f[2]]
        # the outer counters that the conditions read: the iterations' outcomes (and which frees run where) are
        # the same for every outer point that agrees on them, so they are computed once per such point and bounds
        conditions = [c for c, _ in leaves] + self.test_conditions
        read = {symbol.name for group in conditions for cond in group for symbol in cond.symbols()}
        self.deciding = tuple(k for k, symbol in enumerate(scope) if symbol.name in read)


    def _test(self, conditions: tuple) -> int | None:
        if not conditions:
            return None
        self.tests.append(compile_function(tuple(conditions), self.inner))
        self.test_conditions.append(tuple(conditions))
        return len(self.tests) - 1

    def _statement(self, conditions: tuple, leaf: ast.Execute) -> Statement:
        group = self.executable.groups[leaf.node]
        members = tuple(self.graph.nodes[n] for n in group.members)
        reads = []
        for member in members:
            if len(member.domain) != len(leaf.point):
                raise Unscannable("a member over fewer dimensions")
            if member.category is MERGE:
                if len(member.outputs) != 1 or static_bytes(member) is None:
                    raise Unscannable("a merge with dynamic shapes")
            elif member.category is not CONST and not (self.is_pure(member) and len(member.outputs) == 1):
                raise Unscannable(f"{member.label()} is no pure jax kernel")
            reads.append(tuple(self._read(member, edge, leaf) for edge in member.inputs))
        body = set(self.group_of)
        stored = tuple(m for m in group.freed_later
                       if any(consumer not in body for consumer, _ in self.graph.consumers(m)))
        origin = leaf.point[-1].substitute({self.inner[-1]: 0})
        return Statement(leaf.node, members, tuple(reads), self._test(conditions), stored,
                          compile_function(leaf.point[:-1] + (origin,), self.scope))

    def _read(self, member: Node, edge, leaf: ast.Execute) -> Read:
        group = leaf.node
        producer = self.graph.nodes[edge.producer]
        if self.group_of.get(edge.producer) == group and identity_read(edge, member, producer):
            return Read(LOCAL, edge.producer, edge.output, None)
        if edge.masked_by is not None or not all(isinstance(item, Point) for item in edge.index):
            # ranges and gradient contributions stay with the point-by-point program
            raise Unscannable(f"{member.label()} reads a range or gradient contributions")
        rename = dict(zip(member.domain, leaf.point))
        bounds = self.executable.bounds
        index = [item.expr.substitute(bounds).substitute(rename) for item in edge.index]
        test = None
        condition = edge.condition.substitute(bounds).substitute(rename)
        if edge.condition is not TRUE:
            test = self._test((condition,))
        var = self.inner[-1]
        writer = self.group_of.get(edge.producer)
        if writer is None:
            if not any(var in e.symbols() for e in index):
                return Read(INVARIANT, edge.producer, edge.output, test, compile_function(tuple(index), self.scope))
            if any(var in e.symbols() for e in index[:-1]) or _slope(index[-1], var) is None:
                raise Unscannable(f"{member.label()} reads a value of before the loop across the loop's steps")
            return Read(SLICED, edge.producer, edge.output, test, compile_function(tuple(index), self.inner))
        written_at = self.points[writer]
        if len(index) != len(written_at):
            raise Unscannable(f"{member.label()} reads at another rank")
        for expr, coordinate in zip(index[:-1], written_at[:-1]):
            if (expr - coordinate).constant_value() != 0:
                raise Unscannable(f"{member.label()} reads another outer point")
        shift = (written_at[-1] - index[-1]).constant_value()  # the writer's point at this iteration, less the read
        at = pinned_value(condition, var) if shift is None and edge.condition is not TRUE else None
        if at is not None:  # a read made at one iteration only (adv[i, T - 1] = delta[i, T - 1])
            shift = (written_at[-1] - index[-1]).substitute({var: at}).constant_value()
        distance = None if shift is None else shift * self.slope  # iterations back
        if distance == 0 and self.order[writer] < self.order[group]:
            return Read(LOCAL, edge.producer, edge.output, test)
        if distance == 1:
            return Read(CARRIED, edge.producer, edge.output, test)
        raise Unscannable(f"{member.label()} reads {distance} iterations back")

    def _free(self, conditions: tuple, leaf: ast.Deallocate) -> tuple:
        """(test, point, [(member, outputs or None, count)]) for the stored members read after the loop."""
        outside = {m for s in self.statements for m in s.stored}
        group = self.executable.groups[leaf.node]
        if leaf.parts is None:
            parts = [(m, None, 0) for m in group.freed_later if m in outside or m not in self.group_of]
        else:
            parts = [p for p in freed_parts(leaf, self.graph) if p[0] in outside or p[0] not in self.group_of]
        test = compile_function(tuple(conditions), self.inner) if conditions else None
        return test, compile_function(leaf.point, self.inner), parts



def _executions(root: ast.AstNode, group: int) -> int:
    """How many statements of the program run ``group``."""
    return sum(isinstance(node, ast.Execute) and node.node == group for node in ast.every_node(root))


def _slope(expr: Any, var: Symbol) -> int | None:
    """1 or -1 where ``expr`` is the counter ``var`` plus or minus a shift that does not depend on it, else None."""
    slope = (expr.substitute({var: var + 1}) - expr).constant_value()
    if slope not in (1, -1) or var in (expr - var * slope).symbols():
        return None
    return slope


@dataclass(frozen=True)
class RunPlan:
    """A run of the loop at one value of the outer counters, as far as it depends only on them
    (`timerl.runtime.jax_scan.ScannedLoop._run_plan`)."""

    checked: tuple  # the pool keys every run needs (else the point-by-point program runs)
    hoisted: tuple  # (statement's function, its point): run before the scans
    loads: tuple  # (pool key, output): the invariants, each loaded once
    arguments: tuple  # per segment, its invariants' slots in ``loads``
    sliced: tuple  # per segment, per sliced read: (its keys, one per iteration; its output)
    function: Callable  # the run's segments as one jitted function (`jax_scan.ScannedLoop._whole_run`)
    traced: Any  # one int64 vector: every statement's prefix, then each segment's first iteration
    prefixes: list
    outcomes: tuple  # each segment's (outcomes, first iteration)
    stores: tuple  # per stored member, in the order of the function's stacks: (member, its points, bytes of one)
    after: tuple  # (statement's function, its point): run after the scans
    frees: tuple  # (keys, outputs or None, count): one pool call each
