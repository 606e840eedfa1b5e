"""Baselines for MMapGame. Every agent is `agent(problem, seed=0, budget=None) -> Result`, budget in game moves."""

from algorithms.mmap.baselines.evolution import evolution_strategies
from algorithms.mmap.baselines.heuristic import heuristic_play
from algorithms.mmap.baselines.mcts import mcts_play
from algorithms.mmap.baselines.msa import msa_play
from algorithms.mmap.baselines.random_play import random_play
from algorithms.mmap.baselines.result import Result

AGENTS = {"heuristic": heuristic_play, "msa": msa_play, "random": random_play, "es": evolution_strategies,
          "mcts": mcts_play}

__all__ = ["AGENTS", "Result", "evolution_strategies", "heuristic_play", "mcts_play", "msa_play", "random_play"]
