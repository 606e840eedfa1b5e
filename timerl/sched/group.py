"""Dataflow groups: the statements isl schedules (paper §5.4, "fusion" for the scheduler's sake).

Ops that run on the same points and pass values only through identity edges (``x[b, i, t]`` read at
``[b, i, t]``, no condition, no mask) behave as a dataflow graph at every point; scheduling them one by one
only makes isl's integer programs larger (it was minutes for ~50 ops, and is a second as groups). A group
runs its members in dataflow order at each point; values read only inside the group are freed right after
it, values read by other groups are freed by the group's deallocation statement.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from timerl.errors import ScheduleError
from timerl.ops.registry import MERGE
from timerl.pdg.graph import Edge, Graph, Node, Point, identity_read
from timerl.sched.demand import Demand


@dataclass(frozen=True)
class Group:
    id: int
    members: tuple[int, ...]  # node ids in dataflow order
    domain: isl.Set  # the points the members run at, named S<first member>
    freed_inside: tuple[int, ...]  # members whose points are freed right after the group runs
    freed_later: tuple[int, ...]  # members read by other groups: freed by the deallocation statement


def _advances(edge: Edge, consumer: Node, producer: Node) -> bool:
    """A recurrence edge into a placeholder (``o[t + 1] = rhs``): the merge at ``p`` reads its right-hand side
    at a strictly earlier point. A path through it continues at a later point, so it cannot close a cycle at
    one point, and fusion may ignore it."""
    if consumer.category is not MERGE:
        return False
    for item, dim in zip(edge.index, producer.domain):
        if not isinstance(item, Point):
            return False
        shift = (dim - item.expr).constant_value()
        if shift is None or shift < 0:
            return False
        if shift > 0:
            return True
    return False


def group_nodes(graph: Graph, demand: Demand, fuse: bool = True, per_iteration: bool = True,
                split_tails: bool = False, absorb_state: bool = True) -> tuple[list[Group], dict[int, int]]:
    """Greedy fusion along identity edges. Two groups merge only when every edge between them is an identity
    edge and no path leads from one to the other through a third group at the same point (that path would
    become a cycle); paths through recurrence edges move to another point and do not count. With
    ``per_iteration`` (with or without ``fuse``), groups that run once per outer iteration also merge with each
    other (`_fuse_per_iteration`). With ``split_tails``, the members of a recurrent group that its recurrence
    does not need become a group of their own (`_recurrent_tail`). With ``absorb_state`` (and ``fuse``), a
    placeholder that only carries a group's own state joins that group (`_absorb_own_state`)."""
    running = [n.id for n in graph.nodes if n.id in demand.demand and not demand.demand[n.id].is_empty()]
    running_set = set(running)
    parent = {n: n for n in running}

    def find(node_id: int) -> int:
        while parent[node_id] != node_id:
            parent[node_id] = parent[parent[node_id]]
            node_id = parent[node_id]
        return node_id

    edges = [(e.producer, n.id, identity_read(e, n, graph.nodes[e.producer])) for n in graph.nodes
             if n.id in running_set for e in n.inputs if e.producer in running_set]
    # Group-level graphs kept up to date as groups merge (rescanning every edge per merge was quadratic):
    # partners joined by a non-identity edge, and successors / predecessors along edges that stay at one point.
    blocked: dict[int, set[int]] = {n: set() for n in running}
    successors: dict[int, set[int]] = {n: set() for n in running}
    predecessors: dict[int, set[int]] = {n: set() for n in running}
    # A recurrence edge (`_advances`) does not keep two groups apart: it reads an earlier point, which the
    # merged group's statement computed at an earlier step (a rollout's step and the observation it feeds back)
    advancing = {(e.producer, n.id) for n in graph.nodes if n.id in running_set for e in n.inputs
                 if e.producer in running_set and _advances(e, n, graph.nodes[e.producer])
                 }
    for u, v, identity in edges:
        if not identity and u != v and (u, v) not in advancing:
            blocked[u].add(v)
            blocked[v].add(u)
    for node in graph.nodes:
        for edge in node.inputs if node.id in running_set else ():
            if (edge.producer in running_set and edge.producer != node.id
                    and not _advances(edge, node, graph.nodes[edge.producer])):
                successors[edge.producer].add(node.id)
                predecessors[node.id].add(edge.producer)

    def reaches(start: int, goal: int) -> bool:
        """A path from ``start`` to ``goal`` through at least one other group."""
        stack = [s for s in successors[start] if s not in (goal, start)]
        seen = set(stack) | {start}
        while stack:
            current = stack.pop()
            if current == goal:
                return True
            for nxt in successors[current]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return False

    def absorb(table: dict[int, set[int]], mirror: dict[int, set[int]], into: int, gone: int) -> None:
        for other in table.pop(gone):
            mirror[other].discard(gone)
            if other != into:
                mirror[other].add(into)
                table[into].add(other)
        table[into].discard(gone)

    def merge(into: int, gone: int) -> None:
        parent[gone] = into
        absorb(blocked, blocked, into, gone)
        absorb(successors, predecessors, into, gone)
        absorb(predecessors, successors, into, gone)

    context = demand.polyhedra.generic_context  # demand sets that differ only by ``T > 0`` are equal
    points = {n: demand.demand[n].intersect_params(context).set_tuple_name("X") for n in running}
    for producer, consumer, identity in edges:
        if not identity or not fuse:
            continue
        a, b = find(producer), find(consumer)
        if a == b or b in blocked[a] or not points[consumer].is_equal(points[producer]):
            continue
        if not reaches(a, b) and not reaches(b, a):
            merge(a, b)
    absorbed = (_absorb_own_state(graph, demand, running, points, find, merge, reaches, blocked)
                if fuse and absorb_state else set())
    if per_iteration:
        _fuse_per_iteration(graph, running, points, find, merge, successors, blocked)
    by_root: dict[int, list[int]] = {}
    for node_id in running:
        by_root.setdefault(find(node_id), []).append(node_id)
    members: list[list[int]] = []
    for ids in by_root.values():
        tail = _recurrent_tail(graph, ids, advancing) if split_tails and fuse else set()
        members.extend([[n for n in ids if n not in tail], sorted(tail)] if tail else [ids])
    groups: list[Group] = []
    group_of: dict[int, int] = {}
    for index, ids in enumerate(members):
        for node_id in ids:
            group_of[node_id] = index
    for index, ids in enumerate(members):
        ordered = _dataflow_order(graph, ids, group_of, index)
        external = {u for u, v, identity in edges if group_of[u] == index and (group_of[v] != index or not identity)}
        stored = [n for n in ordered if graph.nodes[n].outputs]
        first = next(n for n in ordered if n not in absorbed)
        domain = demand.demand[first].set_tuple_name(f"S{index}")
        groups.append(Group(index, tuple(ordered), domain,
                            tuple(n for n in stored if n not in external),
                            tuple(n for n in stored if n in external)))
    return groups, group_of


def _absorb_own_state(graph: Graph, demand: Demand, running: list[int], points: dict[int, isl.Set], find, merge,
                      reaches, blocked: dict[int, set[int]]) -> set[int]:
    """Fuse a placeholder that only carries a group's own state from one step to the next into that group.

    A placeholder (``s[0] = init; s[m + 1] = f(...)[m]``) runs on its whole domain, and the group reading
    it may run on fewer points (a Drop-backup that stops one move before the end): their points differ, so
    the placeholder stayed a statement of its own, which only loads a value and stores it again at every
    step (the RT MMapGame: nine such statements per move). When every reader of the placeholder sits in one
    group, reads it at the same point (identity reads), runs on a subset of its points, and every branch of the
    placeholder reads that group's members or values computed before the loop (no other statement's), the
    placeholder becomes a member of that group: it runs only where the group runs; its other points were
    read by nobody. Its demand and its reads are narrowed to the group's points (in ``demand``), so that
    the values its dropped points would have read are freed as unread. Returns the placeholders absorbed."""
    absorbed: set[int] = set()
    readers: dict[int, list[tuple[Node, Edge]]] = {}
    for node in graph.nodes:
        for edge in node.inputs:
            readers.setdefault(edge.producer, []).append((node, edge))
    running_set = set(running)
    for node_id in running:
        node = graph.nodes[node_id]
        if node.category is not MERGE or _running_sum(node) or find(node_id) != node_id:
            continue
        if any(find(other) == node_id for other in running if other != node_id):
            continue  # fused with something already
        reading = [(r, e) for r, e in readers.get(node_id, ()) if r.id in running_set]
        if not reading or any(not identity_read(e, r, node) for r, e in reading):
            continue
        target = find(reading[0][0].id)
        if any(find(r.id) != target for r, _ in reading) or target in blocked[node_id]:
            continue
        if not points[target].is_subset(points[node_id]) or points[target].is_equal(points[node_id]):
            continue
        if any(e.producer in running_set and find(e.producer) != target
               and len(graph.nodes[e.producer].domain) >= len(node.domain) for e in node.inputs):
            continue  # a branch reads another statement's step: the placeholder keeps them apart
        if reaches(node_id, target) or reaches(target, node_id):
            continue
        kept = demand.demand[target].set_tuple_name(f"S{node_id}")
        demand.demand[node_id] = demand.demand[node_id].intersect(kept)
        for slot in range(len(node.inputs)):
            demand.reads[(node_id, slot)] = demand.reads[(node_id, slot)].intersect_domain(kept)
        merge(target, node_id)
        absorbed.add(node_id)
    return absorbed


def _running_sum(node: Node) -> bool:
    return bool(node.attrs.get("running"))


def _recurrent_tail(graph: Graph, ids: list[int], advancing: set[tuple[int, int]]) -> set[int]:
    """The members of a group that its recurrence does not need: a group holding a recurrence (a placeholder
    reading a member at an earlier point: a rollout's observation fed back from the environment's step) runs
    its points one after another, and so does everything fused with it. Members that neither the recurrence
    nor an op of another kind (a draw, a UDF, a merge, a sink) needs, and that are array kernels or constants
    themselves (a critic's value of the observation, ``1 - done``), can run as a statement of their own, after
    the recurrence, at all its points at once. (A sink stays: what it reads would otherwise wait for the
    loop's end instead of dying at its step.) (`timerl.runtime.distribute`). Empty when the group holds no
    recurrence or its tail has no kernel."""
    inside = set(ids)
    anchors = [u for u, v in advancing if u in inside and v in inside]
    if not anchors:
        return set()
    anchors += [n for n in ids if graph.nodes[n].category.batched not in ("rule", "shared", "evaluated")]
    needed = set(anchors)
    stack = list(anchors)
    while stack:
        for edge in graph.nodes[stack.pop()].inputs:
            if edge.producer in inside and edge.producer not in needed:
                needed.add(edge.producer)
                stack.append(edge.producer)
    tail = inside - needed
    return tail if any(graph.nodes[n].category.kernel for n in tail) else set()


def _fuse_per_iteration(graph: Graph, running: list[int], points: dict[int, isl.Set], find, merge,
                        successors: dict[int, set[int]], blocked: dict[int, set[int]]) -> None:
    """Merge the groups that run once per outer iteration (only the outermost dimension, in a program with
    deeper loops) and read nothing deeper, on the same points, when neither reaches the other: each layer's
    parameters and optimizer states become one statement per kind instead of one per layer. Inside an
    iteration they only had to be ordered; as separate statements they made most of isl's problem
    (REINFORCE with 12 hidden layers: isl 4.6 s of CPU for 195 statements; 0.4 s for 53). Groups that sum
    over a deeper loop (a layer's gradient, then its update) stay apart: isl runs each right after the loop
    it reads, which frees that loop's values before the next one runs. ``successors`` is kept up to date by
    ``merge``, and reachability with it, so a merge never closes a cycle."""
    depth = {n: len(graph.nodes[n].domain) for n in running}
    if max(depth.values(), default=0) < 2:
        return
    members: dict[int, list[int]] = {}
    for node_id in running:
        members.setdefault(find(node_id), []).append(node_id)
    keys: list[isl.Set] = []
    by_points: dict[int, list[int]] = {}  # the groups that may share a statement, by the points they run at
    for root, ids in members.items():
        if any(depth[n] != 1 or any(depth.get(e.producer, 0) > 1 for e in graph.nodes[n].inputs) for n in ids):
            continue
        key = next((k for k, known in enumerate(keys) if known.is_equal(points[root])), None)
        if key is None:
            key = len(keys)
            keys.append(points[root])
        by_points.setdefault(key, []).append(root)
    for candidates in by_points.values():
        reach = _reachability(successors)
        kept: list[int] = []  # the groups made so far from these candidates
        for group in candidates:
            target = next((k for k in kept if group not in blocked[k] and not (reach[k] >> group) & 1
                           and not (reach[group] >> k) & 1), None)
            if target is None:
                kept.append(group)
                continue
            merge(target, group)
            reach = _reachability(successors)


def _reachability(successors: dict[int, set[int]]) -> dict[int, int]:
    """For each group, the groups it reaches through at least one edge, as a bit set (bit ``g``)."""
    order: list[int] = []
    state: dict[int, int] = {}
    for start in successors:
        if start in state:
            continue
        stack = [(start, iter(successors[start]))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(node)
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(successors[child])))
    reach: dict[int, int] = {}
    for node in order:  # successors first
        bits = 0
        for child in successors[node]:
            bits |= (1 << child) | reach.get(child, 0)
        reach[node] = bits
    return reach


def is_internal(graph: Graph, edge: Edge, consumer: Node, group_of: dict[int, int]) -> bool:
    """An identity read inside one dataflow group: needs no dependence and no deallocation statement."""
    return group_of.get(edge.producer) == group_of.get(consumer.id) and identity_read(
        edge, consumer, graph.nodes[edge.producer])


def _dataflow_order(graph: Graph, ids: list[int], group_of: dict[int, int], index: int) -> list[int]:
    """A topological order of the members: those that read nothing first, then depth first (the member made
    ready last runs next), so a chain of ops runs to its end and its intermediate values die before the next
    chain starts. Breadth first, a fused backward pass (PPO: 160 members) kept every layer's gradients of both
    networks alive at once (15 MB of transients against 5 MB)."""
    inside = set(ids)
    pending = {n: 0 for n in ids}
    readers: dict[int, list[int]] = {n: [] for n in ids}
    for node_id in ids:
        node = graph.nodes[node_id]
        for edge in node.inputs:
            if edge.producer in inside and identity_read(edge, node, graph.nodes[edge.producer]):
                pending[node_id] += 1
                readers[edge.producer].append(node_id)
    # members that read nothing (sources, draws, constants) first, as they come, so that what they feed can
    # run as one piece after them (on jax: one jitted call); then depth first from the others
    order = sorted(n for n in ids if not graph.nodes[n].inputs)
    for node_id in order:
        for reader in readers[node_id]:
            pending[reader] -= 1
    first = set(order)
    ready = sorted((n for n, count in pending.items() if count == 0 and n not in first), reverse=True)
    while ready:
        node_id = ready.pop()
        order.append(node_id)
        for reader in readers[node_id]:
            pending[reader] -= 1
            if pending[reader] == 0:
                ready.append(reader)
    if len(order) != len(ids):
        stuck = [graph.nodes[n].label() for n, count in pending.items() if count > 0]
        raise ScheduleError("no valid execution order: these ops need each other at the same point: "
                            + "; ".join(stuck))
    return order


def rename_relation(relation: isl.Map, group_of: dict[int, int], prefix_in: str = "S", prefix_out: str = "S"):
    """A read relation between nodes, renamed to the groups holding them."""
    source = int(relation.get_tuple_name(isl.dim_type.in_)[1:])
    target = int(relation.get_tuple_name(isl.dim_type.out)[1:])
    relation = relation.set_tuple_name(isl.dim_type.in_, f"{prefix_in}{group_of[source]}")
    return relation.set_tuple_name(isl.dim_type.out, f"{prefix_out}{group_of[target]}")
