"""Self-play replays the moves a Drop-backup rewind undid, without searching them again (`SelfPlay.replay_backups`):
what makes a round's searches follow its games' buffers, not their rewinds, on the large workloads."""

from __future__ import annotations

import numpy as np

from algorithms.mmap.check import check_mapping
from algorithms.mmap.game import MMapGame
from algorithms.mmap.mapping import mapping_records
from algorithms.mmap.problem import build_problem
from algorithms.mmap.synthetic import synthetic_instance
from algorithms.muzero.mcts import SearchConfig
from algorithms.muzero.networks import Layout, Sizes, init_weights
from algorithms.muzero.selfplay import SearchProgram, SelfPlay
from algorithms.muzero.support import REWARD_SCALE

SIZES = Sizes(hidden=8, image=4, trunk=8, head=8)


def replayed_moves(problem, played):
    """Replay ``played`` on a fresh game: (moves at a position a rewind undid whose last action was legal again,
    how many of them repeated that action, rewinds)."""
    game = MMapGame(problem, drop_backup=True, backup_point="group")
    last, revisits, repeated = {}, 0, 0
    for action in played:
        position, legal = game.position, game.legal_actions()
        if position in last and legal[last[position]] and sum(legal) > 1:
            revisits += 1
            repeated += action == last[position]
        last[position] = action
        game.play(action)
    assert game.done
    return revisits, repeated, game.restores


def test_rewound_moves_are_replayed_without_a_search():
    problem = build_problem(synthetic_instance(seed=2, num_instructions=30))
    weights = init_weights(SIZES, 0)
    layout = Layout.of(weights)
    program = SearchProgram(layout, batch=4, config=SearchConfig(num_simulations=4, max_depth=2))
    scale = REWARD_SCALE / (problem.latency_all_slow - problem.latency_all_fast)
    played = {}
    for replay in (True, False):
        selfplay = SelfPlay(problem, program, seed=0, replay_backups=replay)
        trajectories = selfplay.play(layout.pack(weights), temperature=1.0)
        played[replay] = (selfplay.searches, [replayed_moves(problem, t.played) for t in trajectories])
        for trajectory in trajectories:
            assert trajectory.game.done and trajectory.game.feasible
            check_mapping(problem, mapping_records(trajectory.game))
            np.testing.assert_allclose(sum(trajectory.rewards), trajectory.game.total_reward * scale, rtol=1e-6,
                                       atol=1e-9)
            assert len(trajectory.actions) == len(trajectory.policies) == len(trajectory.features)
    searches, games = played[True]
    assert sum(rewinds for _, _, rewinds in games) > 0  # the workload rewinds under these seeds
    assert all(revisits == repeated for revisits, repeated, _ in games)  # every undone move replayed as before
    assert sum(revisits for revisits, _, _ in games) > 0
    old_searches, old_games = played[False]
    assert any(revisits > repeated for revisits, repeated, _ in old_games)  # searching them again changes moves
    assert searches < old_searches
