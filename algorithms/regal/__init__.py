"""REGAL (Paulus et al., ICLR 2020; paper 001): a graph network proposes per-node Beta distributions that
replace the uniform mutant sampling of BRKGA for joint device placement and scheduling.

`graph` (computation graphs), `perfmodel` (decoding and the cost model), `brkga` (the genetic algorithm),
`data` (synthetic graphs), `workloads` (MMapGame programs as graphs), `features` (what the networks see,
what their actions mean), `policy` (the GNNs as recurrent tensors), `train` (REINFORCE, and proposals
from a trained policy), `bench` (the paper's evaluation; ``python -m algorithms.regal bench``),
`diagnose` (what known proposals gain; docs/algorithms/regal.md)."""
