"""REGAL (Paulus et al., ICLR 2020; paper 001): a graph network proposes per-node Beta distributions that
replace the uniform mutant sampling of BRKGA for joint device placement and scheduling.

`graph` (computation graphs), `perfmodel` (decoding and the cost model), `brkga` (the genetic algorithm),
`data` (synthetic and MMapGame graphs), `policy` (the GNN and its REINFORCE training, as recurrent tensors),
`bench` (the paper's evaluation)."""
