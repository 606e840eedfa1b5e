"""MMapGame (Wang et al., "Optimizing Memory Mapping Using Deep Reinforcement Learning", arXiv:2305.07440)
with its cost model, baselines, benchmark and plots. Importing the package registers `timerl/MMapGame-v0`.

One job per file: costmodel (latency tables, benefits, supply, demand), instance (reading workloads),
problem (the preprocessed, immutable instance), occupancy (the memory grid), transfer (Eq. 5 and 6),
game (the MDP), mapping (results and their latency), check (an independent validator), observation and
env (gymnasium), synthetic (generated programs), baselines/, bench, plot.
"""

import gymnasium

ENV_ID = "timerl/MMapGame-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="algorithms.mmap.env:MMapGameEnv")

RT_ENV_ID = "timerl/MMapGameRT-v0"

if RT_ENV_ID not in gymnasium.registry:
    gymnasium.register(id=RT_ENV_ID, vector_entry_point="algorithms.mmap.rt.vector_env:MMapGameRTVectorEnv")
