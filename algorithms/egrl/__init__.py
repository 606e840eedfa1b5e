"""EGRL (evolutionary graph reinforcement learning, papers 003/004) on a simulated three-level memory chip:
`chip` (simulator, compiler repair and heuristic), `workloads` (ResNet-50/101 and BERT traced with torch.fx),
`policy` (the Graph U-Net, as RTs and eagerly), `sac` (the SAC-discrete learner as an RT program),
`population` (Boltzmann and GNN members), `learners` (EGRL and the baselines), `bench` (the Fig. 3 table)."""
