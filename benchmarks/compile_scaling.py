"""How compile time grows with the program: REINFORCE (algorithms/reinforce.py) with 2 to 12 hidden layers.

Compiles only (no environment steps run) and splits the scheduler's time into its steps: demand analysis,
dataflow grouping, isl's schedule computation, AST generation and placing the deallocations, in CPU seconds
(process time, so that a loaded machine compares with a quiet one). ``statements``
are the statements isl schedules; ``executes`` the computations in the generated program.

    .venv/bin/python -m benchmarks.compile_scaling [--layers 2 4 8 12] [--n-step 8]
"""

from __future__ import annotations

import argparse
import time

import timerl as trl
from algorithms.reinforce import discounted_returns
from timerl.compile import optimize_pdg, resolve_bounds
from timerl.pdg.verify import verify
from timerl.sched.ast import Execute
from timerl.sched.schedule import schedule_graph


def build(hidden_layers: int, n_step: int | None = None, num_envs: int = 16, hidden: int = 64) -> trl.Context:
    """The REINFORCE program of algorithms/reinforce.py, with a deeper policy and a sink that keeps nothing."""
    ctx = trl.Context("i t")
    i, t = ctx.dims
    I, T = ctx.bounds
    env = trl.rl.make_env("CartPole-v1", num_envs=num_envs, seed=0)
    with ctx:
        sizes = [env.observation_shape[0]] + [hidden] * hidden_layers + [env.num_actions]
        policy = trl.nn.MLP(sizes, activation="tanh", domain=(i,))
        o = trl.placeholder((num_envs, *env.observation_shape), domain=(i, t))
        o[i, 0] = env.reset(domain=(i,))
        pi = trl.distributions.Categorical(logits=policy(o))
        a = pi.sample()
        o[i, t + 1], r, terminated = env.step(a)
        end = T if n_step is None else trl.min(t + n_step, T)
        g = discounted_returns(r[i, t:end], terminated[i, t:end], 0.99)
        g = g - g.mean()
        loss = -(pi.log_prob(a) * g.detach()).mean()
        loss.backward()
        trl.optim.Adam(policy.parameters(), lr=1e-2).step()
        trl.stack([r[i, 0:T], terminated[i, 0:T].astype("float32")]).sink(lambda point, value: None)
    return ctx


def measure(hidden_layers: int, n_step: int | None = None, iterations: int = 5, steps: int = 200) -> dict:
    ctx = build(hidden_layers, n_step)
    started = time.process_time()
    bounds = resolve_bounds(ctx, {"I": iterations, "T": steps})
    graph = ctx.graph()
    verify(graph, bounds)
    graph = optimize_pdg(graph, bounds)
    passes = time.process_time() - started
    result = schedule_graph(graph, bounds)
    return {"layers": hidden_layers, "nodes": len(graph.nodes), "groups": len(result.groups),
            "statements": result.statements, "executes": result.schedule.count(Execute), "passes": passes,
            **result.phases, "total": time.process_time() - started}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 12])
    parser.add_argument("--n-step", type=int, default=None)
    args = parser.parse_args(argv)
    columns = ("layers", "nodes", "groups", "statements", "executes", "passes", "demand", "grouping", "isl", "ast",
               "frees", "total")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for layers in args.layers:
        row = measure(layers, args.n_step)
        cells = [f"{row.get(c, 0):.2f}" if isinstance(row.get(c, 0), float) else str(row[c]) for c in columns]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
