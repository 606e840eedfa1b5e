"""The MMapGame written in recurrent-tensor ops: a batch of games advanced one move per point of a move
dimension, equal move for move to the NumPy game (`algorithms/mmap/game.py`).

tables (the instance as arrays and constant RTs), rules (occupancy, copy windows, legality, benefits),
moves (the state and one move, Drop-backup included), program (the move recurrence, replays),
vector_env (a gymnasium vector env, `timerl/MMapGameRT-v0`).
"""
