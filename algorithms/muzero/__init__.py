"""MMap-MuZero (Wang et al., 2023, §4.3; Schrittwieser et al., 2020) written as a timerl program: the networks,
the search, the losses and the optimizer are recurrent tensors run by the engine; the MMapGame itself (the
NumPy game of `algorithms.mmap`, with Drop-backup) is host logic between searches.

One job per file: mcts (the batched search over a simulation dimension), networks (representation, dynamics
and prediction over one flat weight vector), support (categorical value/reward supports), features (the game
state as the networks' input), replay (trajectories, n-step targets, Reanalyse), learner (the K-step unroll
loss and Adam as one RT program over training iterations), selfplay (searching agents playing the game),
actors (a round's games split over self-play actors, on local Ray for more than one), agent (one run on one
workload), bench (MuZero and its ablations as agents of the MMapGame bench), speed (the search next to mctx) and
__main__ (the command line).
"""
