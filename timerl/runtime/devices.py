"""``ctx.compile(..., devices=N, split=...)``: which batch axis a data-parallel program splits, and the checks
that refuse what cannot run split (`timerl.backends.jax_sharded` runs it).

``split`` names the batch axis by its length: ``"envs"`` (the default) is the environments' ``num_envs`` (every
environment of the program must have the same), an int is any batch length (a source's batch of samples)."""

from __future__ import annotations

from typing import Any

from timerl.errors import ArgumentError, TimeRLError, user_location
from timerl.ops.registry import SOURCE, UDF
from timerl.pdg.graph import Graph


def check_devices(graph: Graph, backend: str, devices: Any, split: Any, device_memory: int | None) -> int | None:
    """The batch length to split (None: one device, nothing split), or a `TimeRLError` naming the compile
    line."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ArgumentError(f"{user_location()}: devices= is a positive int, got {devices!r}")
    if devices == 1:
        return None
    if backend != "jax":
        raise TimeRLError(f"{user_location()}: devices={devices} runs on the jax backend only (sharding over a "
                          f"jax device mesh); backend {backend!r} runs a program on one device")
    if device_memory is not None:
        raise TimeRLError(f"{user_location()}: device_memory= is a budget of one device; it cannot be combined "
                          f"with devices={devices}")
    batch = _batch_length(graph, split)
    if not any(batch in tuple(t.shape) for node in graph.nodes if node.category in (SOURCE, UDF)
               for t in node.outputs):
        raise TimeRLError(f"{user_location()}: split={split!r}: no source or UDF output of this program has an "
                          f"axis of length {batch}, so nothing would be split across the devices")
    if batch % devices:
        raise TimeRLError(f"{user_location()}: the batch axis to split has length {batch}, which {devices} "
                          f"devices cannot share evenly (choose a count that divides {batch})")
    return batch


def sharded_backend(devices: int, batch: int) -> Any:
    """The jax backend over ``devices`` devices (imports jax), refused where fewer are available."""
    from timerl.backends.jax_sharded import ShardedJaxBackend  # jax is imported when a program asks for it
    import jax

    available = jax.devices()
    if devices > len(available):
        hint = ("; on the CPU, set XLA_FLAGS=--xla_force_host_platform_device_count=N before jax is first "
                "imported" if available[0].platform == "cpu" else "")
        raise TimeRLError(f"{user_location()}: devices={devices}, but jax has {len(available)} "
                          f"{available[0].platform} device(s){hint}")
    return ShardedJaxBackend(devices, batch)


def _batch_length(graph: Graph, split: Any) -> int:
    if isinstance(split, int) and not isinstance(split, bool):
        if split < 1:
            raise ArgumentError(f"{user_location()}: split= is a batch length >= 1 or \"envs\", got {split!r}")
        return split
    if split != "envs":
        raise ArgumentError(f"{user_location()}: split= is \"envs\" (the environments' axis) or the length of "
                            f"the batch axis to split (an int), got {split!r}")
    counts = {count for node in graph.nodes if node.category is UDF
              for count in [_num_envs(node.attrs["fn"])] if count is not None}
    if not counts:
        raise TimeRLError(f"{user_location()}: split=\"envs\" splits the environments' axis, but this program "
                          "steps no gymnasium environments; give split= the length of the batch axis to split")
    if len(counts) > 1:
        raise TimeRLError(f"{user_location()}: split=\"envs\" needs one environment count, but this program's "
                          f"environments have {sorted(counts)}; give split= the length to split")
    return counts.pop()


def _num_envs(fn: Any) -> int | None:
    """The number of environments behind an environment's reset or step UDF (None for other UDFs)."""
    env = getattr(fn, "env", None) or getattr(fn, "__self__", None)
    count = getattr(env, "num_envs", None)
    return count if isinstance(count, int) else None
