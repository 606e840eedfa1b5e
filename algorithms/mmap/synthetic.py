"""Random instances in the workload schema, for tests and for benchmarking before real workloads exist.

A program of `num_instructions` instructions: a few parameters live from time 0, each instruction reads one
to three live tensors and writes one new tensor. Some instructions update in place: their output joins the
alias group of their first operand, so alias constraints (Eq. 4) appear as in XLA programs (loop carries,
dynamic-update-slice). Sizes are log-uniform; flops are set from a log-uniform arithmetic intensity so that
the programs mix compute-bound and memory-bound instructions.
"""

from __future__ import annotations

import numpy as np


def synthetic_instance(seed: int = 0, num_instructions: int = 40, num_parameters: int = 4,
                       in_place_fraction: float = 0.1, name: str | None = None) -> dict:
    rng = np.random.default_rng(seed)
    size_of: dict = {}
    alias_of: dict = {}
    defined_at: dict = {}
    next_alias = 0
    for tensor in range(num_parameters):
        size_of[tensor] = _random_size(rng)
        defined_at[tensor] = 0
    instructions = []
    for time in range(num_instructions):
        live = [t for t in size_of if defined_at[t] < time or (t < num_parameters)]
        recent = live[-8:]
        count = int(rng.integers(1, 4))
        operands = [int(t) for t in rng.choice(recent, size=min(count, len(recent)), replace=False)]
        output = len(size_of)
        if operands and rng.random() < in_place_fraction:
            size_of[output] = size_of[operands[0]]
            if operands[0] not in alias_of:
                alias_of[operands[0]] = next_alias
                next_alias += 1
            alias_of[output] = alias_of[operands[0]]
        else:
            size_of[output] = _random_size(rng)
        defined_at[output] = time
        touched = sum(size_of[t] for t in operands) + size_of[output]
        intensity = float(np.exp(rng.uniform(np.log(0.5), np.log(2000.0))))
        instructions.append({"time": time, "name": f"op{time}", "opcode": "fusion", "flops": intensity * touched,
                             "operands": operands, "outputs": [output]})
    return _with_buffers(name or f"synthetic_{seed}_{num_instructions}", instructions, size_of, alias_of,
                         defined_at, num_parameters)


def _random_size(rng) -> int:
    return int(np.exp(rng.uniform(np.log(1024), np.log(4 << 20)))) // 256 * 256


def _with_buffers(name, instructions, size_of, alias_of, defined_at, num_parameters) -> dict:
    last_time = len(instructions) - 1
    last_use = dict(defined_at)
    for instruction in instructions:
        for tensor in instruction["operands"]:
            last_use[tensor] = max(last_use[tensor], instruction["time"])
    final_output = instructions[-1]["outputs"][0] if instructions else None
    if final_output is not None:
        last_use[final_output] = last_time
    buffers = []
    for instruction in instructions:
        roles = [(t, False) for t in instruction["operands"]] + [(t, True) for t in instruction["outputs"]]
        for tensor, is_output in roles:
            buffers.append({"index": len(buffers), "tensor_id": tensor, "alias_id": alias_of.get(tensor),
                            "size": size_of[tensor], "is_output": is_output, "target_time": instruction["time"],
                            "live_range": [defined_at[tensor], last_use[tensor]]})
    return {"name": name, "description": "synthetic program for tests", "jax_version": "none",
            "num_instructions": len(instructions), "instructions": instructions, "buffers": buffers}
