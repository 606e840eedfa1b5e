"""Move choices shared by the baselines: legal moves, preference lists, and two one-step policies (greedy and
keep-groups)."""

from __future__ import annotations

from algorithms.mmap.game import COPY, DROP, NO_COPY, MMapGame


def legal_list(game: MMapGame) -> list[int]:
    copy, no_copy, drop = game.legal_actions()
    return [action for action, legal in ((COPY, copy), (NO_COPY, no_copy), (DROP, drop)) if legal]


def first_legal(game: MMapGame, preferences) -> int:
    """The first legal action of `preferences`, else any legal action (there is one while the game runs)."""
    legal = game.legal_actions()
    for action in preferences:
        if legal[action]:
            return action
    return legal_list(game)[0]


def greedy_action(game: MMapGame) -> int:
    """Take a positive benefit with the placement that holds the least space x time, else Drop.

    Footprint = columns x interval length (0 for a reused allocation). Measured on the ten workloads against
    "NoCopy first" (which keeps outputs for their whole live range and stretches inputs over long gaps):
    0.14-0.98 of the best possible saving instead of 0.16-0.48, and never more than 0.07 worse.
    """
    if game.current_benefit() <= 0:
        return first_legal(game, (DROP, COPY, NO_COPY))
    return smallest_placement(game, (COPY, NO_COPY))


def keep_groups_action(game: MMapGame) -> int:
    """`greedy_action`, except that an output whose alias group has members still to come stays resident: where
    the output is placed at all (a positive benefit, or its group already in fast memory so that Drop is illegal)
    it takes NoCopy (fast memory over its whole live range, no eviction copy) before Copy, whatever the footprint.

    Why: aliased buffers share one memory (game.py, Eq. 4), so the group's later members must sit at the same
    offset. A Copy of the output evicts it right after its write; the group's next member then needs a prefetch
    into exactly that offset, which the supply or the space often refuses, and the game rewinds to drop the group
    (Drop-backup). Kept resident, the next member reading the same tensor reuses the allocation at no cost.
    Otherwise (an input, the group's last member, no group) the move is `greedy_action`'s.
    """
    problem, position = game.problem, game.position
    group = problem.alias_group[position]
    members_to_come = group >= 0 and problem.group_last_buffer[group] > position
    placed = game.current_benefit() > 0 or not game.legal_actions()[DROP]
    if problem.is_output[position] and members_to_come and placed:
        return first_legal(game, (NO_COPY, COPY, DROP))
    return greedy_action(game)


def smallest_placement(game: MMapGame, order: tuple[int, int]) -> int:
    """The placement (Copy or NoCopy) holding the least space x time, ties to the first of ``order``; Drop
    (else any legal move) when neither has one. Footprint = columns x interval length, 0 when reused."""
    width = max(game.problem.columns[game.position], 1)
    best_action, best_footprint = -1, None
    for action in order:
        placement = game.candidates[action]
        if placement is None:
            continue
        footprint = 0 if placement.reuses >= 0 else (placement.end - placement.start + 1) * width
        if best_footprint is None or footprint < best_footprint:
            best_action, best_footprint = action, footprint
    return best_action if best_action >= 0 else first_legal(game, (DROP,))
