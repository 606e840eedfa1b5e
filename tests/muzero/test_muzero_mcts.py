"""MuZero search as recurrent tensors (algorithms/muzero/mcts.py) against mctx 0.0.71 and against a plain
Python MCTS written here from the MuZero pseudo-code, on the same fixed networks, roots and seeds."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest

import timerl as trl
from algorithms.muzero.mcts import Root, SearchConfig, Step, _normalised_q, search, search_root
from timerl.rt import functional as F

ACTIONS, HIDDEN = 3, 4


def fixed_network(seed: int):
    rng = np.random.default_rng(seed)
    shapes = {"w_state": (HIDDEN, HIDDEN), "w_action": (ACTIONS, HIDDEN), "w_reward": (HIDDEN,),
              "w_prior": (HIDDEN, ACTIONS), "w_value": (HIDDEN,)}
    return {name: rng.normal(size=shape).astype(np.float32) for name, shape in shapes.items()}


def random_root(seed: int, batch: int):
    rng = np.random.default_rng(seed + 1000)
    invalid = rng.random((batch, ACTIONS)) < 0.3
    invalid[invalid.all(axis=1), 0] = False
    return (rng.normal(size=(batch, ACTIONS)).astype(np.float32), rng.normal(size=batch).astype(np.float32),
            rng.normal(size=(batch, HIDDEN)).astype(np.float32), invalid)


def fixed_recurrent_fn(net):
    def recurrent_fn(state, action):
        hidden = F.tanh(F.matmul(state, trl.tensor(net["w_state"]))
                        + F.matmul(F.one_hot(action, ACTIONS).astype("float32"), trl.tensor(net["w_action"])))
        return Step(F.matmul(hidden, trl.tensor(net["w_reward"])), F.matmul(hidden, trl.tensor(net["w_prior"])),
                    F.matmul(hidden, trl.tensor(net["w_value"])), hidden)
    return recurrent_fn


def run_search_program(root, config: SearchConfig, build, backend: str) -> dict:
    """The named outputs ``build(rt_root, rt_invalid, s)`` makes of a search over the simulation dimension ``s``,
    each read by a sink, after one execution of the compiled program."""
    logits, value, embedding, invalid = root
    ctx = trl.Context("s")
    (s,) = ctx.dims
    (S,) = ctx.bounds
    got = {}
    with ctx:
        outputs = build(Root(trl.tensor(logits), trl.tensor(value), trl.tensor(embedding)), trl.tensor(invalid), s)
        for name, tensor in outputs.items():
            tensor.sink(lambda point, array, name=name: got.__setitem__(name, np.asarray(array).copy()))
    ctx.compile(bounds={S: config.num_simulations}, backend=backend).execute()
    return got


def run_rt_search(net, root, config: SearchConfig, noise=None, backend="torch"):
    def build(rt_root, rt_invalid, s):
        final = search(rt_root, fixed_recurrent_fn(net), rt_invalid, None if noise is None else trl.tensor(noise),
                       config, s)
        return final._asdict()

    return run_search_program(root, config, build, backend)


def mctx_recurrent_fn(net, batch: int, discount: float):
    """The fixed network as mctx's recurrent function (the same as `fixed_recurrent_fn`'s RT one)."""

    def recurrent_fn(params, key, action, state):
        hidden = jnp.tanh(state @ net["w_state"] + jax.nn.one_hot(action, ACTIONS) @ net["w_action"])
        output = mctx.RecurrentFnOutput(reward=hidden @ net["w_reward"], discount=jnp.full(batch, discount),
                                        prior_logits=hidden @ net["w_prior"], value=hidden @ net["w_value"])
        return output, hidden

    return recurrent_fn


def mctx_output(policy, net, root, config: SearchConfig, seed: int, **options):
    """mctx's ``policy`` (`muzero_policy`, `gumbel_muzero_policy`) on the fixed network and root, as NumPy."""
    logits, value, embedding, invalid = root
    output = policy(
        None, jax.random.PRNGKey(seed), mctx.RootFnOutput(prior_logits=jnp.asarray(logits), value=jnp.asarray(value),
                                                          embedding=jnp.asarray(embedding)),
        mctx_recurrent_fn(net, logits.shape[0], config.discount), config.num_simulations,
        invalid_actions=jnp.asarray(invalid), max_depth=config.max_depth, **options)
    return jax.tree.map(np.asarray, output)


def run_mctx(net, root, config: SearchConfig, seed: int, noise: bool):
    return mctx_output(mctx.muzero_policy, net, root, config, seed,
                       dirichlet_fraction=config.dirichlet_fraction if noise else 0.0,
                       dirichlet_alpha=config.dirichlet_alpha).search_tree


def mctx_dirichlet_noise(seed: int, batch: int, alpha: float) -> np.ndarray:
    """The noise muzero_policy draws for this seed (its first split, second key)."""
    _, noise_key, _ = jax.random.split(jax.random.PRNGKey(seed), 3)
    return np.asarray(jax.random.dirichlet(noise_key, alpha=jnp.full([ACTIONS], alpha), shape=(batch,)))


@pytest.mark.parametrize("seed, simulations, max_depth, noise", [
    (0, 8, None, False),
    (1, 10, 2, False),  # the depth cut-off re-evaluates existing children
    (2, 8, None, True),  # the same Dirichlet draws as mctx
    (3, 40, None, False),  # deep trees: six rounds of pointer doubling
    (4, 24, 5, True),  # a cut-off that is not a power of two
])
def test_search_matches_mctx(seed, simulations, max_depth, noise):
    check_against_mctx(seed, simulations, max_depth, noise, "torch")


def test_search_on_jax_matches_mctx():
    check_against_mctx(5, 20, None, True, "jax")


def test_search_root_on_jax_is_scanned_and_matches_mctx():
    """The root statistics alone (what self-play reads): on jax the simulation loop runs as `lax.scan`s, the
    sinks of its last values after them, and the root's visits and value are mctx's."""
    seed, config = 6, SearchConfig(num_simulations=12, max_depth=3)
    net, root = fixed_network(seed), random_root(seed, batch=4)
    logits, value, embedding, invalid = root
    ctx = trl.Context("s")
    (s,) = ctx.dims
    (S,) = ctx.bounds
    got = {}
    with ctx:
        visits, root_value = search_root(Root(trl.tensor(logits), trl.tensor(value), trl.tensor(embedding)),
                                         fixed_recurrent_fn(net), trl.tensor(invalid), None, config, s)
        visits.sink(lambda point, array: got.__setitem__("visits", np.asarray(array).copy()))
        root_value.sink(lambda point, array: got.__setitem__("value", np.asarray(array).copy()))
    # the scans are what this test is about: stated, so that TIMERL_PASS_OFF=scan_loops keeps them
    executable = ctx.compile(bounds={S: config.num_simulations}, backend="jax", scan_loops=True)
    assert any("lax.scan" in line for line in executable._program.source.splitlines())
    for _ in range(2):  # the second execution reuses the compiled scans
        got.clear()
        executable.execute()
        theirs = run_mctx(net, root, config, seed, noise=False)
        np.testing.assert_array_equal(got["visits"], theirs.children_visits[:, 0])
        np.testing.assert_allclose(got["value"], theirs.node_values[:, 0], rtol=1e-4, atol=1e-4)


def check_against_mctx(seed, simulations, max_depth, noise, backend):
    net, root = fixed_network(seed), random_root(seed, batch=5)
    config = SearchConfig(num_simulations=simulations, max_depth=max_depth)
    noise_draws = mctx_dirichlet_noise(seed, 5, config.dirichlet_alpha) if noise else None
    ours = run_rt_search(net, root, config, noise_draws, backend)
    theirs = run_mctx(net, root, config, seed, noise)
    np.testing.assert_array_equal(ours["children_visits"][:, 0], theirs.children_visits[:, 0])
    np.testing.assert_array_equal(ours["children_visits"], theirs.children_visits)
    np.testing.assert_array_equal(ours["node_visits"], theirs.node_visits)
    np.testing.assert_array_equal(ours["children_index"], theirs.children_index)
    np.testing.assert_array_equal(ours["parents"], theirs.parents)
    np.testing.assert_array_equal(ours["action_from_parent"], theirs.action_from_parent)
    for name in ("node_values", "children_values", "children_rewards", "children_prior_logits", "embeddings"):
        np.testing.assert_allclose(ours[name], getattr(theirs, name), rtol=1e-4, atol=1e-4, err_msg=name)
    assert (ours["children_visits"][:, 0][root[3]] == 0).all()  # illegal root actions are never visited
    assert (ours["children_visits"][:, 0].sum(axis=1) == simulations).all()


# -------------------------------------------------------------------------- a plain Python MuZero search
class Node:
    def __init__(self, prior_logits, value, state, reward=0.0):
        self.prior_logits, self.raw_value, self.state, self.reward = prior_logits, value, state, reward
        self.children: dict[int, Node] = {}
        self.visits, self.value_sum = 1, float(value)  # expansion counts as the first visit (as in mctx)

    def value(self):
        return self.value_sum / self.visits


def python_search(net, logits, value, state, invalid, simulations, discount=0.9999, c1=1.25, c2=19652.0):
    def dynamics(state, action):
        hidden = np.tanh(state @ net["w_state"] + np.eye(ACTIONS, dtype=np.float32)[action] @ net["w_action"])
        return float(hidden @ net["w_reward"]), hidden @ net["w_prior"], float(hidden @ net["w_value"]), hidden

    shifted = logits - logits.max()
    root = Node(np.where(invalid, np.finfo(np.float32).min, shifted), value, state)
    for _ in range(simulations):
        node, path = root, []
        while True:
            action = select(node, node is root, invalid, discount, c1, c2)
            path.append((node, action))
            if action not in node.children:
                break
            node = node.children[action]
        reward, prior, leaf_value, hidden = dynamics(node.state, action)
        node.children[action] = Node(prior, leaf_value, hidden, reward)
        backed_up = leaf_value
        for parent, action in reversed(path):
            backed_up = parent.children[action].reward + discount * backed_up
            parent.value_sum += backed_up
            parent.visits += 1
    return np.array([root.children[a].visits if a in root.children else 0 for a in range(ACTIONS)])


def select(node, at_root, invalid, discount, c1, c2):
    probs = np.exp(node.prior_logits - node.prior_logits.max())
    probs /= probs.sum()
    q = {a: child.reward + discount * child.value() for a, child in node.children.items()}
    low = min([node.value()] + list(q.values()))
    high = max([node.value()] + list(q.values()))
    best, best_score = None, -math.inf
    for action in range(ACTIONS):
        if at_root and invalid[action]:
            continue
        child = node.children.get(action)
        visits = child.visits if child else 0
        normalised = (q[action] - low) / max(high - low, 1e-8) if child else 0.0
        exploration = math.sqrt(node.visits) * (c1 + math.log((node.visits + c2 + 1) / c2)) * probs[action]
        score = normalised + exploration / (visits + 1)
        if score > best_score:
            best, best_score = action, score
    return best


def test_search_matches_plain_python_mcts():
    net, root = fixed_network(7), random_root(7, batch=4)
    config = SearchConfig(num_simulations=12)
    ours = run_rt_search(net, root, config)
    logits, value, state, invalid = root
    for b in range(4):
        expected = python_search(net, logits[b], value[b], state[b], invalid[b], config.num_simulations)
        np.testing.assert_array_equal(ours["children_visits"][b, 0], expected)


def test_min_q_range_keeps_tiny_q_differences_small():
    """Min-max Q normalisation by hand: children Q (0.004, 0.0, unvisited), node value 0.002: low 0, high 0.004.
    With mctx's epsilon (1e-8) the range is 0.004 and the scores are (1, 0, 0): a 0.004 difference decides the
    search. With min_q_range 1.0 the range is 1.0 and the scores are (0.004, 0, 0). With a range above the minimum
    (Q 3.0 and 1.0, node 2.0: range 2.0) both give ((3 - 1) / 2, 0, 0)."""
    got = {}
    ctx = trl.Context("i")
    with ctx:
        q = trl.tensor(np.array([[0.004, 0.0, 0.5], [3.0, 1.0, 0.0]], np.float32))
        visits = trl.tensor(np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]], np.float32))
        node = trl.tensor(np.array([0.002, 2.0], np.float32))
        for name, epsilon in (("mctx", 1e-8), ("range", 1.0)):
            _normalised_q(q, visits, node, epsilon).sink(lambda p, v, name=name: got.__setitem__(name, np.asarray(v)))
    ctx.compile(bounds={ctx.bounds[0]: 1}, backend="torch").execute()
    np.testing.assert_allclose(got["mctx"], [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["range"], [[0.004, 0.0, 0.0], [1.0, 0.0, 0.0]], rtol=1e-5, atol=1e-6)
    assert SearchConfig().min_q_range == 1e-8
