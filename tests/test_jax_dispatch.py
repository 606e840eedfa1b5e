"""timerl's jax backend runs XLA:CPU computations on the calling thread unless the process chose otherwise with
the variable JAX_CPU_ENABLE_ASYNC_DISPATCH (`timerl/backends/jax_backend.py`): checked in fresh processes, since the
setting is process-wide and fixed when jax makes its CPU client."""

import os
import subprocess
import sys

CHECK = ("import timerl.backends.jax_backend, jax; "
         "print(jax.config.read('jax_cpu_enable_async_dispatch'))")


def _async_dispatch(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JAX_CPU_ENABLE_ASYNC_DISPATCH"}
    if env_value is not None:
        env["JAX_CPU_ENABLE_ASYNC_DISPATCH"] = env_value
    result = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, check=True)
    return result.stdout.strip().splitlines()[-1]


def test_backend_turns_async_dispatch_off_by_default():
    assert _async_dispatch(None) == "False"


def test_jax_variable_chosen_by_the_process_is_kept():
    assert _async_dispatch("true") == "True"
    assert _async_dispatch("false") == "False"
