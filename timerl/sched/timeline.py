"""What isl's scheduler need not decide: constants up front, and each deallocation right after its last reader.

isl's scheduler solves integer programs whose size grows faster than the number of statements, so only the
statements whose order is a real question go to it:
- *Up-front* groups (no domain and nothing read from a group that has one: the constants of a program, the
  initial values of its parameters) run once before everything else, in dataflow order. Inside isl's problem
  a 0-d statement also breaks the fusion of the loops around it (a window read over ``x * 2.0`` computed
  every ``x`` first).
- *Deallocations* are not statements isl places (with them the problem was twice as large, and isl still
  put most of them after every loop). Each point is freed by the statement instance that reads it last, or,
  read by nobody, by the one that computes it: "free after last use" (paper §6.2), computed exactly with
  isl's parametric lexicographic maximum over the schedule's times, then written as a small loop program
  after that statement in the AST (paper §6.3, AST post-processing).
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from timerl.sched.group import Group

READER = "q__"  # parameter names of the reader's point in a deallocation program


@dataclass(frozen=True, eq=False)
class Freed:
    """What one deallocation statement frees at each point of group ``group``: its stored members whole
    (``parts`` None) or only ``parts``, (member, output indices) pairs whose readers are ``readers``
    (``{ S<consumer>[q] -> S<group>[p] }``, reads that cross groups)."""

    group: int
    parts: tuple[tuple[int, tuple[int, ...]], ...] | None
    readers: tuple[isl.Map, ...]


def freed_units(groups: list[Group], readers: dict[int, list[isl.Map]],
                output_readers: dict[tuple[int, int], list[isl.Map]], outputs: dict[int, int]) -> list[Freed]:
    """One deallocation per group, or, where a group's stored outputs are read by different readers (an
    environment step's observation read at the next step, its reward by a window at the end of the
    iteration), one per set of outputs with the same readers: each output is freed after its own last
    reader, not with the last of the group. ``output_readers[(member, k)]``: the reads of output ``k``;
    ``outputs[member]``: its number of outputs."""
    units: list[Freed] = []
    for group in groups:
        if not group.freed_later:
            continue
        by_readers: dict[tuple[str, ...], list[tuple[int, int]]] = {}
        relations: dict[tuple[str, ...], list[isl.Map]] = {}  # the same reads for every output of a key
        for member in group.freed_later:
            for k in range(outputs[member]):
                reads = output_readers.get((member, k), [])
                key = tuple(sorted({str(read) for read in reads}))
                by_readers.setdefault(key, []).append((member, k))
                relations.setdefault(key, reads)
        if len(by_readers) == 1:
            units.append(Freed(group.id, None, tuple(readers.get(group.id, ()))))
            continue
        for key, pairs in by_readers.items():
            parts: dict[int, list[int]] = {}
            for member, k in pairs:
                parts.setdefault(member, []).append(k)
            units.append(Freed(group.id, tuple((m, tuple(ks)) for m, ks in parts.items()), tuple(relations[key])))
    return units


@dataclass(frozen=True, eq=False)
class Swapped:
    """Stored members of group ``group`` that move between device and host together: those whose outputs
    are read by the same reads ``readers`` (``{ S<consumer>[q] -> S<group>[p] }``). A fused group's members
    can have very different readers (an environment step's reward, read by a window of returns, next to the
    frame it feeds back, read by the backward pass); moved as one, bringing back a reward for its reader would
    bring the frame back too."""

    group: int
    members: tuple[int, ...]
    readers: tuple[isl.Map, ...]


def swapped_members(groups: list[Group], readers: dict[int, list[isl.Map]],
                    output_readers: dict[tuple[int, int], list[isl.Map]], outputs: dict[int, int]) -> list[Swapped]:
    """One `Swapped` per group, or, where its stored members are read by different readers, one per set of
    members with the same readers (a member's readers: those of all its outputs; the pool moves members
    whole)."""
    swapped: list[Swapped] = []
    for group in groups:
        if not group.freed_later:
            continue
        by_readers: dict[tuple[str, ...], list[int]] = {}
        relations: dict[tuple[str, ...], list[isl.Map]] = {}
        for member in group.freed_later:
            reads = [read for k in range(outputs[member]) for read in output_readers.get((member, k), [])]
            key = tuple(sorted({str(read) for read in reads}))
            by_readers.setdefault(key, []).append(member)
            relations.setdefault(key, list({str(read): read for read in reads}.values()))
        if len(by_readers) == 1:
            swapped.append(Swapped(group.id, group.freed_later, tuple(readers.get(group.id, ()))))
            continue
        for key, members in by_readers.items():
            swapped.append(Swapped(group.id, tuple(members), tuple(relations[key])))
    return swapped


def upfront_groups(groups: list[Group], producers: dict[int, set[int]]) -> list[int]:
    """Domain-less groups that read only other such groups, in an order where producers come first."""
    upfront: list[int] = []
    pending = [g.id for g in groups if g.domain.dim(isl.dim_type.set) == 0]
    progress = True
    while progress:
        progress = False
        for group_id in list(pending):
            if producers[group_id] <= set(upfront):
                upfront.append(group_id)
                pending.remove(group_id)
                progress = True
    return upfront


class Timeline:
    """When each computation in the generated loop program runs, as isl relations.

    Every ``Execute`` of the program is a *site* ``N<k>``. Its time is its path in the program: the position
    in each enclosing sequence, the counter of each enclosing loop, 0 or 1 for the branch of each ``if``.
    Times are therefore injective even where isl's schedule places several statements at the same time and
    leaves their order to the code generator."""

    def __init__(self, params: isl.Set) -> None:
        self.params = params
        self.sites: dict[int, tuple[isl.Map, list[str], list[str]]] = {}  # k -> (schedule, counters, path)

    def annotate(self, node: isl.AstNode, build: isl.AstBuild) -> isl.AstNode:
        """isl's at-each-domain callback: name the site and keep which points it runs at which counters."""
        key = len(self.sites)
        pieces: list[isl.Map] = []
        build.get_schedule().foreach_map(lambda piece: pieces.append(piece.flatten_range()))
        space = isl.Set.universe(build.get_schedule_space()).flatten()
        # the loops' counters, named as in the generated code (a band member that needs no loop has none)
        counters = [space.get_dim_name(isl.dim_type.set, k) for k in range(space.dim(isl.dim_type.set))]
        self.add(key, pieces[0], counters, [])
        return node.set_annotation(isl.Id(f"N{key}"))

    def add(self, key: int, schedule: isl.Map, counters: list[str], path: list[str]) -> None:
        self.sites[key] = (schedule, counters, path)

    def record_paths(self, root: isl.AstNode, prefix: list[str]) -> None:
        """Walk isl's AST and store each site's path below ``prefix``."""

        def walk(node: isl.AstNode, path: list[str]) -> None:
            kind = node.get_type()
            if kind == isl.ast_node_type.block:
                children = node.block_get_children()
                for k in range(children.n_ast_node()):
                    walk(children.get_at(k), path + [str(k)])
            elif kind == isl.ast_node_type.for_:
                walk(node.for_get_body(), path + [node.for_get_iterator().get_id().get_name()])
            elif kind == isl.ast_node_type.if_:
                walk(node.if_get_then_node(), path + ["0"])
                if node.if_has_else_node():
                    walk(node.if_get_else_node(), path + ["1"])
            elif kind == isl.ast_node_type.mark:
                walk(node.mark_get_node(), path)
            elif kind == isl.ast_node_type.user:
                key = int(node.get_annotation().get_name()[1:])
                self.sites[key] = self.sites[key][:2] + (path,)

        walk(root, prefix)

    def last_readers(self, freed: list[Freed]) -> dict[int, isl.UnionMap]:
        """For each site, ``{ N<k>[q] -> F<j>[p] }``: the points of ``freed[j]`` whose last reader is that site
        at ``q``."""
        return self._by_site(self._uses(freed, lambda uses: uses.lexmax()))

    def swap_pairs(self, swapped: list[Swapped], distances: tuple[int, ...] = ()
                   ) -> tuple[list[tuple[Swapped, int]], dict[int, isl.UnionMap], list[tuple[int, int]],
                              dict[int, isl.UnionMap]]:
        """Where points may leave the device and come back (paper §6.2: an offload-fetch pair for every
        consumer, plus one after production): between each two consecutive uses of a point of ``swapped[j]``
        (its write and its reads, in schedule order), an offload after the first and a fetch before the
        second. The pairs are split by the site that fetches: each (members, fetching site) is one *swap unit*,
        kept or dropped as a whole at compile time against the budget (`timerl.runtime.dryrun.choose_swaps`);
        units whose two uses are close together gain nothing and are dropped there.

        Each unit's fetch comes in several versions, one of which runs: right before the reader (distance 0)
        and, for each ``d`` in ``distances``, before the ``d``-th execution of the reading site before it (a
        copy issued there overlaps with the computations in between), or, where that execution would come
        before the offload, before the earliest one after it. Returns the units, the offloads (as ``last_readers``,
        ``F<j>`` naming unit ``j``), the fetches' (unit, distance) pairs and the fetches (``F<m>`` naming the
        m-th pair)."""
        time_of, site_at = self._tables()
        site_time = {key: self._time(key) for key in self.sites}
        units: list[tuple[Swapped, int]] = []
        versions: list[tuple[int, int]] = []
        previous: dict[int, isl.UnionMap] = {}  # site -> its previous execution (`_previous`)
        offloads = fetches = isl.UnionMap.empty(self.params.get_space())
        for moved in swapped:
            statement = f"S{moved.group}"
            if statement not in time_of:
                continue
            uses, sites = self._uses_of(statement, moved.readers, time_of, site_at)
            later = uses.range_product(uses).intersect_range(isl.Map.lex_lt(uses.get_space().range()).wrap())
            following = isl.UnionMap.from_map(later.uncurry().lexmin())  # [S[p] -> [u]] -> [next use]
            using = {statement} | {read.get_tuple_name(isl.dim_type.in_) for read in moved.readers}
            for key in sorted(self.sites):
                if site_time[key].get_tuple_name(isl.dim_type.in_) not in using:
                    continue
                at_key = isl.UnionMap.from_map(site_time[key].set_tuple_name(isl.dim_type.in_, f"N{key}").reverse())
                fetched = following.apply_range(at_key)  # [S[p] -> [u]] -> N<key>[q]: fetched there
                if fetched.is_empty():
                    continue
                unit = len(units)
                units.append((moved, key))
                offload = fetched.domain().unwrap().apply_range(sites).reverse()
                offloads = offloads.union(_rename(offload, isl.dim_type.out, f"F{unit}"))
                if distances and key not in previous:
                    previous[key] = self._previous(key, site_time[key])
                ahead = self._ahead(fetched, key, previous.get(key), site_time[key], distances)
                for distance in (0, *distances):
                    fetch = ahead[distance].domain_factor_domain().reverse()
                    fetches = fetches.union(_rename(fetch, isl.dim_type.out, f"F{len(versions)}"))
                    versions.append((unit, distance))
        return units, self._by_site(offloads), versions, self._by_site(fetches)

    @staticmethod
    def _previous(key: int, at: isl.Map) -> isl.UnionMap:
        """``{ N<key>[q] -> N<key>[q'] }``: the execution of site ``key`` right before the one at ``q`` (``at``:
        its times)."""
        named = at.set_tuple_name(isl.dim_type.in_, f"N{key}")  # N<key>[q] -> [time]
        times = named.range()
        before = isl.Map.lex_gt(times.get_space()).intersect_domain(times).intersect_range(times).lexmax()
        return isl.UnionMap.from_map(named.apply_range(before).apply_range(named.reverse()))

    @staticmethod
    def _ahead(fetched: isl.UnionMap, key: int, previous: isl.UnionMap | None, at: isl.Map,
               distances: tuple[int, ...]) -> dict[int, isl.UnionMap]:
        """``fetched`` (``[S[p] -> [u]] -> N<key>[q]``: a point last used at time ``u`` is fetched before site
        ``key`` runs at ``q``) moved up to ``d`` executions of the site earlier (``previous``), for each ``d``
        in ``distances`` (and 0): as many as still come after ``u`` (none: right before the reader)."""
        versions = {d: fetched for d in (0, *distances)}
        if not distances:
            return versions
        named = isl.UnionMap.from_map(at.set_tuple_name(isl.dim_type.in_, f"N{key}"))  # N<key>[q] -> [time]
        used_at = fetched.domain().unwrap().range_map()  # [S[p] -> [u]] -> [u]
        same = isl.UnionMap.from_map(isl.Map.identity(
            isl.Map.from_union_map(fetched).get_space().domain().map_from_set()))
        chosen = moved = fetched
        for step in range(1, max(distances) + 1):
            moved = moved.apply_range(previous)
            after_use = used_at.lex_lt_union_map(moved.apply_range(named))
            valid = after_use.intersect(same).domain()  # one execution earlier is still after the offload
            if valid.is_empty():
                break
            chosen = moved.intersect_domain(valid).union(chosen.subtract_domain(valid))
            for distance in distances:
                if distance >= step:
                    versions[distance] = chosen
        return versions

    def _time(self, key: int) -> isl.Map:
        """``{ S<g>[p] -> [time] }`` at site ``key``: its path, with the loops' counters, padded to one width."""
        width = max(len(path) for _, _, path in self.sites.values())
        schedule, counters, path = self.sites[key]
        coordinates = path + ["0"] * (width - len(path))
        return schedule.apply_range(isl.Map(f"{{ [{', '.join(counters)}] -> [{', '.join(coordinates)}] }}"))

    def _tables(self) -> tuple[dict[str, isl.Map], dict[str, isl.UnionMap]]:
        """``S<g> -> { S<g>[p] -> [time] }`` over all sites of the statement, and ``S<g> -> { [time] -> N<k>[p] }``."""
        time_of: dict[str, isl.Map] = {}
        site_at: dict[str, isl.UnionMap] = {}
        for key in self.sites:
            at = self._time(key)
            statement = at.get_tuple_name(isl.dim_type.in_)
            time_of[statement] = time_of[statement].union(at) if statement in time_of else at
            back = isl.UnionMap.from_map(at.set_tuple_name(isl.dim_type.in_, f"N{key}").reverse())
            site_at[statement] = site_at[statement].union(back) if statement in site_at else back
        return time_of, site_at

    @staticmethod
    def _uses_of(statement: str, reads, time_of: dict[str, isl.Map], site_at: dict[str, isl.UnionMap]
                 ) -> tuple[isl.Map, isl.UnionMap]:
        """The times of every use of each point of ``statement`` (its write and the reads ``reads``,
        ``{ S<consumer>[q] -> S<g>[p] }``), and the sites at those times."""
        uses, sites = time_of[statement], site_at[statement]
        for read in reads:
            reader = read.get_tuple_name(isl.dim_type.in_)
            if reader not in time_of:
                continue
            uses = uses.union(read.reverse().apply_range(time_of[reader]))
            sites = sites.union(site_at[reader])
        return uses, sites

    def _uses(self, freed: list[Freed], pick) -> isl.UnionMap:
        """``{ N<k>[q] -> F<j>[p] }`` for the use of each point of ``freed[j]`` that ``pick`` selects from the
        map of its uses ``{ S<g>[p] -> [time] }`` (its write and every read)."""
        time_of, site_at = self._tables()
        last = isl.UnionMap.empty(self.params.get_space())
        for index, unit in enumerate(freed):
            statement = f"S{unit.group}"
            if statement not in time_of:  # no site: it runs at no point of these bounds
                continue
            uses, sites = self._uses_of(statement, unit.readers, time_of, site_at)
            latest = isl.UnionMap.from_map(pick(uses)).apply_range(sites)
            last = last.union(_rename(latest.reverse(), isl.dim_type.out, f"F{index}"))
        return last

    @staticmethod
    def _by_site(relation: isl.UnionMap) -> dict[int, isl.UnionMap]:
        by_site: dict[int, isl.UnionMap] = {}

        def collect(piece: isl.Map) -> None:
            key = int(piece.get_tuple_name(isl.dim_type.in_)[1:])
            part = isl.UnionMap.from_map(piece)
            by_site[key] = by_site[key].union(part) if key in by_site else part

        relation.foreach_map(collect)
        return by_site

    def domain(self, key: int) -> isl.Set:
        return self.sites[key][0].domain()


def deallocation_program(frees: isl.UnionMap, reader_domain: isl.Set, context: isl.Set,
                         built: dict[str, isl.AstNode]) -> tuple[isl.AstNode, tuple[int, ...]]:
    """The loops that free, after a reader ``S<r>[q]`` runs, the points it read last; ``q`` appears as the
    parameters ``q__0, q__1, ...``, to be replaced by the reader's point where the program is inserted.

    The program frees ``F<j>`` for the j-th of the returned group ids: most sites free the same shapes (the
    point just read, the one before it) of different groups, and ``built`` keeps the programs by shape."""
    pieces: list[isl.Map] = []
    frees.foreach_map(pieces.append)
    arity = pieces[0].dim(isl.dim_type.in_)
    depth = 1 + max(p.dim(isl.dim_type.out) for p in pieces)
    points = isl.UnionMap.empty(context.get_space())
    pieces.sort(key=lambda p: p.get_tuple_name(isl.dim_type.out))
    freed_groups: list[int] = []
    for piece in pieces:
        group_id = int(piece.get_tuple_name(isl.dim_type.out)[1:])
        if group_id not in freed_groups:
            freed_groups.append(group_id)
        order = freed_groups.index(group_id)
        nparams = piece.dim(isl.dim_type.param)
        piece = piece.move_dims(isl.dim_type.param, nparams, isl.dim_type.in_, 0, arity)
        for k in range(arity):
            piece = piece.set_dim_name(isl.dim_type.param, nparams + k, f"{READER}{k}")
        freed = piece.range()
        names = [f"p{k}" for k in range(freed.dim(isl.dim_type.set))]
        coordinates = [str(order)] + names + ["0"] * (depth - 1 - len(names))
        schedule = isl.Map(f"{{ F{order}[{', '.join(names)}] -> [{', '.join(coordinates)}] }}")
        freed = freed.set_tuple_name(f"F{order}")
        points = points.union(isl.UnionMap.from_map(schedule.intersect_domain(freed)))
    reader_context = reader_domain
    nparams = reader_context.dim(isl.dim_type.param)
    reader_context = reader_context.move_dims(isl.dim_type.param, nparams, isl.dim_type.set, 0, arity)
    for k in range(arity):
        reader_context = reader_context.set_dim_name(isl.dim_type.param, nparams + k, f"{READER}{k}")
    reader_context = reader_context.params().intersect_params(context.align_params(reader_context.get_space()))
    shape = f"{points} within {reader_context}"
    if shape in built:
        return built[shape], tuple(freed_groups)
    iterators = isl.IdList.alloc(isl.DEFAULT_CONTEXT, depth)
    for k in range(depth):
        iterators = iterators.add(isl.Id(f"f{k}"))
    build = isl.AstBuild.from_context(reader_context).set_iterators(iterators)
    built[shape] = build.node_from_schedule_map(points)
    return built[shape], tuple(freed_groups)


def _rename(relation: isl.UnionMap, kind: isl.dim_type, name: str) -> isl.UnionMap:
    pieces: list[isl.Map] = []
    relation.foreach_map(lambda piece: pieces.append(piece.set_tuple_name(kind, name)))
    renamed = isl.UnionMap.empty(relation.get_space())
    for piece in pieces:
        renamed = renamed.union(isl.UnionMap.from_map(piece))
    return renamed
