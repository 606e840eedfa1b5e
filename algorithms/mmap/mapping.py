"""A game's result as a memory mapping (offset and interval per buffer), and its program latency.

A record per buffer: index, tensor_id, alias_id, size, is_output, target_time, action ("copy", "nocopy",
"drop", or None if the game ended before the buffer), offset in bytes (None in slow memory), start and end
(inclusive logical times, None in slow memory) and reuses (the buffer whose allocation a NoCopy shares,
else None).

A game that ended infeasible is no mapping a compiler could use; its latency is the all-slow latency,
which is what its zero return stands for.
"""

from __future__ import annotations

from algorithms.mmap.costmodel import program_latency
from algorithms.mmap.game import ACTION_NAMES, UNDECIDED, MMapGame
from algorithms.mmap.problem import Problem


def mapping_records(game: MMapGame) -> list[dict]:
    problem = game.problem
    records = []
    for buffer in range(problem.num_buffers):
        decision, placement = game.decision[buffer], game.placement[buffer]
        records.append({
            "index": buffer,
            "tensor_id": problem.tensor_id[buffer],
            "alias_id": problem.alias_id[buffer],
            "size": problem.size[buffer],
            "is_output": problem.is_output[buffer],
            "target_time": problem.target[buffer],
            "action": None if decision == UNDECIDED else ACTION_NAMES[decision],
            "offset": None if placement is None else placement.column * problem.granularity,
            "start": None if placement is None else placement.start,
            "end": None if placement is None else placement.end,
            "reuses": None if placement is None or placement.reuses < 0 else placement.reuses,
        })
    return records


def mapping_latency(problem: Problem, records: list[dict]) -> float:
    """Program latency (microseconds) of a complete mapping, from the placements alone."""
    in_fast = [record["offset"] is not None for record in records]
    return program_latency(problem.latency_tables, problem.target, problem.slot, in_fast)


def game_latency(game: MMapGame) -> float:
    if not game.feasible:
        return game.problem.latency_all_slow
    return mapping_latency(game.problem, mapping_records(game))
