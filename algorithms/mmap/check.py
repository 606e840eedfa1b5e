"""An independent checker of a finished mapping: every constraint of Appendix A, re-derived from the records.

It shares no code with the game's planning, so a bug in the game shows up here as a named violation.
Checked: rectangles in bounds and pairwise disjoint (reused allocations and alias groups, which are one
memory, excepted), intervals inside live
ranges and around the target, NoCopy extending an earlier allocation of the same tensor, alias groups all
in or all out at one offset (Eq. 4), copy intervals sharing at most one step (Eq. 6), and supply: replaying
every copy in game order, nearest-to-target first, never drives any step's supply below zero (Eq. 5).
"""

from __future__ import annotations

import numpy as np

from algorithms.mmap.problem import Problem


class MappingError(AssertionError):
    pass


def check_mapping(problem: Problem, records: list[dict]) -> None:
    """Raise MappingError naming the first broken rule; return None for a valid (possibly partial) mapping."""
    fast = [r for r in records if r["offset"] is not None]
    _check_rectangles(problem, fast)
    _check_intervals(problem, records)
    _check_alias_groups(records)
    remaining_supply(problem, records)


def copy_interval(record: dict):
    """Inclusive (first, last) logical times of a Copy's transfer, None if it transfers nothing."""
    if record["action"] != "copy":
        return None
    if record["is_output"]:
        first, last = record["target_time"] + 1, record["end"]
    else:
        first, last = record["start"], record["target_time"] - 1
    return (first, last) if first <= last else None


def _check_rectangles(problem: Problem, fast: list[dict]) -> None:
    """Bounds and disjointness; buffers of one alias group are one memory and may overlap each other."""
    granularity = problem.granularity
    no_owner = -1
    owner = np.full((problem.num_instructions, max(problem.num_columns, 1)), no_owner, dtype=np.int64)
    for r in fast:
        if r["offset"] % granularity:
            raise MappingError(f"buffer {r['index']}: offset {r['offset']} not a multiple of {granularity}")
        first = r["offset"] // granularity
        width = -(-r["size"] // granularity)
        if first < 0 or first + width > problem.num_columns:
            raise MappingError(f"buffer {r['index']}: [{r['offset']}, +{r['size']}) outside fast memory")
        if r["reuses"] is not None or width == 0:
            continue
        key = r["index"] + problem.num_buffers if r["alias_id"] is None else problem.alias_group[r["index"]]
        cells = owner[r["start"]:r["end"] + 1, first:first + width]
        clash = (cells != no_owner) & (cells != key)
        if clash.any():
            time, column = np.argwhere(clash)[0]
            raise MappingError(f"buffer {r['index']} overlaps another allocation at time {r['start'] + time}, "
                               f"offset {(first + column) * granularity}")
        cells[...] = key


def _check_intervals(problem: Problem, records: list[dict]) -> None:
    by_index = {r["index"]: r for r in records}
    latest_end_of_tensor: dict = {}
    for r in records:
        if r["offset"] is None:
            continue
        index, target = r["index"], r["target_time"]
        live = (problem.live_start[index], problem.live_end[index])
        if not live[0] <= r["start"] <= target <= r["end"] <= live[1]:
            raise MappingError(f"buffer {index}: interval [{r['start']}, {r['end']}] vs target {target}, live {live}")
        if r["reuses"] is not None:
            owner = by_index[r["reuses"]]
            if (owner["tensor_id"] != r["tensor_id"] or owner["offset"] != r["offset"] or owner["index"] >= index
                    or not owner["start"] <= target <= owner["end"]):
                raise MappingError(f"buffer {index}: reuses buffer {owner['index']}, which does not hold it at {target}")
        elif r["action"] == "nocopy" and not r["is_output"]:
            if latest_end_of_tensor.get(r["tensor_id"]) != r["start"] - 1:
                raise MappingError(f"buffer {index}: NoCopy from {r['start']} does not extend its tensor's latest allocation")
        elif r["action"] == "nocopy" and (r["start"], r["end"]) != live:
            raise MappingError(f"buffer {index}: NoCopy output must hold its whole live range {live}")
        latest_end_of_tensor[r["tensor_id"]] = max(latest_end_of_tensor.get(r["tensor_id"], -1), r["end"])


def _check_alias_groups(records: list[dict]) -> None:
    groups: dict = {}
    for r in records:
        if r["alias_id"] is not None and r["action"] is not None:
            groups.setdefault(r["alias_id"], []).append(r)
    for alias_id, members in groups.items():
        offsets = {m["offset"] for m in members}
        if len(offsets) > 1:
            raise MappingError(f"alias group {alias_id}: members at offsets {sorted(offsets, key=str)}")


def remaining_supply(problem: Problem, records: list[dict]) -> list[int]:
    """W after replaying every copy of the mapping in game order; raises if a copy finds too little supply."""
    supply = [int(value) for value in problem.supply]
    owner_of_edge: dict = {}
    for r in records:
        interval = copy_interval(r)
        if interval is None:
            continue
        first, last = interval
        for edge in range(first, last):
            if edge in owner_of_edge:
                raise MappingError(f"buffers {owner_of_edge[edge]} and {r['index']} copy at the same time {edge}..{edge + 1}")
            owner_of_edge[edge] = r["index"]
        steps = range(last, first - 1, -1) if not r["is_output"] else range(first, last + 1)
        needed = problem.demand[r["index"]]
        for time in steps:
            taken = min(needed, supply[time])
            supply[time] -= taken
            needed -= taken
        if needed > 0:
            raise MappingError(f"buffer {r['index']}: copy interval {interval} lacks {needed} ps of supply")
    return supply
