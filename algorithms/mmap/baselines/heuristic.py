"""Stand-in for the production compiler's heuristic (the "default XLA" baseline of §5).

Like the production heuristic the paper describes (Figure 8, right), it keeps a tensor in fast memory for
its whole life once it decides to place it, and never plays the evict/re-fetch tricks the agents find.

1. Units: a tensor, or all tensors joined by alias groups (they must go in or out together, Eq. 4).
   value = sum of the initial benefits of the unit's buffers; cost = widest buffer x the unit's span
   (first to last live time). Units are ranked by value / cost (benefit density).
2. Plan: in that order, first-fit each unit's whole-span rectangle into an empty grid; keep the ones that fit.
3. Play the game: buffers of planned units take NoCopy (an output stays for its live range; a later input
   reuses or extends the allocation), else Copy (a parameter's first read is prefetched), else whatever is
   legal; all other buffers Drop. Playing through the game, with Drop-backup, makes the mapping legal by
   construction, even where chronological first fit packs differently from the plan.
The budget is ignored: the heuristic is a single pass.
"""

from __future__ import annotations

from algorithms.mmap.baselines.policies import first_legal
from algorithms.mmap.baselines.result import Result, new_game, result_of
from algorithms.mmap.game import COPY, DROP, NO_COPY
from algorithms.mmap.occupancy import Occupancy
from algorithms.mmap.problem import Problem


def heuristic_play(problem: Problem, seed: int = 0, budget: int | None = None) -> Result:
    planned = planned_units(problem)
    unit_of_tensor = tensor_units(problem)
    game = new_game(problem)
    actions = []
    while not game.done:
        buffer = game.position
        if unit_of_tensor[problem.tensor[buffer]] in planned:
            action = first_legal(game, (NO_COPY, COPY, DROP))
        else:
            action = first_legal(game, (DROP, NO_COPY, COPY))
        game.play(action)
        actions.append(action)
    return result_of("heuristic", game, actions, game.moves)


def tensor_units(problem: Problem) -> list[int]:
    """Unit (a representative tensor index) of every tensor: tensors sharing an alias group are one unit."""
    parent = list(range(problem.num_tensors))

    def root(tensor):
        while parent[tensor] != tensor:
            parent[tensor] = parent[parent[tensor]]
            tensor = parent[tensor]
        return tensor

    first_tensor_of_group: dict = {}
    for buffer in range(problem.num_buffers):
        group, tensor = problem.alias_group[buffer], problem.tensor[buffer]
        if group >= 0:
            other = first_tensor_of_group.setdefault(group, tensor)
            parent[root(tensor)] = root(other)
    return [root(tensor) for tensor in range(problem.num_tensors)]


def planned_units(problem: Problem) -> set:
    units = tensor_units(problem)
    value: dict = {}
    span: dict = {}
    width: dict = {}
    for buffer in range(problem.num_buffers):
        unit = units[problem.tensor[buffer]]
        value[unit] = value.get(unit, 0.0) + problem.initial_benefit[buffer]
        start, end = span.get(unit, (problem.live_start[buffer], problem.live_end[buffer]))
        span[unit] = (min(start, problem.live_start[buffer]), max(end, problem.live_end[buffer]))
        width[unit] = max(width.get(unit, 0), problem.columns[buffer])

    def density(unit):
        start, end = span[unit]
        return value[unit] / (max(width[unit], 1) * (end - start + 1))

    plan = Occupancy(problem.num_instructions, problem.num_columns)
    chosen = set()
    for unit in sorted((u for u in value if value[u] > 0), key=density, reverse=True):
        start, end = span[unit]
        column = plan.lowest_free_offset(start, end, width[unit])
        if column >= 0:
            plan.place(start, end, column, width[unit])
            chosen.add(unit)
    return chosen
