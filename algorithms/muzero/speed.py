"""Simulations per second of the RT search (`mcts.search`) next to `mctx.muzero_policy`, on the same small MLP
dynamics, batch, simulation count and depth cap: `python -m algorithms.muzero.speed --batch 64 --simulations 50`.

The dynamics: h' = tanh([h, one-hot(a)] W1 + b1); reward, value = h' w; prior logits = h' Wp (hidden 32).
Times are of a warm executable (compiles reported apart): the fastest of `repeats` executions, which on a shared
machine is the least disturbed one (the ratio to mctx, taken in one process, is the number to compare), in wall
clock and in this process's CPU time (`time.process_time`, all its threads: on a loaded machine the wall clock
counts the time other jobs held the cores).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import timerl as trl
from algorithms.muzero.mcts import Root, SearchConfig, Step, search_root
from timerl.rt import functional as F

ACTIONS, HIDDEN = 3, 32


def weights(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(scale=0.3, size=(HIDDEN + ACTIONS, HIDDEN)).astype(np.float32),
            "b1": rng.normal(scale=0.1, size=HIDDEN).astype(np.float32),
            "reward": rng.normal(scale=0.3, size=HIDDEN).astype(np.float32),
            "value": rng.normal(scale=0.3, size=HIDDEN).astype(np.float32),
            "prior": rng.normal(scale=0.3, size=(HIDDEN, ACTIONS)).astype(np.float32)}


def roots(batch: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(batch, ACTIONS)).astype(np.float32), rng.normal(size=batch).astype(np.float32),
            rng.normal(size=(batch, HIDDEN)).astype(np.float32))


def time_rt(batch: int, config: SearchConfig, backend: str, repeats: int) -> dict:
    w, (logits, value, embedding) = weights(), roots(batch)
    ctx = trl.Context("s")
    (s,) = ctx.dims
    (S,) = ctx.bounds
    visits = {}
    with ctx:
        def recurrent_fn(state, action):
            hidden = F.tanh(F.matmul(F.cat([state, F.one_hot(action, ACTIONS).astype("float32")], dim=-1),
                                     trl.tensor(w["w1"])) + trl.tensor(w["b1"]))
            return Step(F.matmul(hidden, trl.tensor(w["reward"])), F.matmul(hidden, trl.tensor(w["prior"])),
                        F.matmul(hidden, trl.tensor(w["value"])), hidden)

        root_visits, _ = search_root(Root(trl.tensor(logits), trl.tensor(value), trl.tensor(embedding)),
                                     recurrent_fn, trl.tensor(np.zeros((batch, ACTIONS), bool)), None, config, s)
        root_visits.sink(lambda point, v: visits.__setitem__("root", np.asarray(v).copy()))
    start = time.perf_counter()
    executable = ctx.compile(bounds={S: config.num_simulations}, backend=backend)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    executable.execute()
    first = time.perf_counter() - start
    seconds, cpu = _fastest(executable.execute, repeats)
    return {"compile": compile_seconds, "first": first, "seconds": seconds, "cpu": cpu,
            "simulations_per_second": batch * config.num_simulations / seconds,
            "cpu_simulations_per_second": batch * config.num_simulations / cpu, "visits": visits["root"]}


def time_mctx(batch: int, config: SearchConfig, repeats: int) -> dict:
    import jax
    import jax.numpy as jnp
    import mctx

    w, (logits, value, embedding) = weights(), roots(batch)

    def recurrent_fn(params, key, action, state):
        hidden = jnp.tanh(jnp.concatenate([state, jax.nn.one_hot(action, ACTIONS)], -1) @ w["w1"] + w["b1"])
        return mctx.RecurrentFnOutput(reward=hidden @ w["reward"], discount=jnp.full(batch, config.discount),
                                      prior_logits=hidden @ w["prior"], value=hidden @ w["value"]), hidden

    @jax.jit
    def policy(key):
        root = mctx.RootFnOutput(prior_logits=jnp.asarray(logits), value=jnp.asarray(value),
                                 embedding=jnp.asarray(embedding))
        return mctx.muzero_policy(None, key, root, recurrent_fn, config.num_simulations, max_depth=config.max_depth,
                                  dirichlet_fraction=0.0).search_tree.children_visits[:, 0]

    # float32 products, as timerl's jax backend makes them (`timerl.backends.jax_backend`): on a GPU, XLA's default
    # is TF32, and the visit counts then differ from timerl's by rounding alone
    with jax.default_matmul_precision("float32"):
        start = time.perf_counter()
        visits = policy(jax.random.PRNGKey(0)).block_until_ready()
        first = time.perf_counter() - start
        key = jax.random.PRNGKey(1)
        seconds, cpu = _fastest(lambda: policy(key).block_until_ready(), repeats)
    return {"first": first, "seconds": seconds, "cpu": cpu,
            "simulations_per_second": batch * config.num_simulations / seconds,
            "cpu_simulations_per_second": batch * config.num_simulations / cpu, "visits": np.asarray(visits)}


def _fastest(run, repeats: int) -> tuple[float, float]:
    """The fastest of ``repeats`` runs in wall-clock seconds and in CPU seconds."""
    walls, cpus = [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m algorithms.muzero.speed")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--simulations", type=int, default=50)
    parser.add_argument("--max-depth", type=int, default=None)
    parser.add_argument("--backends", nargs="*", default=["torch"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    config = SearchConfig(num_simulations=args.simulations, max_depth=args.max_depth)
    rows = {"mctx (jit)": time_mctx(args.batch, config, args.repeats)}
    for backend in args.backends:
        rows[f"timerl {backend}"] = time_rt(args.batch, config, backend, args.repeats)
    print(f"{args.batch} searches x {args.simulations} simulations, max depth {config.depth}")
    print("| implementation | compile s | first run s | s / search batch | simulations / s | of mctx's "
          "| CPU s / search batch | simulations / CPU s | of mctx's | same visits as mctx |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    reference = rows["mctx (jit)"]["visits"]
    for name, row in rows.items():
        same = "-" if name.startswith("mctx") else str(bool((row["visits"] == reference).all()))
        print(f"| {name} | {row.get('compile', float('nan')):.1f} | {row['first']:.2f} | {row['seconds']:.3f} | "
              f"{row['simulations_per_second']:,.0f} | "
              f"{row['simulations_per_second'] / rows['mctx (jit)']['simulations_per_second']:.1%} | "
              f"{row['cpu']:.3f} | {row['cpu_simulations_per_second']:,.0f} | "
              f"{row['cpu_simulations_per_second'] / rows['mctx (jit)']['cpu_simulations_per_second']:.1%} | {same} |")


if __name__ == "__main__":
    main()
