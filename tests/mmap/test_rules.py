"""The game's rules on hand-made instances; every expected number is derived by hand in the comments.

Units (see mmap_handmade.py): latency = max(flops, slow bytes + fast bytes / 4) us; demand = size us; W in us.
"""

import pytest

from algorithms.mmap.check import check_mapping, remaining_supply
from algorithms.mmap.game import COPY, DROP, NO_COPY, IllegalActionError, MMapGame
from algorithms.mmap.mapping import game_latency, mapping_records
from mmap_handmade import US, problem


def supply_us(game):
    return [value / US for value in game.supply.tolist()]


# ---------------------------------------------------------------------------------------------- prefetch
# A tensor read at t=3 and t=4 (8 bytes). W = [10, 4, 5, 2, 2]: t0..t2 have no buffers (W = flops),
# t3 and t4 are 1 flop with the 8-byte operand in fast memory (2 us).
PREFETCH = dict(flops=[10, 4, 5, 1, 1],
                buffers=[(0, None, 8, False, 3, (0, 4)), (0, None, 8, False, 4, (0, 4))])


def test_copy_input_takes_latest_start_meeting_supply():
    game = MMapGame(problem(**PREFETCH))
    assert game.legal_actions() == (True, False, True)  # NoCopy: no earlier allocation of the tensor
    assert supply_us(game) == [10, 4, 5, 2, 2]
    assert game.play(COPY) == pytest.approx(6.0)  # L3({}) - L3({b}) = 8 - 2
    placement = game.placement[0]
    # Demand 8: W[2] = 5 is not enough, W[1] + W[2] = 9 is, so s = 1 and the copy interval is [1, 3).
    assert (placement.start, placement.end, placement.column) == (1, 3, 0)
    # Nearest the target first: W[2] drained, W[1] gives the remaining 3.
    assert supply_us(game) == [10, 1, 0, 2, 2]
    assert game.copy_edges.tolist() == [False, True, False, False]


def test_copy_intervals_may_not_share_an_edge():
    game = MMapGame(problem(**PREFETCH))
    game.play(COPY)
    # Copy at t=4 would need W[0..3] = 13 >= 8, but reaching t0 crosses edge 1-2 used by the first copy (Eq. 6).
    assert game.legal_actions() == (False, True, True)
    with pytest.raises(IllegalActionError):
        game.play(COPY)


def test_no_copy_extends_the_latest_allocation_of_the_tensor():
    game = MMapGame(problem(**PREFETCH))
    game.play(COPY)
    assert game.play(NO_COPY) == pytest.approx(6.0)
    placement = game.placement[1]
    assert (placement.start, placement.end, placement.column, placement.reuses) == (4, 4, 0, -1)  # (3, 4]
    assert supply_us(game) == [10, 1, 0, 2, 2]  # NoCopy moves no data
    assert game.done and game.feasible
    assert game_latency(game) == pytest.approx(35 - 12)  # all-slow 10+4+5+8+8, saved 6 + 6


def test_copy_is_illegal_without_enough_supply():
    big = dict(flops=[10, 4, 5, 1], buffers=[(0, None, 20, False, 3, (0, 3))])
    game = MMapGame(problem(**big, fast_memory_bytes=32))
    assert game.legal_actions() == (False, False, True)  # 10 + 4 + 5 = 19 < 20


def test_copies_may_share_one_time_step():
    # W = [20, 2, 0, 2]. First copy (t=1) takes [0, 0]: W[0] = 12, no edge. Second copy (t=3) needs 8:
    # W[2] + W[1] = 2, so it reaches back to t0 and shares that single step with the first copy.
    game = MMapGame(problem([20, 2, 0, 1], [(0, None, 8, False, 1, (0, 1)), (1, None, 8, False, 3, (0, 3))]))
    game.play(COPY)
    assert supply_us(game) == [12, 2, 0, 2]
    game.play(COPY)
    placement = game.placement[1]
    assert (placement.start, placement.end, placement.column) == (0, 3, 8)  # columns 0-7 are taken at t0-t1
    assert supply_us(game) == [6, 0, 0, 2]
    check_mapping(game.problem, mapping_records(game))


# ----------------------------------------------------------------------------------------------- outputs
# Output written at t0, read at t3. W = [2, 3, 6, 2].
OUTPUT = dict(flops=[0, 3, 6, 0], buffers=[(0, None, 8, True, 0, (0, 3)), (0, None, 8, False, 3, (0, 3))])


def test_copy_output_takes_earliest_end_meeting_supply():
    game = MMapGame(problem(**OUTPUT))
    assert game.legal_actions() == (True, True, True)  # an output may NoCopy without an earlier allocation
    assert game.play(COPY) == pytest.approx(6.0)
    placement = game.placement[0]
    assert (placement.start, placement.end) == (0, 2)  # copy interval (0, 2]: 3 + 6 >= 8
    assert supply_us(game) == [2, 0, 1, 2]
    game.play(NO_COPY)
    assert (game.placement[1].start, game.placement[1].end, game.placement[1].reuses) == (3, 3, -1)


def test_no_copy_output_holds_the_live_range_and_later_reads_reuse_it():
    game = MMapGame(problem(**OUTPUT))
    game.play(NO_COPY)
    assert (game.placement[0].start, game.placement[0].end) == (0, 3)
    assert game.play(NO_COPY) == pytest.approx(6.0)
    reused = game.placement[1]
    assert (reused.start, reused.end, reused.column, reused.reuses) == (3, 3, 0, 0)
    assert supply_us(game) == [2, 3, 6, 2]
    assert not game.occupancy.used_columns(3, 3) >> 8  # no second rectangle


# ---------------------------------------------------------------------------------------------- first fit
def test_offsets_are_lowest_first_fit_over_the_whole_interval():
    game = MMapGame(problem([0, 0, 0, 0], [
        (0, None, 4, True, 0, (0, 2)),   # NoCopy -> [0, 2] at 0
        (1, None, 8, True, 1, (1, 1)),   # NoCopy -> [1, 1] at 4
        (0, None, 4, False, 2, (0, 2)),  # NoCopy -> reuses buffer 0
        (2, None, 8, True, 2, (2, 3)),   # NoCopy -> [2, 3] at 4 (0-3 taken at t2)
        (3, None, 8, True, 3, (3, 3)),   # at t3 only 0-3 and 12-15 are free: no room for 8
    ]))
    for _ in range(4):
        game.play(NO_COPY)
    assert [game.placement[b].column for b in range(4)] == [0, 4, 0, 4]
    assert game.placement[2].reuses == 0
    assert game.legal_actions() == (False, False, True)


# ----------------------------------------------------------------------------------------- benefit update
def test_benefit_is_updated_by_buffers_already_in_fast_memory():
    # At t1: 9 flops, two 8-byte operands: L = 16, 10, 10, 9 for {}, {x}, {y}, {x, y}. t0 supplies the copies.
    game = MMapGame(problem([40, 9], [(0, None, 8, False, 1, (0, 1)), (1, None, 8, False, 1, (0, 1))]))
    assert game.problem.initial_benefit == pytest.approx((6.0, 6.0))
    assert game.play(COPY) == pytest.approx(6.0)
    assert game.current_benefit() == pytest.approx(1.0)  # 10 - 9, not the initial 6
    assert game.play(COPY) == pytest.approx(1.0)
    assert game.total_reward == pytest.approx(game.problem.latency_all_slow - game_latency(game))


# ------------------------------------------------------------------------------------- alias groups (Eq.4)
ALIASED = dict(flops=[10, 1, 1], buffers=[
    (9, None, 4, True, 0, (0, 0)),  # NoCopy -> [0, 0] at 0
    (0, 3, 4, False, 1, (0, 1)),    # Copy -> [0, 1]; columns 0-3 taken at t0 -> offset 4
    (1, 3, 4, True, 2, (2, 2)),     # same alias group: must sit at offset 4 although 0 is free
])


def test_alias_group_members_share_the_offset_and_cannot_drop():
    game = MMapGame(problem(**ALIASED))
    game.play(NO_COPY)
    game.play(COPY)
    assert game.placement[1].column == 4
    assert game.legal_actions() == (False, True, False)  # no Copy window for an output that dies at once
    game.play(NO_COPY)
    assert game.placement[2].column == 4
    check_mapping(game.problem, mapping_records(game))


def test_dropped_alias_group_forces_drop():
    game = MMapGame(problem(**ALIASED))
    game.play(NO_COPY)
    game.play(DROP)
    assert game.legal_actions() == (False, False, True)


# ---------------------------------------------------------------------------------- infeasible and backup
# b0 (alias 5) fills all 8 bytes over [0, 1]; b1 fills them over [2, 3]; b2 (alias 5) must then sit at
# offset 0 at t3, which b1 holds, and can neither Copy (no time left in its live range) nor Drop.
INFEASIBLE = dict(flops=[10, 1, 1, 1], buffers=[
    (0, 5, 8, False, 1, (0, 1)), (1, None, 8, True, 2, (2, 3)), (2, 5, 8, True, 3, (3, 3))])


def test_infeasible_state_ends_the_game_with_zero_return():
    game = MMapGame(problem(**INFEASIBLE, fast_memory_bytes=8))
    assert game.play(COPY) == pytest.approx(6.0)
    assert game.play(NO_COPY) == pytest.approx(-6.0)  # the move's 6 is not paid, the earlier 6 is taken back
    assert game.done and not game.feasible and game.total_reward == 0.0
    assert game_latency(game) == pytest.approx(game.problem.latency_all_slow)


def test_drop_backup_rewinds_and_drops_the_offending_group():
    game = MMapGame(problem(**INFEASIBLE, fast_memory_bytes=8), drop_backup=True)
    game.play(COPY)
    assert game.play(NO_COPY) == pytest.approx(-6.0)  # back to the return of the backup state (0)
    assert (game.position, game.restores, game.done) == (0, 1, False)
    assert game.legal_actions() == (False, False, True)
    assert supply_us(game) == [10, 2, 2, 2] and not game.occupancy.grid.any()
    game.play(DROP)
    assert game.play(NO_COPY) == pytest.approx(6.0)
    game.play(DROP)
    assert game.done and game.feasible and game.total_reward == pytest.approx(6.0)
    records = mapping_records(game)
    assert [r["action"] for r in records] == ["drop", "nocopy", "drop"]
    check_mapping(game.problem, records)
    assert remaining_supply(game.problem, records) == game.supply.tolist()


def test_clone_is_independent():
    game = MMapGame(problem(**PREFETCH))
    twin = game.clone()
    twin.play(COPY)
    assert game.position == 0 and supply_us(game) == [10, 4, 5, 2, 2] and not game.occupancy.grid.any()
    assert game.decision[0] == -1 and twin.decision[0] == COPY


# A long alias group 9 (opened by b0, closed at t4) stays open when group 5 becomes infeasible at t3.
# W = [30, 1, 2, 5, 1]. b0 Copy [0, 1] cols 0-3 (+3); b1 Copy [0, 2] cols 4-11 (+6); b2 NoCopy [3, 3]
# cols 0-11 (+9); b3 (group 5) must sit at col 4 at t3, which b2 holds: infeasible.
TWO_GROUPS = dict(flops=[30, 1, 1, 1, 1], buffers=[
    (7, 9, 4, False, 1, (0, 4)), (0, 5, 8, False, 2, (0, 2)), (1, None, 12, True, 3, (3, 3)),
    (2, 5, 8, True, 3, (3, 3)), (7, 9, 4, False, 4, (0, 4))])


@pytest.mark.parametrize("backup_point, position, reward, legal", [
    ("clean", 0, -9.0, (True, False, True)),  # the paper's backup: the last state with no open group
    ("group", 1, -6.0, (False, False, True)),  # just before group 5 opened; b0's Copy (+3) survives
])
def test_backup_points(backup_point, position, reward, legal):
    game = MMapGame(problem(**TWO_GROUPS), drop_backup=True, backup_point=backup_point)
    assert [game.play(action) for action in (COPY, COPY)] == pytest.approx([3.0, 6.0])
    assert supply_us(game) == [19, 0, 2, 5, 1]
    assert game.play(NO_COPY) == pytest.approx(reward)
    assert (game.position, game.legal_actions()) == (position, legal)
    while not game.done:
        game.play(game.legal_actions().index(True))
    assert game.feasible
    check_mapping(game.problem, mapping_records(game))
