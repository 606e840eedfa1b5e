"""Every public function, class and tensor method of timerl, called with arguments of the wrong type, must
refuse with a `TimeRLError` (or a TypeError from our own checks that names the argument), never an internal
traceback. A table gives one valid call per entry point; the walk then spoils one argument at a time. A new
public name without a row fails the test, so the walk stays complete."""

from __future__ import annotations

import numpy as np
import pytest

import timerl as trl
from timerl.rt import functional as F

MODULES = ("timerl", "timerl.nn", "timerl.optim", "timerl.distributions", "timerl.rl")
NOT_CALLED = {  # public names that are not entry points a user calls with arguments
    "timerl.RecurrentTensor",  # built by the library; its methods are walked below
    "timerl.Expr", "timerl.Cond", "timerl.nn.Module", "timerl.optim.Optimizer",  # base classes
    "timerl.rl.Episode", "timerl.rl.RTEnvironment",  # records and a base class, made by make_env
    "timerl.Stop",  # raised by a user's sink, not called by one
}


class Wrong:
    """A value of a type no timerl argument accepts."""

    def __repr__(self) -> str:
        return "<Wrong>"


WRONG_VALUES = (Wrong(), "wrong", {"wrong": 1}, 2.5)


def _public_names() -> set[str]:
    import importlib

    names = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            obj = getattr(module, name)
            if callable(obj) and getattr(obj, "__module__", "").startswith("timerl") and not (
                    isinstance(obj, type) and issubclass(obj, Exception)):
                names.add(f"{module_name}.{name}")
    return names - NOT_CALLED


def _calls(ctx, x, index):
    """name -> (callable, valid keyword arguments, values that are valid for some argument)."""
    i, t = ctx.dims
    linear = trl.nn.Linear(3, 2, domain=(i,))
    weight = linear.parameters()[0]
    categorical = trl.distributions.Categorical(logits=x)
    normal = trl.distributions.Normal(x, 1.0)
    calls = {
        "timerl.Context": (trl.Context, {"dims": "i t"}, {"wrong"}),
        "timerl.CompileOptions": (trl.CompileOptions, {"cse": False, "incrementalize": None, "vectorize": True},
                                  set()),
        "timerl.Symbol": (trl.Symbol, {"name": "s", "is_bound": False}, {"wrong"}),
        "timerl.min": (trl.min, {"left": t, "right": 3}, set()),
        "timerl.max": (trl.max, {"left": t, "right": 3}, set()),
        "timerl.tensor": (trl.tensor, {"value": [1.0, 2.0], "dtype": "float32", "domain": (t,),
                                       "requires_grad": False}, {2.5}),
        "timerl.zeros": (trl.zeros, {"shape": (2,), "dtype": "float32", "domain": (t,), "requires_grad": False},
                         set()),
        "timerl.ones": (trl.ones, {"shape": (2,), "dtype": "float32", "domain": (t,), "requires_grad": False},
                        set()),
        "timerl.full": (trl.full, {"shape": (2,), "value": 1.0, "dtype": "float32", "domain": (t,),
                                   "requires_grad": False}, {2.5}),
        "timerl.arange": (trl.arange, {"n": 3, "dtype": "int64", "domain": (t,), "requires_grad": False}, set()),
        "timerl.rand": (trl.rand, {"shape": (2,), "dtype": "float32", "domain": (t,), "requires_grad": False},
                        set()),
        "timerl.randn": (trl.randn, {"shape": (2,), "dtype": "float32", "domain": (t,), "requires_grad": False},
                         set()),
        "timerl.source": (trl.source, {"fn": lambda p: 0.0, "shape": (), "dtype": "float32", "domain": (t,),
                                       "requires_grad": False}, set()),
        "timerl.placeholder": (trl.placeholder, {"shape": (2,), "dtype": "float32", "domain": (t,),
                                                 "requires_grad": False}, set()),
        "timerl.param": (trl.param, {"init": np.zeros(2), "domain": (i,), "dtype": "float32"}, {2.5}),
        "timerl.cat": (trl.cat, {"tensors": [x, x], "dim": 0}, set()),
        "timerl.stack": (trl.stack, {"tensors": [x, x], "dim": 0}, set()),
        "timerl.where": (trl.where, {"cond": x > 0, "x": x, "y": x}, {2.5}),
        "timerl.gather": (trl.gather, {"x": x, "dim": 0, "index": index.reshape(2, 1)}, set()),
        "timerl.index_select": (trl.index_select, {"x": x, "dim": 0, "index": index}, set()),
        "timerl.one_hot": (trl.one_hot, {"x": index, "num_classes": 3}, set()),
        "timerl.nn.Linear": (trl.nn.Linear, {"n_in": 3, "n_out": 2, "domain": (i,), "seed": 0, "bias": True,
                                             "dtype": "float32"}, set()),
        "timerl.nn.MLP": (trl.nn.MLP, {"sizes": [3, 4, 2], "activation": "tanh", "domain": (i,), "seed": 0,
                                       "dtype": "float32"}, set()),
        "timerl.nn.PatchEmbedding": (trl.nn.PatchEmbedding, {"image_shape": (3, 4, 4), "patch": 2, "n_out": 2,
                                                             "domain": (i,), "seed": 0, "dtype": "float32"}, set()),
        "timerl.optim.SGD": (trl.optim.SGD, {"params": [weight], "lr": 0.1, "max_grad_norm": None}, {2.5}),
        "timerl.optim.Adam": (trl.optim.Adam, {"params": [weight], "lr": 0.1, "betas": (0.9, 0.99), "eps": 1e-8,
                                               "max_grad_norm": None}, {2.5}),
        "timerl.distributions.Categorical": (trl.distributions.Categorical, {"logits": x}, set()),
        "timerl.distributions.Normal": (trl.distributions.Normal, {"mean": x, "std": 1.0}, {2.5}),
        "timerl.rl.make_env": (trl.rl.make_env, {"name": "CartPole-v1", "num_envs": 2, "seed": 0}, set()),
        "timerl.rl.RunningEpisodes": (trl.rl.RunningEpisodes, {"num_envs": 3}, set()),
        "timerl.rl.Env": (trl.rl.Env, {"name": "CartPole-v1", "num_envs": 2, "seed": 0}, set()),
        "timerl.rl.episode_statistics": (trl.rl.episode_statistics, {"rewards": np.ones((2, 3)),
                                                                     "ends": np.zeros((2, 3), bool)}, set()),
        "Context.when": (ctx.when, {"cond": t < 2}, set()),
        "Linear.__call__": (linear, {"x": x}, set()),
        "Categorical.log_prob": (categorical.log_prob, {"value": index}, set()),
        "Normal.log_prob": (normal.log_prob, {"value": x}, {2.5}),
        "RecurrentTensor.sink": (x.sink, {"fn": lambda p, v: None}, set()),
    }
    for method, arguments in METHOD_ARGUMENTS.items():
        receiver = index if method == "one_hot" else x
        numbers_ok = {2.5} if method in ("clip", "discounted_sum", "discounted_cum_sum") else set()
        calls[f"RecurrentTensor.{method}"] = (getattr(receiver, method), arguments, numbers_ok)
    return calls


METHOD_ARGUMENTS = {
    "sum": {"dim": 0, "keepdim": False}, "mean": {"dim": 0, "keepdim": False}, "max": {"dim": 0, "keepdim": False},
    "min": {"dim": 0, "keepdim": False}, "argmax": {"dim": 0, "keepdim": False}, "cumsum": {"dim": 0},
    "softmax": {"dim": 0}, "log_softmax": {"dim": 0}, "discounted_sum": {"gamma": 0.9},
    "discounted_cum_sum": {"gamma": 0.9}, "transpose": {"dim0": 0, "dim1": 1}, "unsqueeze": {"dim": 0},
    "squeeze": {"dim": 0}, "flip": {"dim": 0}, "one_hot": {"num_classes": 3}, "clip": {"min": 0.0, "max": 1.0},
    "astype": {"dtype": "float64"}, "sum_to": {"shape": (1, 3)},
}
POSITIONAL_METHODS = {"reshape": (6,), "permute": (1, 0), "expand": (2, 2, 3)}


def _refused(call, name: str, argument: str, value) -> str | None:
    """None when the call refuses properly; otherwise what went wrong."""
    try:
        call()
    except trl.TimeRLError:
        return None
    except TypeError as error:
        if argument in str(error):
            return None
        return f"{name}({argument}={value!r}): TypeError not naming the argument: {error}"
    except Exception as error:  # noqa: BLE001  (an internal exception is exactly what this test looks for)
        return f"{name}({argument}={value!r}): {type(error).__name__}: {error}"
    return f"{name}({argument}={value!r}) was accepted"


def test_every_public_entry_point_refuses_wrong_argument_types():
    ctx = trl.Context("i t")
    problems = []
    with ctx:
        x = trl.source(lambda p: np.zeros((2, 3)), shape=(2, 3), domain=(ctx.dims[1],))
        index = trl.tensor(np.array([0, 1]))
        calls = _calls(ctx, x, index)
        missing = _public_names() - set(calls)
        methods = set(F.METHODS) - set(METHOD_ARGUMENTS) - set(POSITIONAL_METHODS) - {
            "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "sign", "detach", "clamp", "gather",
            "index_select"}  # no arguments, or walked as trl.* functions
        assert not missing and not methods, f"no valid call for {sorted(missing) + sorted(methods)}"
        for name, (function, arguments, valid) in calls.items():
            function(**arguments)  # the valid call works
            for argument in arguments:
                for value in WRONG_VALUES:
                    if isinstance(value, (str, float)) and value in valid:
                        continue
                    spoiled = dict(arguments, **{argument: value})
                    problem = _refused(lambda: function(**spoiled), name, argument, value)
                    if problem:
                        problems.append(problem)
        for method, arguments in POSITIONAL_METHODS.items():
            getattr(x, method)(*arguments)
            for value in WRONG_VALUES:
                problem = _refused(lambda: getattr(x, method)(value, *arguments[1:]), method, "shape", value)
                if problem:
                    problems.append(problem)
        for key in WRONG_VALUES[:3]:
            for what, call in (("x[...]", lambda: x[key]), ("x.spatial[...]", lambda: x.spatial[key]),
                               ("x + value", lambda: x + key), ("x.sink", lambda: x.sink(key))):
                problem = _refused(call, what, "key", key)
                if problem:
                    problems.append(problem)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("options", [{"backend": "tpu"}, {"bounds": [3]}, {"seed": "0"}, {"swap": "yes"},
                                     {"optimize": None}, {"device_memory": "1GB"}, {"fast": True},
                                     {"recompute": "yes"}])
def test_compile_refuses_wrong_options(options):
    ctx = trl.Context("t")
    with ctx:
        trl.source(lambda p: 1.0, domain=ctx.dims).sink(lambda p, v: None)
    arguments = {"bounds": {ctx.bounds[0]: 2}, "backend": "reference", **options}
    with pytest.raises(trl.TimeRLError):
        ctx.compile(**arguments)



def test_tensor_methods_are_the_functional_ones():
    """``x.sum()`` is ``F.sum(x)``: the methods `RecurrentTensor` defines in its class are functional's list."""
    for name in F.METHODS:
        assert getattr(trl.RecurrentTensor, name) is getattr(F, name), name
