"""REGAL (Paliwal et al., ICLR 2020; paper 001; docs/algorithms/regal.md): a graph network proposes per-node
Beta distributions that replace the uniform mutant sampling of BRKGA for joint device placement and scheduling.

`graph` (computation graphs), `perfmodel` (decoding and the cost model; `compiled`, its numba decoder),
`brkga` (the genetic algorithm), `data` (synthetic graphs), `datasets` (the paper-size splits),
`workloads` (MMapGame programs as graphs), `features` (what the networks see,
what their actions mean), `policy` (the GNNs as recurrent tensors), `train` (REINFORCE, and proposals
from a trained policy), `bench` (the paper's evaluation; ``python -m algorithms.regal bench``),
`diagnose` (what known proposals gain), `paper` (REINFORCE and evaluation at the paper's size), `place`
(a user's graph placed and scheduled), `speed` (the decoders timed)."""
