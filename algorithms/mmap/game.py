"""MMapGame (§4.2 and Appendix A): decide Copy, NoCopy or Drop for every buffer in chronological order.

State <b_t, O_t, I_t, W_t, B>: `position` (b_t), per-buffer offset columns and allocation intervals (O, I),
the supply vector `supply` (W), and the problem (B). The occupancy grid and the copy-edge vector are
derived caches of (O, I) and of the copy intervals.

Action rules (Appendix A), for the current buffer b with target time t:
- Copy, input:  I(b) = [s, t], s the latest start meeting Eq. 5 and Eq. 6; copy interval [s, t).
- Copy, output: I(b) = [t, e], e the earliest end meeting Eq. 5 and Eq. 6; copy interval (t, e].
- NoCopy, input: I(b) = (s, t], s the latest time inside an allocation of the same tensor.
- NoCopy, output: I(b) = live_range(b).
- Offsets: the lowest offset whose columns are free over the whole interval; when b's alias group is
  already in fast memory, only the group's offset (Eq. 4).
- Drop: slow memory.
Reward: for Copy/NoCopy the current benefit L_I(B') - L_I(B' + {b}), B' = b's instruction buffers already in
fast memory; 0 for Drop. Over a finished game the rewards of one instruction telescope to
L_I({}) - L_I(final set), so the return is exactly the latency saved against all-slow.

Choices where the paper is vague:
- NoCopy for an *output* needs no earlier allocation: it means "write the output into fast memory and keep
  it there for its live range" (no eviction copy), the only reading under which I(b) = live_range(b) is ever
  used. NoCopy for an *input* needs an earlier allocation of the same tensor (any earlier allocation starts
  at or before t, since buffers come in time order).
- If that earlier allocation already reaches t (e.g. an output kept resident, or the same tensor read twice
  by one instruction), (s, t] is empty: b reuses that allocation, takes its offset and no new space. Its
  record has start = end = t and `reuses` naming the owner.
- A Copy is allowed even if the tensor is already resident; it then takes new space (a wasteful but legal
  move, as in the paper's rules).
- Alias groups (Eq. 4): the group's first decided buffer fixes the group. Drop makes every later member
  drop; Copy/NoCopy fixes the group offset, and every later member must be placed at exactly that offset.
  A member that cannot be is an infeasible state. Aliased buffers *are* the same memory (an in-place
  update writes its output over its operand at the same time step), so the cells a group already holds
  count as free for its own later members: only the times not yet covered by the group are checked and
  marked (`Placement.segments`).
- Infeasible state (no legal action): without Drop-backup the game ends and the move's reward brings the
  return to zero (reward = -(return before the move)). With Drop-backup (§4.3.2) the game rewinds to the
  latest state in which no alias group was open (in fast memory with members still to come), forces the
  alias group of the buffer that had no legal action to Drop, and goes on; the move's reward is the
  change of return caused by the rewind. The rewind is an undo journal kept since that state.
  `backup_point="group"` is a cheaper variant for agents whose moves depend only on the game state (greedy
  policies, ES decoding): it rewinds only to the state just before the offending group's first placed
  member. Everything between the paper's backup and that state does not involve the group, so such an
  agent would replay exactly those moves; the variant skips the replay. It still terminates: every rewind
  drops one more group for good. (On the parsed workloads, where donated parameters keep alias groups
  open for almost the whole program, the paper's rewind replays most of the game every time.)
- An illegal action raises IllegalActionError; the gymnasium wrapper turns it into a lost game.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from algorithms.mmap import transfer
from algorithms.mmap.occupancy import Occupancy
from algorithms.mmap.problem import Problem

COPY, NO_COPY, DROP = 0, 1, 2
ACTION_NAMES = ("copy", "nocopy", "drop")
UNDECIDED = -1
GROUP_UNDECIDED, GROUP_FAST, GROUP_DROPPED = 0, 1, 2
_UNPLANNED = object()  # a Copy/NoCopy placement not computed yet in this state (`MMapGame._placement`)


class IllegalActionError(ValueError):
    pass


class GameOverError(RuntimeError):
    pass


class Placement(NamedTuple):
    """Where and when a Copy/NoCopy would put the current buffer."""

    start: int
    end: int
    column: int
    copy_first: int
    """Copy interval [copy_first, copy_last] (inclusive); empty when copy_first > copy_last."""
    copy_last: int
    reuses: int
    """Buffer whose allocation is reused (no new space), -1 for a new allocation."""
    segments: tuple
    """The (start, end) time ranges this placement newly marks in the grid: all of [start, end], less what
    the buffer's alias group already holds, and nothing for a reuse."""


class MMapGame:
    def __init__(self, problem: Problem, drop_backup: bool = False, backup_point: str = "clean"):
        """`backup_point`: "clean" (the paper's: latest state with no open alias group) or "group"."""
        if backup_point not in ("clean", "group"):
            raise ValueError(f"backup_point must be 'clean' or 'group', not {backup_point!r}")
        self.problem = problem
        self.drop_backup = drop_backup
        self.backup_point = backup_point
        buffers, tensors, groups = problem.num_buffers, problem.num_tensors, len(problem.group_last_buffer)
        self.position = 0
        self.occupancy = Occupancy(problem.num_instructions, problem.num_columns)
        self.supply = problem.supply.copy()
        self.copy_edges = np.zeros(max(problem.num_instructions - 1, 0), dtype=bool)
        self.decision = [UNDECIDED] * buffers
        self.placement: list = [None] * buffers
        self.tensor_latest_end = [-1] * tensors
        self.tensor_latest_buffer = [-1] * tensors
        self.group_state = [GROUP_UNDECIDED] * groups
        self.group_column = [-1] * groups
        self.group_intervals = [()] * groups
        self.group_opened_at = [-1] * groups
        self.open_groups = 0
        self.instruction_mask = [0] * problem.num_instructions
        self.total_reward = 0.0
        self.done = buffers == 0
        self.feasible = True
        self.restores = 0
        self.moves = 0
        self.journal: list = []
        self._prepare(0)

    # ----------------------------------------------------------------------------------------------- queries
    @property
    def candidates(self) -> tuple:
        """(Copy placement or None, NoCopy placement or None, Drop legal) for the current buffer."""
        return (self._placement(COPY), self._placement(NO_COPY), self._drop_legal)

    def legal_actions(self) -> tuple:
        return (self._placement(COPY) is not None, self._placement(NO_COPY) is not None, self._drop_legal)

    def is_legal(self, action: int) -> bool:
        """Whether ``action`` is legal now; computes only that action's placement (a replayed move needs no other)."""
        return self._drop_legal if action == DROP else self._placement(action) is not None

    def action_mask(self) -> np.ndarray:
        return np.array(self.legal_actions(), dtype=np.int8)

    def current_benefit(self) -> float:
        """The updated benefit of the current buffer: the reward a Copy or NoCopy would earn now."""
        return self._benefit(self.position)

    def clone(self) -> "MMapGame":
        twin = MMapGame.__new__(MMapGame)
        twin.__dict__.update(self.__dict__)
        twin.occupancy = self.occupancy.clone()
        twin.supply = self.supply.copy()
        twin.copy_edges = self.copy_edges.copy()
        twin._plans = list(self._plans)
        for name in ("decision", "placement", "tensor_latest_end", "tensor_latest_buffer", "group_state",
                     "group_column", "group_intervals", "group_opened_at", "instruction_mask", "journal"):
            setattr(twin, name, list(getattr(self, name)))
        return twin

    # ------------------------------------------------------------------------------------------------- moves
    def play(self, action: int) -> float:
        """Decide the current buffer; returns the move's reward (including any infeasibility correction)."""
        if self.done:
            raise GameOverError("the game is over")
        if not self.is_legal(action):
            raise IllegalActionError(
                f"{ACTION_NAMES[action]} is illegal for buffer {self.position} "
                f"(tensor {self.problem.tensor_id[self.position]}); legal: {self.legal_actions()}")
        self.moves += 1
        return_before = self.total_reward
        reward = self._apply(action)
        self.position += 1
        if self.position == self.problem.num_buffers:
            self.done = True
            self._prepare(self.position)
            return reward
        self._prepare(self.position)
        if not (self._drop_legal or self.is_legal(NO_COPY) or self.is_legal(COPY)):  # NoCopy: the cheaper plan
            if not self.drop_backup:
                self.done, self.feasible = True, False
                self.total_reward = 0.0
                return -return_before
            self._rewind_and_drop_group(self.problem.alias_group[self.position])
            return self.total_reward - return_before
        if self.drop_backup and self.open_groups == 0:
            self.journal.clear()
        return reward

    def forfeit(self) -> float:
        """End the game as lost (e.g. an illegal move through the env); returns the reward that zeroes the return."""
        if self.done:
            raise GameOverError("the game is over")
        reward, self.total_reward = -self.total_reward, 0.0
        self.done, self.feasible = True, False
        return reward

    def _apply(self, action: int) -> float:
        problem, buffer = self.problem, self.position
        group = problem.alias_group[buffer]
        placement = self._placement(action) if action != DROP else None
        tensor = problem.tensor[buffer]
        instruction = problem.target[buffer]
        entry = (buffer, self.open_groups, self.total_reward, self.instruction_mask[instruction],
                 self.tensor_latest_end[tensor], self.tensor_latest_buffer[tensor],
                 (self.group_state[group], self.group_column[group], self.group_intervals[group],
                  self.group_opened_at[group]) if group >= 0 else None)
        self.decision[buffer] = action
        reward = 0.0
        overwritten_supply = None
        if action == DROP:
            if group >= 0 and self.group_state[group] == GROUP_UNDECIDED:
                self.group_state[group] = GROUP_DROPPED
        else:
            reward = self._benefit(buffer)
            slot = problem.slot[buffer]
            if slot >= 0:
                self.instruction_mask[instruction] |= 1 << slot
            self.placement[buffer] = placement
            for start, end in placement.segments:
                self.occupancy.place(start, end, placement.column, problem.columns[buffer])
            if action == COPY and placement.copy_first <= placement.copy_last:
                overwritten_supply = transfer.consume(
                    self.supply, self.copy_edges, placement.copy_first, placement.copy_last,
                    problem.demand[buffer], toward_last=not problem.is_output[buffer])
            if placement.end > self.tensor_latest_end[tensor]:
                self.tensor_latest_end[tensor] = placement.end
                self.tensor_latest_buffer[tensor] = buffer
            if group >= 0:
                if placement.reuses < 0:
                    self.group_intervals[group] += ((placement.start, placement.end),)
                if self.group_state[group] == GROUP_UNDECIDED:
                    self.group_state[group] = GROUP_FAST
                    self.group_column[group] = placement.column
                    self.group_opened_at[group] = buffer
                    if problem.group_last_buffer[group] > buffer:
                        self.open_groups += 1
                elif problem.group_last_buffer[group] == buffer:
                    self.open_groups -= 1
        self.total_reward += reward
        if self.drop_backup:
            self.journal.append((entry, overwritten_supply))
        return reward

    def _benefit(self, buffer: int) -> float:
        slot = self.problem.slot[buffer]
        if slot < 0:
            return 0.0
        instruction = self.problem.target[buffer]
        table = self.problem.latency_lists[instruction]
        mask = self.instruction_mask[instruction]
        return table[mask] - table[mask | (1 << slot)]

    # ----------------------------------------------------------------------------------------- Drop-backup
    def _rewind_and_drop_group(self, group: int) -> None:
        stop = self.group_opened_at[group] if self.backup_point == "group" else -1
        while self.journal and self.position > stop:
            self._undo(*self.journal.pop())
        self.group_state[group] = GROUP_DROPPED
        self.restores += 1
        self._prepare(self.position)

    def _undo(self, entry, overwritten_supply) -> None:
        buffer, open_groups, total_reward, mask, latest_end, latest_buffer, group_before = entry
        problem = self.problem
        placement = self.placement[buffer]
        if placement is not None:
            for start, end in placement.segments:
                self.occupancy.remove(start, end, placement.column, problem.columns[buffer])
            if overwritten_supply is not None:
                transfer.restore(self.supply, self.copy_edges, placement.copy_first, placement.copy_last,
                                 overwritten_supply)
        tensor, group = problem.tensor[buffer], problem.alias_group[buffer]
        self.decision[buffer] = UNDECIDED
        self.placement[buffer] = None
        self.open_groups, self.total_reward = open_groups, total_reward
        self.instruction_mask[problem.target[buffer]] = mask
        self.tensor_latest_end[tensor], self.tensor_latest_buffer[tensor] = latest_end, latest_buffer
        if group >= 0:
            (self.group_state[group], self.group_column[group], self.group_intervals[group],
             self.group_opened_at[group]) = group_before
        self.position = buffer

    # ------------------------------------------------------------------------------------ action placements
    def _prepare(self, buffer: int) -> None:
        """The current buffer's plan, lazily: Drop's legality now, the Copy and NoCopy placements when first asked
        for (`_placement`). A state changes only through a move or a rewind, which prepare again, so a placement
        computed late is the one an eager plan would have computed. Replayed and forced moves need at most one of
        them (on lstm_lm_adam most of a self-play round's game moves are such replays)."""
        if self.done:
            self._plans, self._drop_legal = [None, None], False
            return
        group = self.problem.alias_group[buffer]
        state = self.group_state[group] if group >= 0 else GROUP_UNDECIDED
        if state == GROUP_DROPPED:
            self._plans, self._drop_legal = [None, None], True
            return
        self._plans, self._drop_legal = [_UNPLANNED, _UNPLANNED], state != GROUP_FAST
        self._group, self._required_column = group, (self.group_column[group] if state == GROUP_FAST else -1)

    def _placement(self, action: int):
        """The current buffer's Copy (0) or NoCopy (1) placement, None if illegal; computed once per state."""
        placement = self._plans[action]
        if placement is _UNPLANNED:
            plan = self._plan_copy if action == COPY else self._plan_no_copy
            placement = self._plans[action] = plan(self.position, self._group, self._required_column)
        return placement

    def _plan_copy(self, buffer: int, group: int, required_column: int):
        problem = self.problem
        target, demand = problem.target[buffer], problem.demand[buffer]
        if problem.is_output[buffer]:
            end = transfer.earliest_eviction_end(self.supply, self.copy_edges, target, problem.live_end[buffer], demand)
            if end is None:
                return None
            start, copy_first, copy_last = target, target + 1, end
        else:
            start = transfer.latest_prefetch_start(self.supply, self.copy_edges, problem.live_start[buffer], target,
                                                   demand)
            if start is None:
                return None
            end, copy_first, copy_last = target, start, target - 1
        return self._fit(buffer, group, required_column, start, end, copy_first, copy_last)

    def _plan_no_copy(self, buffer: int, group: int, required_column: int):
        problem = self.problem
        target = problem.target[buffer]
        if problem.is_output[buffer]:
            start, end = problem.live_start[buffer], problem.live_end[buffer]
        else:
            latest_end = self.tensor_latest_end[problem.tensor[buffer]]
            if latest_end < 0:
                return None
            if latest_end >= target:
                owner = self.tensor_latest_buffer[problem.tensor[buffer]]
                column = self.placement[owner].column
                if required_column >= 0 and column != required_column:
                    return None
                return Placement(target, target, column, target + 1, target, owner, ())
            start, end = latest_end + 1, target
        return self._fit(buffer, group, required_column, start, end, target + 1, target)

    def _fit(self, buffer, group, required_column, start, end, copy_first, copy_last):
        """A placement over [start, end] at the lowest free offset, or at the group's offset; None if none fits."""
        width = self.problem.columns[buffer]
        if required_column < 0:
            column = self.occupancy.lowest_free_offset(start, end, width)
            return None if column < 0 else Placement(start, end, column, copy_first, copy_last, -1, ((start, end),))
        segments = uncovered(start, end, self.group_intervals[group])
        for first, last in segments:
            if not self.occupancy.is_free(first, last, required_column, width):
                return None
        return Placement(start, end, required_column, copy_first, copy_last, -1, segments)


def uncovered(start: int, end: int, intervals: tuple) -> tuple:
    """The parts of [start, end] outside every interval of `intervals` (inclusive bounds), in time order."""
    parts, cursor = [], start
    for first, last in sorted(intervals):
        if last < cursor or first > end:
            continue
        if first > cursor:
            parts.append((cursor, first - 1))
        cursor = max(cursor, last + 1)
        if cursor > end:
            break
    if cursor <= end:
        parts.append((cursor, end))
    return tuple(parts)
