"""MMapGame (Wang et al., "Optimizing Memory Mapping Using Deep Reinforcement Learning") with its cost
model, baselines, benchmark and plots. Importing the package registers `timerl/MMapGame-v0`."""

import gymnasium

ENV_ID = "timerl/MMapGame-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="algorithms.mmap.env:MMapGameEnv")
